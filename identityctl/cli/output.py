"""How the CLI prints: rich tables and panels for people, JSON with --json for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

console = Console()
errors = Console(stderr=True)

#: Columns whose values people copy into the next command (ids, handles, client ids, names
#: to sign in with, URLs): never broken across lines, however narrow the terminal.
IDENTIFIERS = frozenset({"id", "handle", "client id", "clientId", "username", "userId", "kid",
                         "credentialId", "identifier", "subject", "application", "url"})

#: The widest a word of another column stays whole when the terminal is narrow.
_WORD = 20
#: Wide enough to measure any table's narrowest layout.
_UNBOUNDED = 10_000

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
    cells = [[_cell(row.get(key)) for key, _ in columns] for row in rows]
    for index, (key, heading) in enumerate(columns):
        texts = [heading, *(row[index] for row in cells)]
        if key in IDENTIFIERS:  # as wide as its widest value, whatever the terminal's width
            table.add_column(heading, no_wrap=True,
                             min_width=max(len(line) for text in texts
                                           for line in text.splitlines() or [""]))
        else:  # the other columns give way: they wrap between words, and fold only a word
            # longer than _WORD
            longest = max(len(word) for text in texts for word in [*text.split(), ""])
            table.add_column(heading, overflow="fold", min_width=min(longest, _WORD))
    for row in cells:
        table.add_row(*row)
    # Wider than the terminal rather than cut when even that does not fit: rich would shrink
    # every column (identifiers too) to the terminal's width.
    needed = Measurement.get(console, console.options.update_width(_UNBOUNDED), table).minimum
    terminal = console.width
    console.width = max(terminal, needed)  # print() never goes past the console's width
    try:
        console.print(table, crop=False)
    finally:
        console.width = terminal


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
