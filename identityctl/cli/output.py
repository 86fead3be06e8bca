"""How the CLI prints: rich tables and panels for people, JSON with --json for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

console = Console()
errors = Console(stderr=True)

JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON instead of a table.")


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def show_table(rows: Iterable[dict[str, Any]], columns: Sequence[tuple[str, str]], *,
               title: str, as_json: bool, json_data: Any = None) -> None:
    """Print ``rows`` as a table of ``columns`` (key, heading), or as JSON."""
    rows = list(rows)
    if as_json:
        emit_json(rows if json_data is None else json_data)
        return
    if not rows:
        console.print(f"[dim]No {title.lower()} yet.[/dim]")
        return
    table = Table(title=title, title_justify="left")
    for _, heading in columns:
        # An id is copied into the next command: it wraps rather than being cut.
        table.add_column(heading, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row.get(key)) for key, _ in columns))
    console.print(table)


def show_record(record: dict[str, Any], *, title: str, as_json: bool) -> None:
    """Print one record as key/value lines, or as JSON."""
    if as_json:
        emit_json(record)
        return
    table = Table(title=title, title_justify="left", show_header=False, box=None)
    table.add_column(style="bold cyan")
    table.add_column()
    for key, value in record.items():
        table.add_row(key, _cell(value, pretty=True))
    console.print(table)


def done(message: str, *, as_json: bool, data: Any = None) -> None:
    if as_json:
        emit_json(data if data is not None else {"ok": True, "message": message})
    else:
        console.print(f"[green]✓[/green] {message}")


def _cell(value: Any, pretty: bool = False) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        return json.dumps(value, indent=2 if pretty else None)
    return str(value)
