"""Failure counters and blocks per key (an account or a client address), in the store.

Every server instance shares them, so N instances behind a load balancer throttle as one.
"""

from __future__ import annotations

import peewee

from identityctl.store.db import CompiledQuery, transaction
from identityctl.store.models import Throttle

#: params: the keys...
_COUNTED = CompiledQuery(lambda *keys: Throttle.select(Throttle.key, Throttle.blocked_until)
                         .where(Throttle.key.in_(list(keys))))


def counted(keys: list[str]) -> dict[str, float | None]:
    """Which of ``keys`` have failures counted or a block set, with their ``blocked_until``
    (one read: every throttled request makes it)."""
    return {key: until for key, until in _COUNTED.rows(*keys)} if keys else {}


def count_failure(key: str, *, now: float, window: float, limit: int,
                  block_for: float) -> float | None:
    """Count one failure for ``key``; when it reaches ``limit`` within ``window``, block.

    Returns the new ``blocked_until`` when this failure set a block, else None. A block
    restarts the count, so after it expires the key gets ``limit`` attempts again. The
    upsert keeps concurrent failures from different instances from losing counts.
    """
    window_over = Throttle.window_start <= now - window
    with transaction():
        (Throttle.insert(key=key, window_start=now, failures=1)
         .on_conflict(conflict_target=[Throttle.key], update={
             Throttle.failures: peewee.Case(None, [(window_over, 1)], Throttle.failures + 1),
             Throttle.window_start: peewee.Case(None, [(window_over, now)],
                                                Throttle.window_start)})
         .execute())
        blocked = (Throttle.update(failures=0, window_start=now, blocked_until=now + block_for)
                   .where(Throttle.key == key, Throttle.failures >= limit).execute())
    return now + block_for if blocked else None


def clear(keys: list[str]) -> None:
    """Forget the counters and blocks of ``keys`` (a success, or an admin unlock)."""
    if keys:
        Throttle.delete().where(Throttle.key.in_(keys)).execute()
