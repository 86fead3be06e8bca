"""The audit log: recording an event with what follows from it (its metric, a webhook
delivery for each subscription that wants it, in the same transaction), reading it, and
keeping it within its retention. Who acted, from which address and in which request, is the
caller's ``RequestOrigin``."""

from __future__ import annotations

from typing import Any

from identityctl import metrics
from identityctl.services.origin import RequestOrigin
from identityctl.store import audit, db, webhooks
from identityctl.store.models import now


def record(event: str, outcome: str, *, origin: RequestOrigin, user_id: str | None = None,
           details: dict[str, Any] | None = None) -> None:
    """Append one event (in the caller's transaction when there is one), with a webhook
    delivery for each subscription that wants it, in the same transaction."""
    metrics.audit_event(event, outcome)
    at, actor, address, request_id = now(), origin.actor, origin.address, origin.request_id
    subscribed = webhooks.subscribers(event)
    event_details = details or {}
    if not subscribed:
        audit.append(at=at, event=event, outcome=outcome, actor=actor, user_id=user_id,
                     client_address=address, details=event_details, request_id=request_id)
        return
    with db.transaction():
        audit.append(at=at, event=event, outcome=outcome, actor=actor, user_id=user_id,
                     client_address=address, details=event_details, request_id=request_id)
        webhooks.enqueue(subscribed, event=event, at=at, data={
            "event": event, "outcome": outcome, "actor": actor, "userId": user_id,
            "clientAddress": address, "details": event_details, "requestId": request_id})


def events(*, since: float | None = None, user_id: str | None = None,
           event: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """The newest events first, filtered by time, user and event name."""
    return audit.events(since=since, user_id=user_id, event=event, limit=limit)


def purge(retention_days: int) -> int:
    """Delete events older than ``retention_days`` (security.audit_retention_days); how many."""
    return audit.purge(retention_days)

