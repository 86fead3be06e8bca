"""The few write patterns every table shares, with their errors, written once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import peewee

from identityctl.errors import Conflict, NotFound
from identityctl.store.db import transaction

M = TypeVar("M", bound=peewee.Model)


def page(query: peewee.ModelSelect, *, limit: int | None,
         offset: int = 0) -> tuple[int, list[Any]]:
    """One page of ``query`` (ordered by the caller, so pages do not overlap) and how many
    rows it has on all pages; every row when ``limit`` is None. PERF: a page costs the same
    whatever the table's size, apart from the count (docs/performance.md)."""
    if limit is None:
        rows = list(query.offset(offset) if offset else query)
        return offset + len(rows), rows
    return query.count(), list(query.limit(limit).offset(offset))


def insert(model: type[M], *, conflict: str, code: str, **fields: Any) -> M:
    """Insert one row; a uniqueness violation becomes a 409 with ``conflict`` as message."""
    with unique(conflict=conflict, code=code):
        return model.create(**fields)


@contextmanager
def unique(*, conflict: str, code: str) -> Iterator[None]:
    """A transaction in which a uniqueness violation becomes a 409 with ``conflict`` as
    message (for an insert of a compiled statement)."""
    try:
        with transaction():
            yield
    except peewee.IntegrityError:
        raise Conflict(conflict, code=code) from None


def update(model: type[peewee.Model], row_id: str, *, what: str, code: str,
           conflict: str = "", conflict_code: str = "", **fields: Any) -> None:
    """Update columns of the row with primary key ``row_id`` or raise 404 ``code``."""
    try:
        with transaction():
            changed = model.update(**fields).where(model._meta.primary_key == row_id).execute()
    except peewee.IntegrityError:
        raise Conflict(conflict or f"The change conflicts with another {what}.",
                       code=conflict_code or "conflict") from None
    if not changed:
        raise NotFound(f"No {what} with id '{row_id}'.", code=code)


def delete(model: type[peewee.Model], row_id: str, *, what: str, code: str,
           in_use: str = "", in_use_code: str = "") -> None:
    """Delete the row with primary key ``row_id``; 404 when absent, 409 when still referenced."""
    try:
        with transaction():
            deleted = model.delete().where(model._meta.primary_key == row_id).execute()
    except peewee.IntegrityError:
        raise Conflict(in_use or f"The {what} is still in use.",
                       code=in_use_code or f"{code.removesuffix('_not_found')}_in_use") from None
    if not deleted:
        raise NotFound(f"No {what} with id '{row_id}'.", code=code)
