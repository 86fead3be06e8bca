"""The reference docs name everything the code serves, so they cannot drift from it: every
MCP tool (docs/mcp.md), every CLI command and sub-command (docs/cli.md), every flow
executor and mode (docs/flows.md) and every error code the code raises (docs/). A name
added to the code without its doc fails here. No server: the tools come from the MCP server
object, the commands from the Typer app, the codes from the source.
"""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from identityctl.cli.main import app
from identityctl.config import Config
from identityctl.errors import IdentityError
from identityctl.flow.definition import EXECUTORS, validate_flow
from identityctl.services.context import ServiceContext

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: A code is a snake_case word; anything else a `code=` carries is not one.
CODE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$|^[a-z]+$")


def doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def served_tools() -> list[str]:
    from identityctl.mcp.tools import build_server  # imports the mcp SDK (about a second)

    server = build_server(ServiceContext.for_config(Config()))
    return [tool.name for tool in asyncio.run(server.list_tools())]


def test_every_served_mcp_tool_is_in_the_mcp_reference() -> None:
    reference = doc("mcp.md")
    tools = served_tools()
    assert tools
    assert [name for name in tools if f"| `{name}` |" not in reference] == []


def test_no_doc_counts_the_tools() -> None:
    """A number of tools ("16 `svc_*` tools") is out of date with the next tool: the docs
    name them instead (README, docs/, `identityctl mcp --help`)."""
    counted = re.compile(r"\b\d+\s+(?:\S+\s+)?tools?\b")
    mcp_help = typer.main.get_command(app).commands["mcp"].help  # type: ignore[attr-defined]
    texts = {page.name: page.read_text(encoding="utf-8")
             for page in [ROOT / "README.md", *DOCS.glob("*.md")]}
    texts["identityctl mcp --help"] = mcp_help
    assert {name: counted.findall(text) for name, text in texts.items()
            if counted.search(text)} == {}


def cli_commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every runnable command of the click tree Typer builds, as its words."""
    sub_commands = getattr(command, "commands", None)
    if not sub_commands:
        yield path
        return
    for name, sub in sub_commands.items():
        yield from cli_commands(sub, (*path, name))


def test_every_cli_command_is_in_the_cli_reference() -> None:
    """`identityctl user show`, or among alternatives: `identityctl user disable|enable`."""
    reference = doc("cli.md")
    commands = list(cli_commands(typer.main.get_command(app)))
    assert ("user", "show") in commands

    def named(path: tuple[str, ...]) -> bool:
        last = rf"(?:[\w-]+\|)*{re.escape(path[-1])}(?:\|[\w-]+)*"
        words = " ".join([*map(re.escape, path[:-1]), last])
        return re.search(rf"\bidentityctl {words}(?![\w-])", reference) is not None

    assert [" ".join(path) for path in commands if not named(path)] == []


def test_every_flow_executor_and_mode_is_in_the_flows_reference() -> None:
    reference = doc("flows.md")
    missing = [name for name in EXECUTORS if f"| `{name}`" not in reference]
    missing += [f"{name} {mode}" for name, modes in EXECUTORS.items() for mode in modes
                if mode and f"| `{name}` `{mode}` |" not in reference]
    assert missing == []


def test_the_unknown_executor_message_in_the_flows_reference_is_the_real_one() -> None:
    flow = {"handle": "h", "name": "n", "flowType": "AUTHENTICATION", "nodes": [
        {"id": "start", "type": "START", "onSuccess": "credentials_auth"},
        {"id": "credentials_auth", "type": "TASK_EXECUTION",
         "executor": {"name": "SmsOtpExecutor"}, "onSuccess": "end"},
        {"id": "end", "type": "END"}]}
    try:
        validate_flow(flow)
    except IdentityError as refusal:
        assert f"`{refusal.description}`" in doc("flows.md")
    else:
        raise AssertionError("an unknown executor was accepted")


def raised_codes() -> set[str]:
    """The codes the source gives errors: a `code=` argument (either side of a conditional)
    and an error class's `code = ...`."""
    found: set[str] = set()
    for source in (ROOT / "identityctl").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "code":
                values = [node.value]
            elif isinstance(node, ast.ClassDef):
                values = [statement.value for statement in node.body
                          if isinstance(statement, ast.Assign) and any(
                              isinstance(target, ast.Name) and target.id == "code"
                              for target in statement.targets)]
            else:
                continue
            found.update(constant.value for value in values for constant in ast.walk(value)
                         if isinstance(constant, ast.Constant)
                         and isinstance(constant.value, str) and CODE.match(constant.value))
    return found


def test_every_error_code_the_code_raises_is_documented() -> None:
    documented = "\n".join(page.read_text(encoding="utf-8") for page in DOCS.glob("*.md"))
    codes = raised_codes()
    assert {"invalid_field", "dpop_key_mismatch", "login_required"} <= codes
    assert sorted(code for code in codes
                  if not re.search(rf"(?<![\w-]){code}(?![\w-])", documented)) == []
