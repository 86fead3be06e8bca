"""Throttling nobody can turn against somebody else, on SQLite and PostgreSQL.

The properties of docs/security.md ("Throttling"), each pinned here at the service level
(over HTTP from several loopback addresses in test_lockout_resistance.py):
a) failures from one address never refuse the account, or the client, from another address;
b) (passkeys, in test_lockout_resistance.py) a credential that is not the user's counts
   against the address only;
c) password guesses at one account from many addresses stay bounded;
d) one address cannot spray many accounts.
The counters live in the store, so what one server instance counts every instance sees.
"""

from __future__ import annotations

import threading

import pytest

from identityctl.config import Config, SecurityConfig
from identityctl.errors import TooManyRequests
from identityctl.services import throttle
from identityctl.services.context import ServiceContext
from identityctl.services.origin import RequestOrigin
from identityctl.services.tokens import TokenService
from identityctl.store import audit
from identityctl.store.models import Throttle

LIMITS = SecurityConfig(max_failures_per_account=3, max_failures_per_address=5,
                        failure_window=600, lockout_seconds=120,
                        max_password_guesses_per_account=40, account_window=3600,
                        account_slowdown_seconds=30, max_starts_per_address=4)


@pytest.fixture
def ctx(store_url: str) -> ServiceContext:
    config = Config(security=LIMITS)
    return ServiceContext(config=config, tokens=TokenService(config.issuer))


def fail(ctx: ServiceContext, account: str | None = "alice", address: str = "10.0.0.1", *,
         password: bool = True) -> None:
    throttle.record_failure(ctx, action="password", account=account,
                            origin=RequestOrigin(address=address),
                            password=password)


def attempt(ctx: ServiceContext, account: str | None = "alice", address: str = "10.0.0.1",
            *, password: bool = True) -> throttle.Allowed | None:
    """The attempt let through, or None when refused."""
    try:
        return throttle.ensure_allowed(ctx, action="password", account=account,
                                       origin=RequestOrigin(address=address), password=password)
    except TooManyRequests:
        return None


def guess(ctx: ServiceContext, address: str, account: str = "alice") -> bool:
    """One wrong password from ``address`` when let through; whether it was."""
    if attempt(ctx, account, address) is None:
        return False
    fail(ctx, account, address)
    return True


def test_an_account_is_refused_only_at_the_address_that_failed(ctx: ServiceContext) -> None:
    for _ in range(3):
        fail(ctx, address="10.0.0.1")
    assert attempt(ctx, address="10.0.0.1") is None
    assert attempt(ctx, address="10.0.0.2") is not None  # a) the real user, elsewhere
    assert attempt(ctx, account="bob", address="10.0.0.1") is not None


def test_the_refusal_says_when_to_retry_and_is_audited(ctx: ServiceContext) -> None:
    for _ in range(3):
        fail(ctx)
    with pytest.raises(TooManyRequests) as refused:
        throttle.ensure_allowed(ctx, action="password", account="ALICE ",
                                origin=RequestOrigin(address="10.0.0.1"))
    assert refused.value.code == "too_many_attempts"
    assert 110 <= refused.value.retry_after <= 120
    assert refused.value.headers["Retry-After"] == str(refused.value.retry_after)
    events = {event["event"] for event in audit.events()}
    assert {"throttle.block", "throttle.refuse"} <= events


def test_after_a_block_an_address_gets_one_attempt_per_block_not_a_new_allowance(
        ctx: ServiceContext) -> None:
    for _ in range(3):
        fail(ctx)
    Throttle.update(blocked_until=0).execute()  # the block has run out; the window has not
    assert attempt(ctx) is not None
    fail(ctx)
    assert attempt(ctx) is None


def test_an_address_is_refused_across_accounts(ctx: ServiceContext) -> None:
    for number in range(5):
        fail(ctx, account=f"user{number}")
    assert attempt(ctx, account="someone-else") is None  # d)
    assert attempt(ctx, account="someone-else", address="10.0.0.2") is not None


def test_unknown_and_known_accounts_are_counted_alike(ctx: ServiceContext) -> None:
    for _ in range(3):
        fail(ctx, account="no-such-user")
    assert attempt(ctx, account="no-such-user") is None


def test_one_address_alone_never_slows_the_account_down(ctx: ServiceContext) -> None:
    """a) for the account-wide bound: one address gives up long before it (config.py
    refuses limits where it would not)."""
    guesses = 0
    for _ in range(LIMITS.most_failures_from_one_address):
        guesses += guess(ctx, "10.0.0.1")
        Throttle.update(blocked_until=0).where(Throttle.key.startswith("pair:")).execute()
    assert guesses < LIMITS.max_password_guesses_per_account
    assert attempt(ctx, address="10.0.0.2") is not None


def test_guesses_from_many_addresses_are_bounded_by_a_slow_down(ctx: ServiceContext) -> None:
    """c) the allowance, then one guess per slow-down period for the whole account."""
    guesses = sum(guess(ctx, f"10.1.{n // 200}.{n % 200}") for n in range(200))
    assert guesses == LIMITS.max_password_guesses_per_account + 1  # the first turn
    assert attempt(ctx, address="10.9.9.9") is None
    # Each time the slow-down period passes, one more guess, whoever sends it.
    Throttle.update(blocked_until=0).where(Throttle.key.startswith("account:")).execute()
    assert sum(guess(ctx, f"10.2.0.{n}") for n in range(20)) == 1
    assert LIMITS.most_password_guesses_per_account == 40 + 120


def test_an_address_the_account_signed_in_from_is_not_slowed_down(ctx: ServiceContext) -> None:
    home = attempt(ctx, address="192.0.2.7")
    assert home is not None and home.trust is not None
    throttle.record_success(home)
    for n in range(60):
        guess(ctx, f"10.1.0.{n}")
    assert attempt(ctx, address="10.9.9.9") is None
    assert attempt(ctx, address="192.0.2.7") is not None


def test_passkey_and_client_failures_are_not_password_guesses(ctx: ServiceContext) -> None:
    for n in range(60):
        fail(ctx, address=f"10.1.0.{n}", password=False)
    assert attempt(ctx, address="10.9.9.9") is not None


def test_success_clears_the_address_count_for_the_account_only(ctx: ServiceContext) -> None:
    fail(ctx)
    fail(ctx)
    success = attempt(ctx)
    assert success is not None
    throttle.record_success(success)
    fail(ctx)
    fail(ctx)
    assert attempt(ctx) is not None  # 2 at alice from here: the 2 before were cleared
    fail(ctx, account="bob")
    assert attempt(ctx, account="carol") is None  # the address reached 5


def test_unlock_lifts_every_block_of_the_account(ctx: ServiceContext) -> None:
    for n in range(60):
        guess(ctx, f"10.1.0.{n}", account="Alice")
    for _ in range(3):
        fail(ctx, account="alice", address="10.0.0.1")
    fail(ctx, account="alice@x", address="10.0.0.1")
    throttle.unlock_account("ALICE")
    assert attempt(ctx, address="10.0.0.1") is not None
    assert attempt(ctx, address="10.9.9.9") is not None
    assert Throttle.get_or_none(Throttle.key == throttle.pair_key("alice@x", "10.0.0.1"))


def test_starts_are_counted_per_address(ctx: ServiceContext) -> None:
    for _ in range(4):
        throttle.ensure_allowed(ctx, action="start", account=None,
                                origin=RequestOrigin(address="10.0.0.1"),
                                start=True)
        throttle.count_start(ctx, origin=RequestOrigin(address="10.0.0.1"))
    with pytest.raises(TooManyRequests):
        throttle.ensure_allowed(ctx, action="start", account=None,
                                origin=RequestOrigin(address="10.0.0.1"),
                                start=True)
    throttle.ensure_allowed(ctx, action="start", account=None,
                            origin=RequestOrigin(address="10.0.0.2"),
                            start=True)


def test_concurrent_failures_are_all_counted(ctx: ServiceContext) -> None:
    config = Config(security=SecurityConfig(max_failures_per_account=20,
                                            max_failures_per_address=1000))
    wide = ServiceContext(config=config, tokens=ctx.tokens)
    threads = [threading.Thread(target=fail, args=(wide,)) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert attempt(wide) is None


def test_concurrent_guesses_at_a_slowed_down_account_get_one_turn(ctx: ServiceContext) -> None:
    for n in range(40):
        fail(ctx, address=f"10.1.0.{n}")
    turns: list[bool] = []
    threads = [threading.Thread(target=lambda n=n: turns.append(
        attempt(ctx, address=f"10.3.0.{n}") is not None)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(turns) == [False] * 9 + [True]
