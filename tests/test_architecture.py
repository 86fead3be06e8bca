"""The code's structure, as docs/architecture.md draws it: no import cycle anywhere in the
package, every room of services/ placed in the layering contract, and every package the doc
names present (and every package present named).

The layers themselves are checked by ``lint-imports`` (scripts/test.sh); these tests keep
what that contract cannot see.
"""

from __future__ import annotations

import pathlib
import re
import tomllib

import grimp

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "identityctl"


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iteratively)."""
    order: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in order:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        order[root] = lowest[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, following = work[-1]
            for imported in following:
                if imported not in order:
                    order[imported] = lowest[imported] = len(order)
                    stack.append(imported)
                    on_stack.add(imported)
                    work.append((imported, iter(sorted(
                        graph.find_modules_directly_imported_by(imported)))))
                    break
                if imported in on_stack:
                    lowest[module] = min(lowest[module], order[imported])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    lowest[parent] = min(lowest[parent], lowest[module])
                if lowest[module] == order[module]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == module:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return groups


def test_no_module_of_the_package_imports_itself_through_others() -> None:
    graph = grimp.build_graph("identityctl", cache_dir=None)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.one", "a.two", "a.three"):
        graph.add_module(module)
    graph.add_import(importer="a.one", imported="a.two")
    graph.add_import(importer="a.two", imported="a.one")
    graph.add_import(importer="a.three", imported="a.one")
    assert _cycles(graph) == [["a.one", "a.two"]]


def _contracts() -> list[dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["importlinter"]["contracts"]


def test_every_room_of_services_is_a_layer_of_its_contract() -> None:
    (inside,) = [contract for contract in _contracts()
                 if contract.get("containers") == ["identityctl.services"]]
    named = {name.strip() for layer in inside["layers"] for name in layer.split("|")}
    present = {path.stem if path.is_file() else path.name
               for path in (PACKAGE / "services").iterdir()
               if (path.suffix == ".py" and path.stem != "__init__")
               or (path.is_dir() and (path / "__init__.py").exists())}
    assert inside["exhaustive"] is True
    assert named == present


def test_every_package_is_in_the_outer_layering_and_the_architecture_doc() -> None:
    (outer,) = [contract for contract in _contracts()
                if contract["type"] == "layers" and "containers" not in contract]
    layered = {name.strip().removeprefix("identityctl.")
               for layer in outer["layers"] for name in layer.split("|")}
    packages = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    modules = {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    assert packages <= layered
    assert layered <= packages | modules
    drawn = (ROOT / "docs" / "architecture.md").read_text()
    for package in packages:
        assert re.search(rf"\b{package}/", drawn), f"docs/architecture.md does not name {package}/"
    for room in (PACKAGE / "services").iterdir():
        if room.is_dir() and (room / "__init__.py").exists():
            assert f"services/{room.name}/" in drawn, \
                f"docs/architecture.md does not name services/{room.name}/"


def test_services_take_who_acted_as_a_value_not_from_a_context_variable() -> None:
    """Who acted, from which address and in which request reach the services as one
    ``RequestOrigin`` argument (docs/architecture.md): no module of services/ keeps a context
    variable or reads the log's request id."""
    readers = [str(path.relative_to(ROOT)) for path in (PACKAGE / "services").rglob("*.py")
               if re.search(r"\bContextVar\b|current_request_id|get_access_token",
                            path.read_text())]
    assert readers == []
