"""Hot statements whose SQL peewee builds once per kind of database (:class:`CompiledQuery`),
run on the connection without peewee's per-statement wrappers, their rows read into plain
:class:`Row` records. Every statement of the store is compiled when the database connects
(:func:`compile_statements`)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import peewee

from identityctl.store.connection import database, execute


class StatementError(Exception):
    """A compiled statement's builder cannot be bound safely (a programming error; raised
    when the database connects, so the tests find it on SQLite and on PostgreSQL)."""


class _Parameter:
    """Stands for a statement parameter while its SQL is built, so that the order in which
    peewee emits the placeholders names the parameter each one binds."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<parameter {self.name}>"


class CompiledQuery:
    """A hot-path statement whose SQL peewee builds once per kind of database, then reused.

    Peewee builds a query's SQL text on every execution: about half the CPU of a small
    request. A hot path's statements keep one shape, so ``build`` (the parameters in, the
    peewee query out) is compiled once per kind of database, and later calls only bind new
    values, by name: ``statement.execute(user_id=..., now=...)``. A constant of the statement
    is a parameter with a default (``lambda user_id, still_open=False: ...``), so every value
    the SQL carries is a named parameter.

    Compiling builds the query with a stand-in for each parameter and reads which one peewee
    emitted for each placeholder, so the binding follows peewee, not the builder's argument
    order. It refuses (:class:`StatementError`) a builder that emits a value that is not a
    parameter or leaves a parameter out. Every statement is compiled when the database
    connects (:func:`compile_statements`), so a PostgreSQL-only mistake shows in the tests,
    not first in production. Pass values as the database takes them (``field.db_value`` for
    JSON and the like): the stand-ins keep peewee from converting them.

    A builder with ``*values`` (an ``IN`` list) is compiled per number of values; those are
    passed positionally, the rest by name.
    """

    #: Every statement made, compiled by compile_statements() when the database connects.
    every: list[CompiledQuery] = []

    def __init__(self, build: Callable[..., peewee.Query]) -> None:
        self._build = build
        parameters = inspect.signature(build).parameters.values()
        self._variadic = next((p.name for p in parameters if p.kind is p.VAR_POSITIONAL), "")
        self._names = tuple(p.name for p in parameters if p.kind is not p.VAR_POSITIONAL)
        self._defaults = {p.name: p.default for p in parameters if p.default is not p.empty}
        self._compiled: dict[tuple[type, int], tuple[str, tuple[str, ...]]] = {}
        self._columns: dict[tuple[type, type], _ColumnReaders] = {}
        CompiledQuery.every.append(self)

    def compile(self, count: int = 0) -> tuple[str, tuple[str, ...]]:
        """The SQL text for the connected kind of database (with ``count`` values of the
        ``*values`` parameter), and the parameter name each placeholder binds, in order."""
        key = (type(database.obj), count)
        compiled = self._compiled.get(key)
        if compiled is None:
            listed = [f"{self._variadic}[{index}]" for index in range(count)]
            stand_ins = {name: peewee.Value(_Parameter(name), converter=False, unpack=False)
                         for name in (*self._names, *listed)}
            sql, emitted = self._build(*(stand_ins[name] for name in listed),
                                       **{name: stand_ins[name] for name in self._names}).sql()
            order = tuple(getattr(value, "name", None) for value in emitted)
            if None in order:
                raise StatementError(
                    f"{self._build.__qualname__}: peewee emitted "
                    f"{emitted[order.index(None)]!r}, which is not a parameter; make it a "
                    "parameter with a default, or a literal (peewee.SQL)")
            unused = set(self._names).difference(order)
            if unused:
                raise StatementError(f"{self._build.__qualname__}: parameter(s) "
                                     f"{', '.join(sorted(unused))} not in the statement")
            compiled = self._compiled[key] = (sql, order)  # type: ignore[assignment]
        return compiled

    def _bound(self, values: tuple[Any, ...], named: dict[str, Any]) -> tuple[str, list[Any]]:
        if values and not self._variadic:
            raise TypeError(f"{self._build.__qualname__}: bind parameters by name")
        sql, order = self.compile(len(values))
        if self._defaults:
            named = self._defaults | named
        if values:
            named = named | {f"{self._variadic}[{index}]": value
                             for index, value in enumerate(values)}
        try:
            return sql, [named[name] for name in order]
        except KeyError as missing:
            raise TypeError(f"{self._build.__qualname__}: no value for {missing}") from None

    def first(self, model: type[peewee.Model], /, *values: Any, **named: Any) -> Row | None:
        """The first row, its columns read as ``model``'s fields read them, or None."""
        cursor = execute(database.obj, *self._bound(values, named))
        row = cursor.fetchone()
        return None if row is None else self._row(model, cursor, row)

    def all(self, model: type[peewee.Model], /, *values: Any, **named: Any) -> list[Row]:
        cursor = execute(database.obj, *self._bound(values, named))
        return [self._row(model, cursor, row) for row in cursor.fetchall()]

    def _row(self, model: type[peewee.Model], cursor: Any, values: Sequence[Any]) -> Row:
        # What peewee's model cursor wrapper does per row, minus a model instance (its
        # constructor and a descriptor call per attribute read), minus working out again,
        # for every execution, which column is which field, and minus the conversions that
        # return the database's value as it is. PERF: see docs/performance.md.
        key = (model, type(database.obj))
        columns = self._columns.get(key)
        if columns is None:
            columns = self._columns[key] = _column_readers(model, cursor.description)
        names, conversions = columns
        row = Row()
        data = row.__dict__
        data.update(zip(names, values, strict=True))
        for name, convert in conversions:
            value = data[name]
            if value is not None:
                data[name] = convert(value)
        return row

    def rows(self, *values: Any, **named: Any) -> list[tuple[Any, ...]]:
        """Every row as a tuple of the database's values (no field conversions)."""
        return execute(database.obj, *self._bound(values, named)).fetchall()

    def scalar(self, *values: Any, **named: Any) -> Any:
        """The first column of the first row, or None."""
        row = execute(database.obj, *self._bound(values, named)).fetchone()
        return row[0] if row else None

    def execute(self, *values: Any, **named: Any) -> int:
        """Run a write; the number of rows it changed."""
        return execute(database.obj, *self._bound(values, named)).rowcount


def compile_statements() -> None:
    """Compile every statement of the store for the connected kind of database (a ``*values``
    one with one and with two values), so a builder that cannot be bound fails at connect."""
    import identityctl.store as package  # its modules make the statements when imported

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    for statement in CompiledQuery.every:
        for count in ((1, 2) if statement._variadic else (0,)):
            statement.compile(count)


class Row(SimpleNamespace):
    """A row of a :class:`CompiledQuery`: one attribute per column, named as on a model
    instance (a foreign key as ``<field>_id``, an alias as itself)."""


#: A statement's result columns: the attribute each fills, and the conversions of those whose
#: field does not return the database's value as it is.
_ColumnReaders = tuple[tuple[str, ...], tuple[tuple[str, Callable[[Any], Any]], ...]]
#: Fields whose conversion returns what SQLite and PostgreSQL already give (str, int, float).
_AS_STORED = frozenset({peewee.CharField, peewee.TextField, peewee.IntegerField,
                        peewee.BigIntegerField, peewee.AutoField, peewee.FloatField,
                        peewee.DoubleField})


def _column_readers(model: type[peewee.Model], description: Sequence[Any]) -> _ColumnReaders:
    fields = model._meta.columns
    names: list[str] = []
    conversions: list[tuple[str, Callable[[Any], Any]]] = []
    for column, *_ in description:
        field = fields.get(column)
        if field is None:  # an alias
            names.append(column)
            continue
        if isinstance(field, peewee.ForeignKeyField):
            name, stored = field.object_id_name, field.rel_field
        else:
            name, stored = field.name, field
        names.append(name)
        if type(stored) not in _AS_STORED:
            conversions.append((name, stored.python_value))
    return tuple(names), tuple(conversions)
