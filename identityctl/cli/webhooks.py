"""`identityctl webhook`: tell your own services about audit events (sign-ins, new passkeys,
users created...) at an HTTPS URL, signed as Standard Webhooks say: add, list, remove, and
the delivery log."""

from __future__ import annotations

import typer

from identityctl.cli.common import ORIGIN, Session, YesOption, command, confirm_and_delete, when
from identityctl.cli.output import JsonOption, console, emit_json, show_record, show_table

webhook_app = typer.Typer(help="Event webhooks: audit events to your HTTPS endpoints (add, "
                               "list, remove, deliveries).", no_args_is_help=True)


@command(webhook_app, "add")
def webhook_add(
    url: str = typer.Argument(..., metavar="URL", help="Your endpoint (https)."),
    event: list[str] = typer.Option(..., "--event", "-e",
                                    help="An audit event type (passkey.register), a prefix "
                                         "(user.*) or * (repeat for more)."),
    description: str = typer.Option("", "--description", help="What it is for."),
    as_json: bool = JsonOption,
) -> None:
    """Subscribe an endpoint to audit events and print its signing secret ONCE:

        identityctl webhook add https://hooks.example.com/identity -e passkey.register \\
            -e 'user.*'

    Each delivery is a POST of {"type", "timestamp", "data"} with the headers webhook-id,
    webhook-timestamp and webhook-signature; verify them with any Standard Webhooks
    library and the secret. Deliveries are retried with backoff; webhook-id stays the same.
    """
    from identityctl.services.delivery import webhooks

    Session.connected()
    made, secret = webhooks.add_subscription(url=url, events=event, description=description,
                                             origin=ORIGIN)
    if as_json:
        emit_json({**made.to_api(), "secret": secret})
        return
    show_record(made.to_api(), title=f"Subscribed {made.url}", as_json=False)
    console.print(f"[bold]Signing secret (shown once):[/bold] {secret}", soft_wrap=True)


@command(webhook_app, "list")
def webhook_list(as_json: bool = JsonOption) -> None:
    """List the subscriptions (never their secrets)."""
    from identityctl.services.delivery import webhooks

    Session.connected()
    records = [subscription.to_api() for subscription in webhooks.list_subscriptions()]
    rows = [{**record, "events": " ".join(record["events"])} for record in records]
    show_table(rows, [("id", "Id"), ("url", "URL"), ("events", "Events"),
                      ("description", "Description")], title="Webhook subscriptions",
               as_json=as_json, json_data=records)


@command(webhook_app, "remove")
def webhook_remove(subscription: str = typer.Argument(..., metavar="ID"),
                   yes: bool = YesOption, as_json: bool = JsonOption) -> None:
    """Stop delivering to a subscription (asks first unless --yes)."""
    from identityctl.services.delivery import webhooks

    Session.connected()
    confirm_and_delete(f"webhook subscription {subscription}", subscription,
                       webhooks.remove_subscription, yes=yes, as_json=as_json, shown={})


@command(webhook_app, "deliveries")
def webhook_deliveries(
    limit: int = typer.Option(50, "--limit", min=1, max=1000, help="How many, newest first."),
    as_json: bool = JsonOption,
) -> None:
    """The delivery log: each delivery's endpoint, state (sent, retrying with the last
    error, given up) and attempts.

        identityctl webhook deliveries --limit 20
    """
    from identityctl.services.delivery import webhooks

    Session.connected()
    records = webhooks.deliveries(limit)
    rows = [{**record, "queuedAt": when(record["queuedAt"])} for record in records]
    show_table(rows, [("queuedAt", "Queued"), ("url", "URL"), ("state", "State"),
                      ("attempts", "Tries"), ("lastError", "Last error")],
               title="Webhook deliveries", as_json=as_json, json_data=records)
