"""The audit log: who did what, when, from where, and how it ended."""

from __future__ import annotations

from typing import Any

from identityctl.store.compiled import CompiledQuery
from identityctl.store.models import AuditEvent, now

#: ``details`` is JSON text already (AuditEvent.details.db_value).
_INSERT = CompiledQuery(lambda at, event, outcome, actor, user_id, client_address, details,
                        request_id: AuditEvent.insert(
                            at=at, event=event, outcome=outcome, actor=actor, user_id=user_id,
                            client_address=client_address, details=details,
                            request_id=request_id))


def append(*, at: float, event: str, outcome: str, actor: str, user_id: str | None,
           client_address: str, details: dict[str, Any], request_id: str) -> None:
    """Insert one event (in the caller's transaction when there is one)."""
    _INSERT.execute(at=at, event=event, outcome=outcome, actor=actor, user_id=user_id,
                    client_address=client_address,
                    details=AuditEvent.details.db_value(details), request_id=request_id)


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
