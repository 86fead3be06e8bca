"""`identityctl email`: check that mail goes out (test) and see what was sent (outbox).

Mail is configured in the `[email]` table of the configuration; the server sends it from
the outbox in the database (retried while the SMTP server is down, sent once).
"""

from __future__ import annotations

import typer

from identityctl.cli.common import Session, command, when
from identityctl.cli.output import JsonOption, done, show_table

email_app = typer.Typer(help="E-mail: send a test message, see the outbox.",
                        no_args_is_help=True)


@command(email_app, "test")
def email_test(
    to: str = typer.Option(..., "--to", help="Address to send the test message to."),
    as_json: bool = JsonOption,
) -> None:
    """Send a test message now, through the configured SMTP server (not the outbox), and
    say what the server answered:

        identityctl email test --to you@example.com
    """
    from identityctl.services.context import ServiceContext
    from identityctl.services.delivery import mail

    config = Session.connected()
    mail.send_test(ServiceContext.for_config(config), to)
    done(f"Sent a test message to {to} through {config.email.smtp_host}:"
         f"{config.email.smtp_port}.", as_json=as_json, data={"to": to, "sent": True})


@command(email_app, "outbox")
def email_outbox(
    limit: int = typer.Option(50, "--limit", min=1, max=1000, help="How many, newest first."),
    as_json: bool = JsonOption,
) -> None:
    """The newest e-mail messages: to whom, what, and whether it went out (sent, waiting
    for a retry with the last error, or given up)."""
    from identityctl.services.delivery import mail

    Session.connected()
    records = []
    for entry in mail.recent(limit):
        records.append({"id": entry.id, "to": entry.target, "subject": entry.subject,
                        "state": entry.state, "attempts": entry.attempts,
                        "queuedAt": when(entry.created_at),
                        "sentAt": when(entry.delivered_at), "lastError": entry.last_error})
    show_table(records, [("queuedAt", "Queued"), ("to", "To"), ("subject", "Subject"),
                         ("state", "State"), ("attempts", "Tries"), ("lastError", "Last error")],
               title="E-mail outbox", as_json=as_json, json_data=records)
