"""Webhook subscriptions, and the deliveries an audit event makes for them (into the outbox,
in the event's transaction: delivered once, or not at all)."""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from identityctl.errors import NotFound
from identityctl.store import db, outbox
from identityctl.store.models import OutboxMessage, WebhookSubscription

#: The outbox kind of a webhook delivery.
WEBHOOK = "webhook"
#: PERF: every audit event asks who subscribed to it; subscriptions change rarely, so each
#: process reads them at most once per this many seconds (a subscription made on another
#: instance takes effect there within it; on this one at once). A cache, not state.
SUBSCRIPTIONS_SECONDS = 5.0
#: Keyed weakly by the store's database object: a store closed and dropped takes its entry.
_cache: weakref.WeakKeyDictionary[Any, tuple[float, list[SubscriptionRecord]]] = \
    weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class SubscriptionRecord:
    id: str
    url: str
    events: list[str]
    secret: str
    description: str
    created_at: float

    def to_api(self) -> dict[str, Any]:
        """Never the secret (shown once, when made)."""
        return {"id": self.id, "url": self.url, "events": self.events,
                "description": self.description, "createdAt": self.created_at}

    def wants(self, event: str) -> bool:
        return any(pattern == "*" or pattern == event
                   or (pattern.endswith(".*") and event.startswith(pattern[:-1]))
                   for pattern in self.events)


def _record(row: WebhookSubscription) -> SubscriptionRecord:
    return SubscriptionRecord(id=row.id, url=row.url, events=list(row.events or []),
                              secret=row.secret, description=row.description,
                              created_at=row.created_at)


def create(*, url: str, events: list[str], secret: str, description: str) -> SubscriptionRecord:
    made = _record(WebhookSubscription.create(url=url, events=events, secret=secret,
                                              description=description))
    _cache.pop(db.database.obj, None)
    return made


def list_subscriptions() -> list[SubscriptionRecord]:
    return [_record(row) for row in
            WebhookSubscription.select().order_by(WebhookSubscription.created_at)]


def require(subscription_id: str) -> SubscriptionRecord:
    row = WebhookSubscription.get_or_none(WebhookSubscription.id == subscription_id)
    if row is None:
        raise NotFound(f"No webhook subscription {subscription_id!r}.",
                       code="webhook_not_found")
    return _record(row)


def delete(subscription_id: str) -> None:
    WebhookSubscription.delete().where(WebhookSubscription.id == subscription_id).execute()
    _cache.pop(db.database.obj, None)


def subscribers(event: str) -> list[SubscriptionRecord]:
    """The subscriptions that want ``event`` (read at most every SUBSCRIPTIONS_SECONDS).
    A delivery given up is audited, never sent as a webhook itself (no loops)."""
    if event.startswith(f"outbox.{WEBHOOK}"):
        return []
    moment = time.monotonic()
    cached = _cache.get(db.database.obj)
    if cached is None or moment - cached[0] >= SUBSCRIPTIONS_SECONDS:
        cached = (moment, list_subscriptions())
        _cache[db.database.obj] = cached
    return [subscription for subscription in cached[1] if subscription.wants(event)]


def enqueue(subscriptions: list[SubscriptionRecord], *, event: str, at: float,
            data: dict[str, Any]) -> None:
    """(In the event's transaction.) One delivery per subscription: the Standard Webhooks
    payload ``{type, timestamp, data}``."""
    body = {"type": event, "timestamp": datetime.fromtimestamp(at, UTC).isoformat(),
            "data": data}
    for subscription in subscriptions:
        outbox.enqueue(kind=WEBHOOK, target=subscription.url,
                       payload={"subscriptionId": subscription.id, "body": body})


def given_up_payload(delivery_id: str) -> dict[str, Any] | None:
    """A webhook delivery's payload (its subscription and the event) when it was given up;
    None while it is still tried, or once sent (a sent one keeps only its outcome). No such
    delivery: 404 ``webhook_delivery_not_found``."""
    row = OutboxMessage.get_or_none((OutboxMessage.id == delivery_id)
                                    & (OutboxMessage.kind == WEBHOOK)
                                    & (OutboxMessage.target != ""))
    if row is None:
        raise NotFound(f"No webhook delivery {delivery_id!r}.",
                       code="webhook_delivery_not_found")
    return dict(row.payload or {}) if row.failed_at is not None else None
