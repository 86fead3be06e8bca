"""Counters per throttle key (an account at an address, an address, an account), in the store.

Every server instance shares them, so N instances behind a load balancer throttle as one.
A counter counts within a window that starts at its first event; what the counts mean is
decided in ``services.throttle``.
"""

from __future__ import annotations

from dataclasses import dataclass

import peewee

from identityctl.store.compiled import CompiledQuery
from identityctl.store.db import transaction
from identityctl.store.models import Throttle


@dataclass(slots=True)
class Counter:
    """One key's counter: events in the window that began at ``window_start``."""

    count: int
    window_start: float
    blocked_until: float | None


#: PERF: one read per throttled request, whatever the number of keys.
_COUNTERS = CompiledQuery(lambda *keys: Throttle.select(
    Throttle.key, Throttle.failures, Throttle.window_start, Throttle.blocked_until)
    .where(Throttle.key.in_(list(keys))))

#: PERF: count one event (a ceremony start: a hot path) in one statement: a new row, or
#: the existing one counted on (a new window when its window began at ``over`` or before).
_ONE = peewee.SQL("1")  # a literal: the statement's parameters stay its inputs
_COUNT = CompiledQuery(lambda key, now, over: Throttle.insert(
    key=key, window_start=now, failures=_ONE).on_conflict(
    conflict_target=[Throttle.key], update={
        Throttle.failures: peewee.Case(None, [(Throttle.window_start <= over, _ONE)],
                                       Throttle.failures + _ONE),
        Throttle.window_start: peewee.Case(None, [(Throttle.window_start <= over, now)],
                                           Throttle.window_start)}))


def counters(keys: list[str]) -> dict[str, Counter]:
    """The counters that exist among ``keys`` (one read)."""
    return {key: Counter(count, start, until)
            for key, count, start, until in _COUNTERS.rows(*keys)} if keys else {}


def count(key: str, *, now: float, window: float) -> None:
    """Count one event for ``key`` (a new window when the last one is over). Concurrent
    counts from several instances are not lost: the upsert adds in the database."""
    _COUNT.execute(key=key, now=now, over=now - window)


def count_failure(key: str, *, now: float, window: float, limit: int,
                  block_for: float) -> float | None:
    """Count one failure for ``key``; from the ``limit``-th on within the window, block the
    key for ``block_for`` after each failure.

    Returns the new ``blocked_until`` when this failure set a block, else None. The count is
    not restarted by a block: once over the limit, a key gets one attempt per ``block_for``
    until its window ends (a slow-down, not a new allowance).
    """
    with transaction():
        count(key, now=now, window=window)
        blocked = (Throttle.update(blocked_until=now + block_for)
                   .where(Throttle.key == key, Throttle.failures >= limit).execute())
    return now + block_for if blocked else None


def take_turn(key: str, *, now: float, block_for: float) -> bool:
    """Claim the one attempt a slowed-down ``key`` has now: True for the one caller (of any
    instance) that gets it, which blocks the key for ``block_for``; False while blocked."""
    with transaction():
        return bool(Throttle.update(blocked_until=now + block_for).where(
            (Throttle.key == key)
            & (Throttle.blocked_until.is_null() | (Throttle.blocked_until <= now))).execute())


def mark(key: str, *, now: float) -> None:
    """Remember that ``key`` happened at ``now`` (a trusted address: no count, no block)."""
    with transaction():
        (Throttle.insert(key=key, window_start=now, failures=0)
         .on_conflict(conflict_target=[Throttle.key],
                      update={Throttle.window_start: now, Throttle.blocked_until: None})
         .execute())


def clear(keys: list[str]) -> None:
    """Forget the counters and blocks of ``keys`` (a success, or an admin unlock)."""
    if keys:
        Throttle.delete().where(Throttle.key.in_(keys)).execute()


def keys_ending_with(suffix: str) -> list[str]:
    """The keys that end with ``suffix`` (an admin unlock looks for an account's counters at
    every address; rare, so a scan is fine)."""
    return [key for (key,) in Throttle.select(Throttle.key)
            .where(Throttle.key.endswith(suffix)).tuples()]
