"""Brute-force throttling shared by password sign-in, passkey ceremonies, flows and tokens.

Failures are counted per account and per client address within ``security.failure_window``;
reaching ``max_failures_per_account`` / ``max_failures_per_address`` blocks that key for
``security.lockout_seconds`` (429 with Retry-After). The account is whatever the caller
names (a normalized username, a client id), known or not, so a blocked unknown username
answers exactly like a blocked real one. Every block and every refusal is audited.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from identityctl.errors import TooManyRequests
from identityctl.services.context import ServiceContext
from identityctl.store import audit
from identityctl.store import throttle as store


def account_key(account: str) -> str:
    return "account:" + account.strip().casefold()


def address_key(client_address: str) -> str:
    return "address:" + client_address


@dataclass(frozen=True, slots=True)
class Allowed:
    """An attempt :func:`ensure_allowed` let through, and what its success must clear."""

    #: The account's key when failures were counted against it (None: nothing to clear).
    counted_account: str | None = None


#: What nearly every attempt gets (shared: frozen).
NOTHING_COUNTED = Allowed()


def ensure_allowed(ctx: ServiceContext, *, action: str, account: str | None,
                   client_address: str) -> Allowed:
    """Refuse with 429 when the account or the client address is currently blocked."""
    mine, address = _keys(account, client_address)
    counted = store.counted([key for key in (mine, address) if key])
    if not counted:  # nearly every attempt: nothing counted against either key
        return NOTHING_COUNTED
    now = time.time()
    until = max((t for t in counted.values() if t is not None and t > now), default=None)
    if until is None:
        return Allowed(counted_account=mine if mine in counted else None)
    retry_after = max(1, math.ceil(until - now))
    audit.record("throttle.refuse", "throttled", actor=action, client_address=client_address,
                 details={"action": action, "retryAfter": retry_after})
    raise TooManyRequests(f"Too many failed attempts; try again in {retry_after} seconds.",
                          retry_after=retry_after, code="too_many_attempts")


def record_failure(ctx: ServiceContext, *, action: str, account: str | None,
                   client_address: str) -> None:
    """Count a failed attempt against the account and the address; block at the limit."""
    security = ctx.config.security
    now = time.time()
    mine, address = _keys(account, client_address)
    for key, limit in ((mine, security.max_failures_per_account),
                       (address, security.max_failures_per_address)):
        if not key:
            continue
        until = store.count_failure(key, now=now, window=security.failure_window,
                                    limit=limit, block_for=security.lockout_seconds)
        if until is not None:
            audit.record("throttle.block", "throttled", actor=action,
                         client_address=client_address,
                         details={"action": action, "scope": key.split(":", 1)[0],
                                  "seconds": security.lockout_seconds})


def record_success(allowed: Allowed) -> None:
    """A success clears the account's failures (the address keeps its count).

    Only when :func:`ensure_allowed` saw some: nearly every success has nothing to clear, and
    a failure counted by another request in between is kept, which errs on the safe side.
    """
    if allowed.counted_account is not None:
        store.clear([allowed.counted_account])


def unlock_account(account: str) -> None:
    """Lift a throttle block on an account (``identityctl user unlock``)."""
    store.clear([account_key(account)])


def _keys(account: str | None, client_address: str) -> tuple[str | None, str | None]:
    """The throttle keys of an attempt: its account's and its address's (None when unnamed)."""
    return (account_key(account) if account else None,
            address_key(client_address) if client_address else None)
