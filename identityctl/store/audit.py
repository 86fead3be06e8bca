"""The audit log: who did what, when, from where, and how it ended."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import peewee

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


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Which events a page or an export holds: each given field narrows them."""

    actor: str | None = None
    user_id: str | None = None
    #: The event name starts with this (``user.`` for every user event).
    event_prefix: str | None = None
    #: ``since <= at < until``.
    since: float | None = None
    until: float | None = None


#: Where a page ends: the ``(at, id)`` of its last event; the next page starts after it.
Position = tuple[float, int]


def page(wanted: AuditFilter, *, after: Position | None, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` events, newest first, that come after ``after`` in that order.

    PERF: keyset paging on ``(at, id)``: every page, the first or the ten-thousandth, seeks
    its start in an index (``(at, id)``, or ``(actor|user_id|event, at, id)`` with that filter:
    migration 19) and reads ``limit`` rows from there, whatever the table's size
    (bench/admin_pages.py). An event prefix is read along ``(at, id)`` and filtered, so a
    page of a rare prefix reads the events between its matches."""
    query = AuditEvent.select()
    if wanted.actor is not None:
        query = query.where(AuditEvent.actor == wanted.actor)
    if wanted.user_id is not None:
        query = query.where(AuditEvent.user_id == wanted.user_id)
    if wanted.event_prefix:
        query = query.where(AuditEvent.event.startswith(wanted.event_prefix))
    if wanted.since is not None:
        query = query.where(AuditEvent.at >= wanted.since)
    if wanted.until is not None:
        query = query.where(AuditEvent.at < wanted.until)
    if after is not None:
        query = query.where(peewee.Tuple(AuditEvent.at, AuditEvent.id) < peewee.Tuple(*after))
    rows = query.order_by(AuditEvent.at.desc(), AuditEvent.id.desc()).limit(limit)
    return [_api(row) for row in rows]


def _api(row: AuditEvent) -> dict[str, Any]:
    return {"id": row.id, "at": row.at, "event": row.event, "outcome": row.outcome,
            "actor": row.actor, "userId": row.user_id, "clientAddress": row.client_address,
            "details": row.details, "requestId": row.request_id}


def count(event: str, *, since: float, until: float) -> int:
    """How many ``event``s happened in ``since <= at < until`` (read in the index on
    ``(event, at, id)``)."""
    return AuditEvent.select().where((AuditEvent.event == event) & (AuditEvent.at >= since)
                                     & (AuditEvent.at < until)).count()


def events(*, since: float | None = None, user_id: str | None = None, event: str | None = None,
           limit: int = 200) -> list[dict[str, Any]]:
    query = AuditEvent.select()
    if since is not None:
        query = query.where(AuditEvent.at >= since)
    if user_id:
        query = query.where(AuditEvent.user_id == user_id)
    if event:
        query = query.where(AuditEvent.event == event)
    return [_api(row) for row in query.order_by(AuditEvent.id.desc()).limit(limit)]


def purge(retention_days: int) -> int:
    return AuditEvent.delete().where(AuditEvent.at < now() - retention_days * 86400).execute()
