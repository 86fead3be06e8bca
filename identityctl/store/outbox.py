"""The outbox: deliveries committed with the change that caused them, claimed and delivered
by whichever instance gets there first (a claim runs out, so a crashed instance's work is
picked up), retried with backoff, delivered once."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from peewee import fn

from identityctl.store.models import OutboxMessage, now


@dataclass(frozen=True, slots=True)
class OutboxRecord:
    id: str
    kind: str
    target: str
    payload: dict[str, Any]
    created_at: float
    attempts: int


def enqueue(*, kind: str, target: str, payload: dict[str, Any], send: bool = True) -> str:
    """(In the caller's transaction: the message lands with the change, or not at all.)

    ``send=False`` writes a row that is never delivered nor listed: the same work as a
    real message, for answers that must not differ in timing (an unknown address)."""
    if not send:
        return OutboxMessage.create(kind=kind, target="", payload={},
                                    delivered_at=now()).id
    return OutboxMessage.create(kind=kind, target=target, payload=payload).id


def claim_due(*, room: dict[str, int], busy_targets: Collection[str],
              lease_seconds: float) -> list[OutboxRecord]:
    """Due messages, each claimed for this caller for ``lease_seconds``: at most
    ``room[kind]`` of each kind, at most one per target, and none for ``busy_targets``
    (this caller is delivering to them already), so one slow target holds one delivery.

    A message is claimed by a conditional update, so of several instances polling at once
    exactly one gets it.
    """
    kinds = [kind for kind, free in room.items() if free > 0]
    if not kinds:
        return []
    moment = now()
    unclaimed = OutboxMessage.claimed_until.is_null() | (OutboxMessage.claimed_until < moment)
    pending = (OutboxMessage.delivered_at.is_null() & OutboxMessage.failed_at.is_null()
               & (OutboxMessage.next_attempt_at <= moment))
    wanted = OutboxMessage.kind.in_(kinds)
    if busy_targets:
        wanted &= OutboxMessage.target.not_in(list(busy_targets))
    # A few more candidates than places: some may share a target or be taken meanwhile.
    candidates = list(OutboxMessage.select().where(pending & unclaimed & wanted)
                      .order_by(OutboxMessage.next_attempt_at)
                      .limit(4 * sum(room[kind] for kind in kinds)))
    free, targets, claimed = dict(room), set(), []
    for row in candidates:
        if free[row.kind] <= 0 or row.target in targets:
            continue
        taken = OutboxMessage.update(claimed_until=moment + lease_seconds).where(
            (OutboxMessage.id == row.id) & pending & unclaimed).execute()
        if taken:
            free[row.kind] -= 1
            targets.add(row.target)
            claimed.append(OutboxRecord(id=row.id, kind=row.kind, target=row.target,
                                        payload=dict(row.payload or {}),
                                        created_at=row.created_at, attempts=row.attempts))
    return claimed


def delivered(message_id: str, *, keep: dict[str, Any] | None = None) -> None:
    """Mark the message delivered; ``keep``: what of its payload stays (a mail's body, with
    any code in it, is not kept once sent)."""
    changes: dict[str, Any] = {"delivered_at": now(), "claimed_until": None,
                               "attempts": OutboxMessage.attempts + 1}
    if keep is not None:
        changes["payload"] = keep
    OutboxMessage.update(**changes).where(OutboxMessage.id == message_id).execute()


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """A message as the outbox view shows it."""

    id: str
    kind: str
    target: str
    subject: str
    created_at: float
    attempts: int
    delivered_at: float | None
    failed_at: float | None
    last_error: str

    @property
    def state(self) -> str:
        """sent, given up, retrying (after a failed attempt) or queued."""
        if self.delivered_at:
            return "sent"
        if self.failed_at:
            return "given up"
        return "retrying" if self.attempts else "queued"


def recent(*, kind: str, limit: int, failed: bool = False) -> list[OutboxEntry]:
    """The newest ``limit`` messages of ``kind`` (never the unsent stand-ins); ``failed``:
    only those whose last attempt failed (retrying or given up)."""
    query = OutboxMessage.select().where((OutboxMessage.kind == kind)
                                         & (OutboxMessage.target != ""))
    if failed:
        query = query.where(OutboxMessage.delivered_at.is_null()
                            & (OutboxMessage.last_error != ""))
    rows = query.order_by(OutboxMessage.created_at.desc()).limit(limit)
    return [OutboxEntry(id=row.id, kind=row.kind, target=row.target,
                        subject=str((row.payload or {}).get("subject", "")),
                        created_at=row.created_at, attempts=row.attempts,
                        delivered_at=row.delivered_at, failed_at=row.failed_at,
                        last_error=row.last_error) for row in rows]


def retry_later(message_id: str, *, at: float, error: str) -> None:
    OutboxMessage.update(next_attempt_at=at, claimed_until=None, last_error=error[:500],
                         attempts=OutboxMessage.attempts + 1).where(
        OutboxMessage.id == message_id).execute()


def give_up(message_id: str, *, error: str, keep: dict[str, Any] | None = None) -> None:
    """Mark the message given up; ``keep`` as for :func:`delivered`."""
    changes: dict[str, Any] = {"failed_at": now(), "claimed_until": None,
                               "last_error": error[:500],
                               "attempts": OutboxMessage.attempts + 1}
    if keep is not None:
        changes["payload"] = keep
    OutboxMessage.update(**changes).where(OutboxMessage.id == message_id).execute()


def depth_by_kind() -> dict[str, int]:
    """Messages waiting (not delivered, not given up), by kind."""
    rows = (OutboxMessage.select(OutboxMessage.kind, fn.COUNT(OutboxMessage.id).alias("n"))
            .where(OutboxMessage.delivered_at.is_null() & OutboxMessage.failed_at.is_null())
            .group_by(OutboxMessage.kind))
    return {row.kind: row.n for row in rows}
