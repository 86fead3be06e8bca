"""The audit log: recording an event with what follows from it (its metric, a webhook
delivery for each subscription that wants it, in the same transaction), reading it, keeping
it within its retention, and naming the client address of what a request's tools change."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from identityctl import logs, metrics
from identityctl.store import audit, db, webhooks
from identityctl.store.models import now

_request_address: ContextVar[str] = ContextVar("identityctl_request_address", default="")


def record(event: str, outcome: str, *, actor: str = "", user_id: str | None = None,
           client_address: str = "", details: dict[str, Any] | None = None) -> None:
    """Append one event (in the caller's transaction when there is one), with a webhook
    delivery for each subscription that wants it, in the same transaction."""
    metrics.audit_event(event, outcome)
    at, address = now(), client_address or _request_address.get()
    subscribed = webhooks.subscribers(event)
    # The request that caused it: its log line and X-Request-ID say the same.
    request_id = logs.current_request_id()
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


@contextlib.contextmanager
def request_address(address: str) -> Iterator[None]:
    """Events recorded inside name ``address`` when they name none themselves (the /mcp tools
    call the same services as the CLI, which take no address)."""
    reset = _request_address.set(address)
    try:
        yield
    finally:
        _request_address.reset(reset)
