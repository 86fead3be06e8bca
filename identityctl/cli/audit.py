"""`identityctl audit`: read the audit log."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import typer

from identityctl.cli.common import Session, command
from identityctl.cli.output import JsonOption, show_table
from identityctl.errors import InvalidField

audit_app = typer.Typer(help="Read and prune the audit log (sign-ins, failures, credential "
                             "and admin changes). `identityctl audit [--since] [--user] "
                             "[--json]` is `identityctl audit list`.",
                        invoke_without_command=True)

_DURATION = re.compile(r"^(\d+)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(value: str) -> float:
    """'15m', '24h', '7d' (ago) or an ISO 8601 time -> epoch seconds."""
    match = _DURATION.match(value.strip())
    if match:
        return time.time() - int(match.group(1)) * _SECONDS[match.group(2)]
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidField("--since", "use a duration such as 15m, 24h, 7d or an ISO 8601 "
                           "time such as 2026-11-22T08:00") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


SinceOption = typer.Option(None, help="Only events since: 15m, 24h, 7d or ISO time.")
UserOption = typer.Option(None, help="Only events about this user id or username.")
EventOption = typer.Option(None, help="Only this event name, e.g. passkey.register.")
LimitOption = typer.Option(200, help="At most this many events, newest first.")


@audit_app.callback()
def audit_default(
    ctx: typer.Context,
    since: str | None = SinceOption,
    user: str | None = UserOption,
    event: str | None = EventOption,
    limit: int = LimitOption,
    as_json: bool = JsonOption,
) -> None:
    """Read and prune the audit log. Without a command: `list` with these options.

        identityctl audit --since 24h --user alice --json
    """
    if ctx.invoked_subcommand is None:
        _show_as_command(since=since, user=user, event=event, limit=limit, as_json=as_json)


@command(audit_app, "list")
def audit_list(
    since: str | None = SinceOption,
    user: str | None = UserOption,
    event: str | None = EventOption,
    limit: int = LimitOption,
    as_json: bool = JsonOption,
) -> None:
    """Show audit events, newest first. Example:

        identityctl audit list --since 24h --user alice
    """
    _show(since=since, user=user, event=event, limit=limit, as_json=as_json)


def _show(*, since: str | None, user: str | None, event: str | None, limit: int,
          as_json: bool) -> None:
    from identityctl.services import audit
    from identityctl.services.directory.users import require_user

    Session.connected()
    user_id = require_user(user).id if user else None
    events = audit.events(since=parse_since(since) if since else None, user_id=user_id,
                          event=event, limit=limit)
    rows = [{**e, "time": datetime.fromtimestamp(e["at"], UTC).strftime("%Y-%m-%d %H:%M:%S")}
            for e in events]
    show_table(rows, [("time", "Time (UTC)"), ("event", "Event"), ("outcome", "Outcome"),
                      ("actor", "Actor"), ("userId", "User"), ("clientAddress", "Client"),
                      ("details", "Details")], title="Audit events", as_json=as_json,
               json_data=events)


# The group callback gets no error handling of its own: borrow the one `command` wraps
# around `list` (a domain error is one line, or JSON with --json, and exit status 1).
_unlisted = typer.Typer()
command(_unlisted, "list")(_show)
_show_as_command = _unlisted.registered_commands[0].callback


@command(audit_app, "purge")
def audit_purge(as_json: bool = JsonOption) -> None:
    """Delete events older than security.audit_retention_days. `serve` does this at start;
    for a server that runs for months, run this daily (cron, a systemd timer)."""
    from identityctl.cli.output import done
    from identityctl.services import audit

    config = Session.connected()
    removed = audit.purge(config.security.audit_retention_days)
    done(f"removed {removed} event(s) older than {config.security.audit_retention_days} days",
         as_json=as_json, data={"removed": removed})
