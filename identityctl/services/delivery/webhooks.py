"""Event webhooks: an administrator subscribes an HTTPS URL to audit event types; each event
is delivered there once, signed as the Standard Webhooks specification says
(services/delivery/outbox.py), from the outbox (store/webhooks.py).
"""

from __future__ import annotations

import base64
import re
import secrets
from typing import Any
from urllib.parse import urlsplit

from identityctl.config import LOCAL_HOSTS
from identityctl.errors import Conflict, InvalidField
from identityctl.services import audit
from identityctl.services.origin import RequestOrigin
from identityctl.store import db, outbox
from identityctl.store import webhooks as store
from identityctl.store.webhooks import WEBHOOK, SubscriptionRecord

_PATTERN = re.compile(r"^(\*|[a-z0-9_]+(\.[a-z0-9_]+)*(\.\*)?)$")


def add_subscription(*, url: str, events: list[str], description: str = "",
                     origin: RequestOrigin) -> tuple[SubscriptionRecord, str]:
    """Subscribe ``url`` to ``events`` (types like ``passkey.register``, prefixes like
    ``user.*``, or ``*``); the subscription and its signing secret (shown once)."""
    parts = urlsplit(url)
    if not parts.hostname or not (parts.scheme == "https" or (
            parts.scheme == "http" and parts.hostname in LOCAL_HOSTS)):
        raise InvalidField("url", "must be an https URL (http only to this machine)")
    if parts.username is not None or parts.password is not None:
        # Lists show the URL: a secret belongs in the signature, not in the address.
        raise InvalidField("url", "must not carry a user name or password; the deliveries "
                           "are signed with the subscription's secret")
    if not events:
        raise InvalidField("events", "name at least one event type, prefix (user.*) or *")
    for index, pattern in enumerate(events):
        if not _PATTERN.match(pattern):
            raise InvalidField(f"events[{index}]", f"{pattern!r} is not an event type, a "
                               "prefix ending in .* or *")
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    with db.transaction():
        made = store.create(url=url, events=list(dict.fromkeys(events)), secret=secret,
                            description=description)
        audit.record("webhook.create", "success", origin=origin,
                     details={"id": made.id, "url": url, "events": made.events})
    return made, secret


def list_subscriptions() -> list[SubscriptionRecord]:
    return store.list_subscriptions()


def remove_subscription(subscription_id: str, *, origin: RequestOrigin) -> None:
    """Stop deliveries to a subscription (those queued are dropped when their turn comes)."""
    found = store.require(subscription_id)
    with db.transaction():
        store.delete(found.id)
        audit.record("webhook.delete", "success", origin=origin,
                     details={"id": found.id, "url": found.url})


def deliveries(limit: int = 50, *, failed: bool = False) -> list[dict[str, Any]]:
    """The delivery log: the newest deliveries, sent, retrying (with the last error) or
    given up; ``failed``: only those retrying or given up."""
    return [{"id": entry.id, "url": entry.target, "queuedAt": entry.created_at,
             "state": entry.state,
             "attempts": entry.attempts, "lastError": entry.last_error}
            for entry in outbox.recent(kind=WEBHOOK, limit=limit, failed=failed)]


def redeliver(delivery_id: str, *, origin: RequestOrigin) -> str:
    """Queue a delivery that was given up once more: the same event to the same subscription,
    as a new delivery (its own ``webhook-id``) tried from now on like any other; its id."""
    payload = store.given_up_payload(delivery_id)
    if payload is None:
        raise Conflict("Only a delivery that was given up is sent again: one still being "
                       "tried is retried by itself, and a sent one keeps only its outcome.",
                       code="webhook_delivery_not_given_up")
    subscription = store.require(payload["subscriptionId"])
    with db.transaction():
        queued = outbox.enqueue(kind=WEBHOOK, target=subscription.url, payload=payload)
        audit.record("webhook.redeliver", "success", origin=origin, details={
            "id": subscription.id, "url": subscription.url, "event": payload["body"]["type"],
            "delivery": delivery_id, "redelivery": queued})
    return queued
