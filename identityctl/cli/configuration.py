"""`identityctl export` and `identityctl apply`: the deployment's configuration as one YAML
document kept in version control (docs/configuration-as-code.md)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import typer

from identityctl.cli.common import Session, command, read_document
from identityctl.cli.output import JsonOption, console, emit_json

FORMATS = ("yaml", "json")


def dump(document: Any, form: str = "yaml") -> str:
    from identityctl.services.admin.records import document_text

    return document_text(document, form)


def load(path: Path) -> Any:
    """A YAML (or JSON, which is YAML) document from ``path`` ('-': standard input), at
    most MAX_DOCUMENT_BYTES long and without aliases (services/admin/records.py: the admin
    API reads a sent document the same way)."""
    from identityctl.services.admin.records import parsed_document

    return parsed_document(read_document(path), str(path))


def add_configuration_commands(app: typer.Typer) -> None:
    command(app, "export")(export)
    command(app, "apply")(apply)


def export(
    to: Path | None = typer.Option(None, "--to", metavar="FILE",
                                   help="Write here (mode 0600) instead of to the terminal."),
    form: str = typer.Option("yaml", "--format", help="yaml or json."),
    section: list[str] = typer.Option([], "--section", "-s",
                                      help="Only this section (repeat for more): themes, "
                                           "flows, organizationUnits, userTypes, roles, "
                                           "identityProviders, applications."),
) -> None:
    """Write the configuration as one reviewable document: applications, flows, themes,
    organization units, user types, roles and identity providers, named by handle or
    client id, secrets as references ({env: NAME}), never inline.

        identityctl export --to identity.yaml
        git add identity.yaml && git commit -m "identity configuration"

    Users, passkeys, sessions and tokens are data, not configuration: back them up with
    `identityctl backup`.
    """
    from identityctl.services.admin import configuration
    from identityctl.services.context import ServiceContext

    if form not in FORMATS:
        raise typer.BadParameter("use yaml or json", param_hint="--format")
    config = Session.connected()
    text = dump(configuration.export(ServiceContext.for_config(config), only=section), form)
    if to is None:
        typer.echo(text, nl=False)
        return
    descriptor = os.open(to, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # also when the file was there already
    with os.fdopen(descriptor, "w") as written:
        written.write(text)
    console.print(f"[green]✓[/green] wrote {to}", soft_wrap=True)


def apply(
    file: Path = typer.Option(..., "--file", "-f", metavar="FILE",
                              help="A document from `identityctl export` (YAML or JSON; '-' "
                                   "reads standard input)."),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="Show what would change; change nothing."),
    as_json: bool = JsonOption,
) -> None:
    """Make the deployment match a document and print what changed, as a diff.

        identityctl apply -f identity.yaml --dry-run    # review
        identityctl apply -f identity.yaml

    All or nothing: every change runs in one transaction with the same checks as the other
    commands. Applying the same document again changes nothing. Within each section the
    document holds, entries it does not list are deleted (the seeded defaults are kept);
    sections it leaves out are not touched. A new entry's secret is read from its
    reference ({env: NAME} or {file: PATH}) when applied.
    """
    from identityctl.services.admin import configuration
    from identityctl.services.context import ServiceContext

    document = load(file)
    config = Session.connected()
    changes = configuration.apply(ServiceContext.for_config(config), document,
                                  dry_run=dry_run, origin=configuration.APPLY)
    if as_json:
        emit_json({"dryRun": dry_run, "changes": [change.to_api() for change in changes]})
        return
    show_changes(changes, dry_run=dry_run)


_MARKS = {"create": ("+", "green"), "update": ("~", "yellow"), "delete": ("-", "red")}


def show_changes(changes: list[Any], *, dry_run: bool) -> None:
    for change in changes:
        mark, colour = _MARKS[change.action]
        console.print(f"[{colour}]{mark} {change.section}/{change.key}[/{colour}]",
                      soft_wrap=True, highlight=False)
        if change.action == "update":
            for line in _diff(change.before, change.after):
                console.print(f"    {line}", style=_line_style(line), soft_wrap=True,
                              markup=False, highlight=False)
            if change.secret_changed:
                console.print("    the client secret changes to the one its reference names",
                              style="yellow")
    counts = {action: sum(change.action == action for change in changes)
              for action in _MARKS}
    if not changes:
        console.print("[green]✓[/green] Nothing to change: the deployment matches.")
        return
    created, updated, deleted = (counts[action] for action in _MARKS)
    if dry_run:
        console.print(f"[bold]Dry run:[/bold] {created} to create, {updated} to update, "
                      f"{deleted} to delete. Nothing was changed.")
    else:
        console.print(f"[green]✓[/green] Applied: {created} created, {updated} updated, "
                      f"{deleted} deleted.")


def _diff(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return [line for line in difflib.unified_diff(dump(before).splitlines(),
                                                  dump(after).splitlines(), lineterm="", n=2)
            if not line.startswith(("---", "+++"))]


def _line_style(line: str) -> str:
    return {"+": "green", "-": "red", "@": "cyan"}.get(line[:1], "")
