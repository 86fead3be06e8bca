"""The outbox: deliveries committed with the change that caused them, claimed and delivered
by whichever instance gets there first (a claim runs out, so a crashed instance's work is
picked up), retried with backoff, delivered once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from identityctl.store.models import OutboxMessage, now


@dataclass(frozen=True, slots=True)
class OutboxRecord:
    id: str
    kind: str
    target: str
    payload: dict[str, Any]
    created_at: float
    attempts: int


def enqueue(*, kind: str, target: str, payload: dict[str, Any]) -> str:
    """(In the caller's transaction: the message lands with the change, or not at all.)"""
    return OutboxMessage.create(kind=kind, target=target, payload=payload).id


def claim_due(*, limit: int, lease_seconds: float) -> list[OutboxRecord]:
    """Up to ``limit`` due messages, each claimed for this caller for ``lease_seconds``.

    A message is claimed by a conditional update, so of several instances polling at once
    exactly one gets it.
    """
    moment = now()
    unclaimed = OutboxMessage.claimed_until.is_null() | (OutboxMessage.claimed_until < moment)
    pending = (OutboxMessage.delivered_at.is_null() & OutboxMessage.failed_at.is_null()
               & (OutboxMessage.next_attempt_at <= moment))
    candidates = list(OutboxMessage.select().where(pending & unclaimed)
                      .order_by(OutboxMessage.next_attempt_at).limit(limit))
    claimed = []
    for row in candidates:
        taken = OutboxMessage.update(claimed_until=moment + lease_seconds).where(
            (OutboxMessage.id == row.id) & pending & unclaimed).execute()
        if taken:
            claimed.append(OutboxRecord(id=row.id, kind=row.kind, target=row.target,
                                        payload=dict(row.payload or {}),
                                        created_at=row.created_at, attempts=row.attempts))
    return claimed


def delivered(message_id: str) -> None:
    OutboxMessage.update(delivered_at=now(), claimed_until=None,
                         attempts=OutboxMessage.attempts + 1).where(
        OutboxMessage.id == message_id).execute()


def retry_later(message_id: str, *, at: float, error: str) -> None:
    OutboxMessage.update(next_attempt_at=at, claimed_until=None, last_error=error[:500],
                         attempts=OutboxMessage.attempts + 1).where(
        OutboxMessage.id == message_id).execute()


def give_up(message_id: str, *, error: str) -> None:
    OutboxMessage.update(failed_at=now(), claimed_until=None, last_error=error[:500],
                         attempts=OutboxMessage.attempts + 1).where(
        OutboxMessage.id == message_id).execute()


def depth() -> int:
    """Messages waiting (not delivered, not given up)."""
    return OutboxMessage.select().where(OutboxMessage.delivered_at.is_null()
                                        & OutboxMessage.failed_at.is_null()).count()
