"""The audit log: who did what, when, from where, and how it ended."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from identityctl import logs, metrics
from identityctl.store import webhooks
from identityctl.store.db import CompiledQuery, transaction
from identityctl.store.models import AuditEvent, now

#: ``details`` is JSON text already (AuditEvent.details.db_value).
_INSERT = CompiledQuery(lambda at, event, outcome, actor, user_id, client_address, details,
                        request_id: AuditEvent.insert(
                            at=at, event=event, outcome=outcome, actor=actor, user_id=user_id,
                            client_address=client_address, details=details,
                            request_id=request_id))


_request_address: ContextVar[str] = ContextVar("identityctl_request_address", default="")


@contextlib.contextmanager
def request_address(address: str) -> Iterator[None]:
    """Events recorded inside name ``address`` when they name no client address themselves:
    the /mcp tools call the same services as the CLI, which take no address."""
    reset = _request_address.set(address)
    try:
        yield
    finally:
        _request_address.reset(reset)


def record(event: str, outcome: str, *, actor: str = "", user_id: str | None = None,
           client_address: str = "", details: dict[str, Any] | None = None) -> None:
    """Append one event (in the caller's transaction when there is one), with a webhook
    delivery for each subscription that wants it, in the same transaction."""
    metrics.audit_event(event, outcome)
    at, address = now(), client_address or _request_address.get()
    subscribed = webhooks.subscribers(event)
    # The request that caused it: its log line and X-Request-ID say the same.
    request_id = logs.current_request_id()
    arguments = {"at": at, "event": event, "outcome": outcome, "actor": actor,
                 "user_id": user_id, "client_address": address,
                 "details": AuditEvent.details.db_value(details or {}),
                 "request_id": request_id}
    if not subscribed:
        _INSERT.execute(**arguments)
        return
    with transaction():
        _INSERT.execute(**arguments)
        webhooks.enqueue(subscribed, event=event, at=at, data={
            "event": event, "outcome": outcome, "actor": actor, "userId": user_id,
            "clientAddress": address, "details": details or {}, "requestId": request_id})


def events(*, since: float | None = None, user_id: str | None = None, event: str | None = None,
           limit: int = 200) -> list[dict[str, Any]]:
    query = AuditEvent.select()
    if since is not None:
        query = query.where(AuditEvent.at >= since)
    if user_id:
        query = query.where(AuditEvent.user_id == user_id)
    if event:
        query = query.where(AuditEvent.event == event)
    return [{"id": row.id, "at": row.at, "event": row.event, "outcome": row.outcome,
             "actor": row.actor, "userId": row.user_id, "clientAddress": row.client_address,
             "details": row.details, "requestId": row.request_id}
            for row in query.order_by(AuditEvent.id.desc()).limit(limit)]


def purge(retention_days: int) -> int:
    return AuditEvent.delete().where(AuditEvent.at < now() - retention_days * 86400).execute()
