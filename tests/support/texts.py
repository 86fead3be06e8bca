"""Every English text a person can read, collected from the sources: what each message
catalog (``identityctl/i18n/<tag>.json``) translates.

The texts come from:

- the pages' scripts (``ui/static/*.js``): the literal of each ``t("...")`` call (``"a" +
  "b"`` joined), and every value of a constant ``t()`` is given by name (``t(TEXT[code])``,
  ``t(NAME_RULE)``, or ``const known = TEXT[code]; t(known)``);
- the Python code: the text of each ``i18n.translate(language, text)`` call and of each
  function that passes one of its parameters on as that text (a page's ``text(english)``,
  ``pages.message_page(title=..., text=..., back=(text, url))``), followed back through
  local names, the tables they index (``TITLES[mode]``, ``MESSAGES[kind]``), loops, ``x if
  c else y`` and the functions that return them;
- what the server hands the pages to translate: the message of each error of
  ``identityctl.errors`` (the console translates a refusal's), the error page's title and
  the literal description of each ``UntrustedRedirect`` (``gate.error_page``), the
  description of each scope (consent), and the labels of the default flows' steps (a field
  without a label is named after its identifier, as ``gate.js`` does).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import identityctl
from identityctl import errors
from identityctl.oauth.consent import SCOPE_DESCRIPTIONS
from identityctl.oauth.errors import UntrustedRedirect

PACKAGE = Path(identityctl.__file__).parent
STATIC = PACKAGE / "ui" / "static"
FLOWS = PACKAGE / "flow" / "defaults"

_LITERAL = r'"(?:[^"\\]|\\.)*"'
_JOINED = rf"{_LITERAL}(?:\s*\+\s*{_LITERAL})*"
_CONSTANT = r"[A-Z][A-Z0-9_]*"


@cache
def every_text() -> frozenset[str]:
    """Every text of the pages and mails, in English (not one that is only a placeholder,
    such as a mail's ``{code}`` line)."""
    found = script_texts(sorted(STATIC.glob("*.js"))) | \
        python_texts(sorted(PACKAGE.rglob("*.py"))) | served_texts()
    return frozenset(text for text in found if re.sub(r"\{\w+\}", "", text).strip())


# --- the pages' scripts -----------------------------------------------------------------------

def _joined(call: str) -> str:
    return "".join(json.loads(part) for part in re.findall(_LITERAL, call))


def script_texts(paths: Iterable[Path]) -> set[str]:
    """The texts the scripts at ``paths`` give ``t()``."""
    texts: set[str] = set()
    for path in paths:
        source = path.read_text()
        texts |= {_joined(call) for call in re.findall(rf"\bt\(\s*({_JOINED})", source)}
        tables = set(re.findall(rf"\bt\(\s*({_CONSTANT})\b", source))
        tables |= {table for local, table in re.findall(rf"const (\w+) = ({_CONSTANT})\b", source)
                   if re.search(rf"\bt\(\s*{local}\s*\)", source)}
        for table in tables:
            if found := re.search(rf"const {table} = ({_JOINED});", source):
                texts.add(_joined(found.group(1)))
            elif found := re.search(rf"const {table} = \{{(.*?)\}};", source, re.DOTALL):
                texts |= {_joined(value) for value in
                          re.findall(rf"(?:\w+|{_LITERAL}):\s*({_JOINED})", found.group(1))}
    return texts


# --- the Python code --------------------------------------------------------------------------

_Scope = tuple[ast.AST, ...]  # the module, then each enclosing function, innermost last
_Function = ast.FunctionDef | ast.AsyncFunctionDef
#: A function that translates a text it is given: (the module a function defined in another
#: one is known in, else None; its name) -> the parameters that are texts, by name, and their
#: positions (None for a keyword-only one).
_Wrappers = dict[tuple[Path | None, str], dict[str, int | None]]
#: identityctl.i18n.translate(language, text, **values)
_TRANSLATE: _Wrappers = {(None, "translate"): {"text": 1}}


@dataclass(frozen=True, eq=False)
class _Parameter:
    """A value that is whatever the function ``function`` is given as ``name``."""

    name: str
    function: ast.AST


def _bound(target: ast.AST, name: str) -> bool:
    return any(isinstance(node, ast.Name) and node.id == name for node in ast.walk(target))


def _own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``function``'s body, not those of the functions defined in it."""
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, _Function | ast.Lambda | ast.ClassDef):
            pending.extend(ast.iter_child_nodes(node))


class _Module:
    """One module's texts: what its calls of a translating function are given."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tree = ast.parse(path.read_text(), filename=str(path))
        self.functions = {node.name: node for node in self.tree.body
                          if isinstance(node, _Function)}

    def calls(self) -> Iterator[tuple[ast.Call, _Scope]]:
        """Every call in the module, with the functions around it."""
        def visit(node: ast.AST, scope: _Scope) -> Iterator[tuple[ast.Call, _Scope]]:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.Call):
                    yield child, scope
                yield from visit(child, (*scope, child) if isinstance(child, _Function)
                                 else scope)
        return visit(self.tree, (self.tree,))

    def given(self, call: ast.Call, wrappers: _Wrappers,
              scope: _Scope) -> set[str | _Parameter]:
        """What ``call`` gives a translating function as its text (resolved values)."""
        name = call.func.id if isinstance(call.func, ast.Name) else \
            call.func.attr if isinstance(call.func, ast.Attribute) else ""
        parameters = {**wrappers.get((None, name), {}), **wrappers.get((self.path, name), {})}
        found: set[str | _Parameter] = set()
        for parameter, position in parameters.items():
            arguments = [keyword.value for keyword in call.keywords if keyword.arg == parameter]
            if position is not None and position < len(call.args):
                arguments.append(call.args[position])
            for argument in arguments:
                found |= self.resolve(argument, scope, set())
        return found

    def resolve(self, node: ast.AST, scope: _Scope, seen: set[int]) -> set[str | _Parameter]:
        """The strings ``node`` can be, as far as the code says without running it: its
        literals, a table's values, a parameter (as a :class:`_Parameter`)."""
        if id(node) in seen:
            return set()
        seen.add(id(node))
        match node:
            case ast.Constant(value=str() as text):
                return {text}
            case ast.Dict(values=values):
                parts = [value for value in values if value is not None]
            case ast.Tuple(elts=parts) | ast.List(elts=parts) | ast.Set(elts=parts) | \
                    ast.BoolOp(values=parts):
                pass
            case ast.IfExp(body=body, orelse=orelse):
                parts = [body, orelse]
            case ast.Subscript(value=value):
                parts = [value]
            case ast.Call(func=ast.Attribute(attr="get" | "items" | "values", value=table),
                          args=arguments):
                parts = [table, *arguments[1:]]
            case ast.Call(func=ast.Name(id=function)) if function in self.functions:
                returned = self.functions[function]
                return set().union(*(self.resolve(step.value, (self.tree, returned), seen)
                                     for step in _own_nodes(returned)
                                     if isinstance(step, ast.Return) and step.value))
            case ast.Name(id=name):
                return self._named(name, scope, seen)
            case _:  # an f-string, an attribute, a computation: nothing known
                return set()
        return set().union(*(self.resolve(part, scope, seen) for part in parts))

    def _named(self, name: str, scope: _Scope, seen: set[int]) -> set[str | _Parameter]:
        """What the name ``name`` is bound to in the innermost of ``scope`` that binds it."""
        for index in range(len(scope) - 1, 0, -1):
            function = scope[index]
            assert isinstance(function, _Function)
            arguments = function.args
            if name in {argument.arg for argument in (*arguments.posonlyargs, *arguments.args,
                                                      *arguments.kwonlyargs)}:
                return {_Parameter(name, function)}
            values = [*self._bindings(function, name)]
            if values:
                return set().union(*(self.resolve(value, scope[:index + 1], seen)
                                     for value in values))
        return set().union(*(self.resolve(value, scope[:1], seen)
                             for value in self._bindings(self.tree, name, own=False)))

    def _bindings(self, where: ast.AST, name: str, own: bool = True) -> Iterator[ast.AST]:
        """The values assigned to ``name`` in ``where`` (a loop's: what it iterates)."""
        nodes = _own_nodes(where) if own else iter(getattr(where, "body", []))
        for node in nodes:
            match node:
                case ast.Assign(targets=targets, value=value) if any(
                        _bound(target, name) for target in targets):
                    yield value
                case ast.AnnAssign(target=target, value=value) if value is not None and \
                        _bound(target, name):
                    yield value
                case ast.For(target=target, iter=value) | ast.comprehension(
                        target=target, iter=value) if _bound(target, name):
                    yield value


def _wrappers(modules: Iterable[_Module]) -> _Wrappers:
    """``translate`` and every function that hands one of its parameters to a translating
    function as the text, found until no more are. A function defined in another one (a
    page's ``text``) is known in its module only."""
    wrappers = dict(_TRANSLATE)
    while True:
        found: _Wrappers = {}
        for module in modules:
            for call, scope in module.calls():
                function = scope[-1]
                if not isinstance(function, _Function):
                    continue
                positional = [argument.arg for argument in
                              (*function.args.posonlyargs, *function.args.args)]
                key = (None if len(scope) == 2 else module.path, function.name)
                for value in module.given(call, wrappers, scope):
                    if isinstance(value, _Parameter) and value.function is function:
                        found.setdefault(key, {})[value.name] = (
                            positional.index(value.name) if value.name in positional else None)
        if all(wrappers.get(key, {}).keys() >= texts.keys() for key, texts in found.items()):
            return wrappers
        for key, texts in found.items():
            wrappers[key] = {**wrappers.get(key, {}), **texts}


@cache
def _package() -> tuple[dict[Path, _Module], _Wrappers]:
    modules = {path: _Module(path) for path in sorted(PACKAGE.rglob("*.py"))}
    return modules, _wrappers(modules.values())


def python_texts(paths: Iterable[Path]) -> set[str]:
    """The texts the Python modules at ``paths`` translate."""
    modules, wrappers = _package()
    texts: set[str] = set()
    for path in paths:
        module = modules[path]
        for call, scope in module.calls():
            texts |= {value for value in module.given(call, wrappers, scope)
                      if value and not isinstance(value, _Parameter)}
    return texts


# --- what the server hands the pages ----------------------------------------------------------

def _untrusted_redirects() -> Iterator[str]:
    modules, _ = _package()
    for module in modules.values():
        for call, _scope in module.calls():
            if isinstance(call.func, ast.Name) and call.func.id == UntrustedRedirect.__name__ \
                    and call.args and isinstance(call.args[0], ast.Constant):
                yield call.args[0].value


def _humanized(identifier: str) -> str:
    """A field's name from its identifier, as ``gate.js`` makes it (``family_name``:
    "Family name")."""
    words = re.sub(r"[_-]+", " ", re.sub(r"([a-z])([A-Z])", r"\1 \2", identifier))
    return words[:1].upper() + words[1:].lower()


def _flow_labels() -> Iterator[str]:
    """What the sign-in page shows of each default flow: its buttons' labels and its
    visible fields' names."""
    for path in sorted(FLOWS.glob("*.json")):
        for node in json.loads(path.read_text())["nodes"]:
            for prompt in node.get("prompts", ()):
                if label := prompt.get("action", {}).get("label"):
                    yield label
                for field in prompt.get("inputs", ()):
                    if field["type"] != "HIDDEN":
                        yield field.get("label") or _humanized(field.get("identifier")
                                                               or field["ref"])


def served_texts() -> set[str]:
    """The English texts the server hands the pages, which translate them."""
    refusals = {kind.message for kind in vars(errors).values()
                if isinstance(kind, type) and issubclass(kind, errors.IdentityError)}
    return {*refusals, UntrustedRedirect.message, *_untrusted_redirects(),
            *SCOPE_DESCRIPTIONS.values(), *_flow_labels()}
