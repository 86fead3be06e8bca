"""Throttling, on SQLite and PostgreSQL: failures counted per account and per address.

The counters live in the store, so what one server instance counts every instance sees.
"""

from __future__ import annotations

import threading

import pytest

from identityctl.config import Config, SecurityConfig
from identityctl.errors import TooManyRequests
from identityctl.security.tokens import TokenService
from identityctl.services import throttle
from identityctl.services.context import ServiceContext
from identityctl.store import audit

LIMITS = SecurityConfig(max_failures_per_account=3, max_failures_per_address=5,
                        failure_window=60, lockout_seconds=120)


@pytest.fixture
def ctx(store_url: str) -> ServiceContext:
    config = Config(security=LIMITS)
    return ServiceContext(config=config, tokens=TokenService(config.issuer))


def fail(ctx: ServiceContext, account: str | None = "alice", address: str = "10.0.0.1") -> None:
    throttle.record_failure(ctx, action="password", account=account, client_address=address)


def allowed(ctx: ServiceContext, account: str | None = "alice", address: str = "10.0.0.1") -> bool:
    try:
        throttle.ensure_allowed(ctx, action="password", account=account, client_address=address)
    except TooManyRequests:
        return False
    return True


def test_an_account_is_blocked_at_its_limit_from_any_address(ctx: ServiceContext) -> None:
    fail(ctx, address="10.0.0.1")
    fail(ctx, address="10.0.0.2")
    assert allowed(ctx)
    fail(ctx, address="10.0.0.3")
    assert not allowed(ctx, address="10.0.0.9")
    assert allowed(ctx, account="bob", address="10.0.0.9")


def test_the_refusal_says_when_to_retry_and_is_audited(ctx: ServiceContext) -> None:
    for _ in range(3):
        fail(ctx)
    with pytest.raises(TooManyRequests) as refused:
        throttle.ensure_allowed(ctx, action="password", account="ALICE ", client_address="x")
    assert refused.value.code == "too_many_attempts"
    assert 110 <= refused.value.retry_after <= 120
    assert refused.value.headers["Retry-After"] == str(refused.value.retry_after)
    events = {event["event"] for event in audit.events()}
    assert {"throttle.block", "throttle.refuse"} <= events


def test_an_address_is_blocked_across_accounts(ctx: ServiceContext) -> None:
    for number in range(5):
        fail(ctx, account=f"user{number}")
    assert not allowed(ctx, account="someone-else")
    assert allowed(ctx, account="someone-else", address="10.0.0.2")


def test_unknown_and_known_accounts_are_counted_alike(ctx: ServiceContext) -> None:
    for _ in range(3):
        fail(ctx, account="no-such-user")
    assert not allowed(ctx, account="no-such-user", address="10.9.9.9")


def test_success_clears_the_account_but_not_the_address(ctx: ServiceContext) -> None:
    fail(ctx)
    fail(ctx)
    success = throttle.ensure_allowed(ctx, action="password", account="alice",
                                      client_address="10.0.0.1")
    throttle.record_success(success)
    fail(ctx)
    fail(ctx)
    assert allowed(ctx)
    fail(ctx)
    assert not allowed(ctx, account="carol")  # the address reached 5


def test_unlock_lifts_an_account_block(ctx: ServiceContext) -> None:
    for _ in range(3):
        fail(ctx, address="")
    assert not allowed(ctx, address="")
    throttle.unlock_account("Alice")
    assert allowed(ctx, address="")


def test_concurrent_failures_are_all_counted(ctx: ServiceContext) -> None:
    config = Config(security=SecurityConfig(max_failures_per_account=20,
                                            max_failures_per_address=1000))
    wide = ServiceContext(config=config, tokens=ctx.tokens)
    threads = [threading.Thread(target=fail, args=(wide,), kwargs={"address": ""})
               for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not allowed(wide, address="")
