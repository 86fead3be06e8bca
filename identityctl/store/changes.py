"""Proposed changes: what an MCP tool would have changed, waiting for a person's decision.

A decision is one conditional UPDATE on the row's state, so of two approvals of one change
exactly one wins (its row count says which).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from identityctl.errors import NotFound
from identityctl.store.models import ProposedChange

PENDING, APPROVED, REJECTED, EXPIRED, FAILED = (
    "pending", "approved", "rejected", "expired", "failed")
STATES = (PENDING, APPROVED, REJECTED, EXPIRED, FAILED)


@dataclass(slots=True)
class ChangeRecord:
    id: str
    summary: str
    document: dict[str, Any]
    diff: list[dict[str, Any]]
    digest: str
    client_id: str
    author: str
    created_at: float
    expires_at: float
    state: str
    decided_by: str | None
    decided_at: float | None
    reason: str

    def to_api(self) -> dict[str, Any]:
        return {"id": self.id, "summary": self.summary, "document": self.document,
                "diff": self.diff, "digest": self.digest, "clientId": self.client_id,
                "author": self.author, "createdAt": self.created_at,
                "expiresAt": self.expires_at, "state": self.state,
                "decidedBy": self.decided_by, "decidedAt": self.decided_at,
                "reason": self.reason}


def _record(row: ProposedChange) -> ChangeRecord:
    return ChangeRecord(id=row.id, summary=row.summary, document=row.document, diff=row.diff,
                        digest=row.digest, client_id=row.client_id, author=row.author,
                        created_at=row.created_at, expires_at=row.expires_at, state=row.state,
                        decided_by=row.decided_by, decided_at=row.decided_at,
                        reason=row.reason)


def create(*, summary: str, document: dict[str, Any], diff: list[dict[str, Any]], digest: str,
           client_id: str, author: str, now: float, expires_at: float) -> ChangeRecord:
    return _record(ProposedChange.create(
        summary=summary, document=document, diff=diff, digest=digest, client_id=client_id,
        author=author, created_at=now, expires_at=expires_at))


def pending_of(client_id: str, *, now: float) -> int:
    """How many of ``client_id``'s changes wait for a decision and have not expired."""
    return (ProposedChange.select()
            .where((ProposedChange.client_id == client_id)
                   & (ProposedChange.state == PENDING) & (ProposedChange.expires_at > now))
            .count())


def require(change_id: str) -> ChangeRecord:
    row = ProposedChange.get_or_none(ProposedChange.id == change_id)
    if row is None:
        raise NotFound(f"No proposed change {change_id!r}.", code="change_not_found")
    return _record(row)


def page(*, limit: int, after: tuple[float, str] | None = None,
         state: str | None = None) -> list[ChangeRecord]:
    """Newest first, from after the keyset position ``after`` (created_at, id)."""
    query = ProposedChange.select()
    if state is not None:
        query = query.where(ProposedChange.state == state)
    if after is not None:
        at, change_id = after
        query = query.where((ProposedChange.created_at < at) | (
            (ProposedChange.created_at == at) & (ProposedChange.id < change_id)))
    query = query.order_by(ProposedChange.created_at.desc(), ProposedChange.id.desc())
    return [_record(row) for row in query.limit(limit)]


def decide(change_id: str, *, state: str, by: str, at: float, reason: str = "",
           open_until: float | None = None) -> bool:
    """Move a pending change to ``state``; whether this call did (``open_until``: only if it
    has not expired by then)."""
    condition = (ProposedChange.id == change_id) & (ProposedChange.state == PENDING)
    if open_until is not None:
        condition &= ProposedChange.expires_at > open_until
    return ProposedChange.update(state=state, decided_by=by, decided_at=at, reason=reason
                                 ).where(condition).execute() == 1

