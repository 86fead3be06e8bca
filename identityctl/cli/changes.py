"""`identityctl change`: the changes an AI assistant proposed over MCP (with
``admin.approve_mcp_changes = true``), which take effect only when an admin approves them:
list, show (the diff), approve, reject."""

from __future__ import annotations

from typing import Any

import typer

from identityctl.cli.common import ORIGIN, Session, command, when
from identityctl.cli.configuration import show_changes
from identityctl.cli.output import JsonOption, console, emit_json, show_record, show_table

change_app = typer.Typer(help="Changes an AI assistant proposed over MCP, waiting for an "
                              "admin's approval (list, show, approve, reject).",
                         no_args_is_help=True)

ChangeId = typer.Argument(..., metavar="ID", help="The change's id, as `change list` and the "
                                                  "assistant's answer show it.")


def _diff_of(change: dict[str, Any]) -> list[Any]:
    from identityctl.services.admin.configuration import Change

    return [Change(item["section"], item["key"], item["action"], item["before"],
                   item["after"], secret_changed=item["secretChanged"])
            for item in change["diff"]]


@command(change_app, "list")
def change_list(
    state: str = typer.Option(None, "--state",
                              help="Only these: pending, approved, rejected, expired, failed."),
    limit: int = typer.Option(50, "--limit", min=1, max=200, help="How many, newest first."),
    as_json: bool = JsonOption,
) -> None:
    """The proposed changes, newest first, with who proposed them and their state.

        identityctl change list --state pending
    """
    from identityctl.services.admin import changes

    Session.connected()
    page = changes.list_changes(limit=limit, state=state)["items"]
    rows = [{**change, "createdAt": when(change["createdAt"]),
             "expiresAt": when(change["expiresAt"])} for change in page]
    show_table(rows, [("id", "Id"), ("summary", "Change"), ("author", "Proposed by"),
                      ("state", "State"), ("createdAt", "Proposed"),
                      ("expiresAt", "Expires")],
               title="Proposed changes", as_json=as_json, json_data=page)


@command(change_app, "show")
def change_show(change_id: str = ChangeId, as_json: bool = JsonOption) -> None:
    """One change: who proposed it, its state and the diff it makes (as `identityctl apply
    --dry-run` prints one).

        identityctl change show 6f1c...
    """
    from identityctl.services.admin import changes

    Session.connected()
    change = changes.shown(changes.require_change(change_id))
    if as_json:
        emit_json(change)
        return
    show_record({key: change[key] for key in ("id", "summary", "author", "clientId", "state",
                                              "digest", "decidedBy", "reason")}
                | {"proposed": when(change["createdAt"]), "expires": when(change["expiresAt"])},
                title=f"Change {change['id']}", as_json=False)
    if not change["intact"]:
        console.print("[red]Its digest no longer matches its diff: it was altered and cannot "
                      "be approved.[/red]")
    show_changes(_diff_of(change), dry_run=True)


@command(change_app, "approve")
def change_approve(change_id: str = ChangeId, as_json: bool = JsonOption) -> None:
    """Apply a pending change, in one transaction, as the host admin (audited as `cli`; in
    the admin console an admin approves with a passkey instead).

        identityctl change show 6f1c...     # read the diff first
        identityctl change approve 6f1c...

    Refused (and marked failed, nothing changed) when the deployment moved since it was
    proposed, so the diff it would make now is not the one shown: ask for it again.
    """
    from identityctl.services.admin import changes
    from identityctl.services.context import ServiceContext

    config = Session.connected()
    change = changes.approve_on_host(ServiceContext.for_config(config), change_id,
                                     origin=ORIGIN)
    if as_json:
        emit_json(change)
        return
    show_changes(_diff_of(change), dry_run=False)


@command(change_app, "reject")
def change_reject(change_id: str = ChangeId,
                  reason: str = typer.Option("", "--reason", help="Why, for the audit log."),
                  as_json: bool = JsonOption) -> None:
    """Turn a pending change down; nothing is applied.

        identityctl change reject 6f1c... --reason "not this theme"
    """
    from identityctl.services.admin import changes

    Session.connected()
    change = changes.reject(change_id, origin=ORIGIN, reason=reason)
    if as_json:
        emit_json(change)
        return
    console.print(f"[green]✓[/green] rejected change {change['id']}")
