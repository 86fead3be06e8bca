"""Brute-force throttling that nobody can turn against somebody else (docs/security.md).

Shared by password sign-in, passkey ceremonies, flows and client authentication. Counters
live in the store (every instance shares them); config is ``[security]``:

- **An account at one address** (``max_failures_per_account`` per ``failure_window``): past
  it, that address is refused for that account for ``lockout_seconds``, then gets one
  attempt per ``lockout_seconds`` until the window ends. Nobody else is refused: not the
  account from another address, not the address for another account.
- **An address** (``max_failures_per_address`` per ``failure_window``, at any accounts): the
  same, for everything from that address: one address cannot spray many accounts.
- **An account, all addresses together, passwords only** (``max_password_guesses_per_account``
  per ``account_window``): past it, one password attempt per ``account_slowdown_seconds`` for
  the whole account, except from addresses where it signed in with its password before
  (for ``trusted_address_days``). It bounds a distributed guess at one password; one
  address alone can never reach it (config.py refuses settings where it could), and
  passkeys are never slowed: a passkey attempt guesses no secret.
- **Ceremony starts per address** (``max_starts_per_address`` per ``failure_window``).
- **Client registrations per address** (``oauth.registrations_per_address`` per
  ``failure_window``): dynamic client registrations and client metadata documents that made
  a new application share one counter, so neither fills the catalog from one place.
- **Client metadata document fetches per address** (``oauth.document_fetches_per_address``
  per ``failure_window``): every fetch, refused ones too, so a page that sends its
  visitors' browsers to made-up document URLs costs a bounded amount of work, and uses up
  nothing but this (never the visitor's registrations).
- **Code mails to an address** (the limits: services/accounts/email_codes.py): a code that
  nobody signed in asked for (a sign-up's, a recovery's) counts against the address *for
  its requester* (the client address; an IPv6 one by its /64) and against the address from
  all requesters together. A requester spends only its own share; the ceiling bounds a
  flood to one mailbox. Only mails sent count; notices and the account page's codes (its
  person's own allowance) are not counted here.

The account is whatever the caller names (a username, a namespaced client id), known or
not, so a throttled unknown username answers exactly like a throttled real one. Every
block and every refusal is audited.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import time
from dataclasses import dataclass

from identityctl.config import SecurityConfig
from identityctl.errors import TooManyRequests
from identityctl.security.usernames import username_key
from identityctl.services import audit
from identityctl.services.context import ServiceContext
from identityctl.services.origin import RequestOrigin
from identityctl.store import throttle as store
from identityctl.store.throttle import Counter

DAY = 86400


def _account(account: str) -> str:
    # The same key for every spelling of one username (RFC 8265), as lookups use.
    return username_key(account.strip())


def address_key(client_address: str) -> str:
    return "address:" + client_address


def pair_key(account: str, client_address: str) -> str:
    """An account at one address (an address never contains ``|``)."""
    return f"pair:{client_address}|{_account(account)}"


def account_key(account: str) -> str:
    return "account:" + _account(account)


def trusted_key(account: str, client_address: str) -> str:
    return f"trusted:{client_address}|{_account(account)}"


def starts_key(client_address: str) -> str:
    return "starts:" + client_address


@dataclass(frozen=True, slots=True)
class Allowed:
    """An attempt :func:`ensure_allowed` let through, and what its success must do."""

    #: The (account, address) key when failures were counted on it (None: nothing to clear).
    counted_pair: str | None = None
    #: The trusted-address key a password success records (None: nothing to record).
    trust: str | None = None


#: What nearly every attempt gets (shared: frozen).
NOTHING_COUNTED = Allowed()


def ensure_allowed(ctx: ServiceContext, *, action: str, account: str | None,
                   origin: RequestOrigin, password: bool = False,
                   start: bool = False) -> Allowed:
    """Refuse with 429 when this address is refused for this account or at all, when a
    ``password`` guess finds the account slowed down, or when a ceremony ``start`` finds the
    address over its starts."""
    security, client_address = ctx.config.security, origin.address
    address = address_key(client_address) if client_address else None
    pair = pair_key(account, client_address) if account and client_address else None
    guessed = account_key(account) if password and account else None
    trust = trusted_key(account, client_address) if guessed and client_address else None
    starts = starts_key(client_address) if start and client_address else None
    found = store.counters([key for key in (address, pair, guessed, trust, starts) if key])
    if not found:  # nearly every attempt: nothing counted against any key
        return NOTHING_COUNTED if trust is None else Allowed(trust=trust)
    now = time.time()
    blocked = [found[key].blocked_until for key in (address, pair) if key in found]
    until = max((moment for moment in blocked if moment is not None and moment > now),
                default=None)
    if starts in found:
        counter = found[starts]
        if counter.count >= security.max_starts_per_address \
                and counter.window_start > now - security.failure_window:
            until = max(until or 0, counter.window_start + security.failure_window)
    trusted = trust in found and \
        found[trust].window_start > now - security.trusted_address_days * DAY
    if until is None and guessed in found and not trusted:
        until = _password_turn(security, guessed, found[guessed], now)
    if until is not None:
        _refuse(action, origin, until - now)
    return Allowed(counted_pair=pair if pair in found else None,
                   trust=None if trusted else trust)


def _password_turn(security: SecurityConfig, key: str, counter: Counter,
                   now: float) -> float | None:
    """None when a password attempt at a (slowed-down) account may go ahead, else until
    when to wait. Past the allowance, one attempt per slow-down period, claimed in the
    store so that concurrent requests on any instance get one between them."""
    if counter.count < security.max_password_guesses_per_account \
            or counter.window_start <= now - security.account_window:
        return None
    if store.take_turn(key, now=now, block_for=security.account_slowdown_seconds):
        return None
    return max(counter.blocked_until or 0, now + 1)


def registrations_key(client_address: str) -> str:
    return "registrations:" + client_address


def document_fetches_key(client_address: str) -> str:
    return "document-fetches:" + client_address


def _ensure_left(ctx: ServiceContext, key: str, limit: int, *, action: str,
                 origin: RequestOrigin) -> None:
    """Refuse with 429 when ``key`` (an address's allowance) was counted ``limit`` times
    within ``failure_window``; nothing is counted."""
    if not origin.address:
        return
    now, window = time.time(), ctx.config.security.failure_window
    counter = store.counters([key]).get(key)
    if counter is not None and counter.window_start > now - window \
            and counter.count >= limit:
        _refuse(action, origin, counter.window_start + window - now)


def _count(ctx: ServiceContext, key: str, client_address: str) -> None:
    if client_address:
        store.count(key, now=time.time(), window=ctx.config.security.failure_window)


def ensure_registrations_left(ctx: ServiceContext, *, action: str,
                              origin: RequestOrigin) -> None:
    """Refuse with 429 when the address registered ``oauth.registrations_per_address``
    clients within ``failure_window`` (so that no work is done for one more)."""
    _ensure_left(ctx, registrations_key(origin.address),
                 ctx.config.oauth.registrations_per_address, action=action, origin=origin)


def count_registration(ctx: ServiceContext, *, action: str, origin: RequestOrigin) -> None:
    """Refuse with 429 once the address registered ``oauth.registrations_per_address``
    clients within ``failure_window``; else count this registration."""
    ensure_registrations_left(ctx, action=action, origin=origin)
    _count(ctx, registrations_key(origin.address), origin.address)


def ensure_document_fetches_left(ctx: ServiceContext, *, action: str,
                                 origin: RequestOrigin) -> None:
    """Refuse with 429 when the address had ``oauth.document_fetches_per_address`` client
    metadata documents fetched within ``failure_window``."""
    _ensure_left(ctx, document_fetches_key(origin.address),
                 ctx.config.oauth.document_fetches_per_address, action=action, origin=origin)


def count_document_fetch(ctx: ServiceContext, *, origin: RequestOrigin) -> None:
    """Count a fetch of a client metadata document for the address (made, or refused)."""
    _count(ctx, document_fetches_key(origin.address), origin.address)


def requester(client_address: str) -> str:
    """Who asks, as the code-mail allowance counts them: the client address, an IPv6 one by
    its /64 (one host or subscriber is given a whole /64, RFC 6177: its addresses are one
    requester)."""
    try:
        ip = ipaddress.ip_address(client_address)
    except ValueError:
        return client_address
    if ip.version == 6 and ip.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return client_address


def code_mail_keys(recipient: str, client_address: str) -> tuple[str, str]:
    """The keys a code mail to ``recipient`` counts under: the requester's share of the
    address, and the address's ceiling. The address is keyed by a digest of its lower-case
    form: a key stays short whatever the address's length (254 characters may be one), and
    the table holds no address."""
    to = hashlib.sha256(recipient.strip().lower().encode()).hexdigest()[:32]
    return f"code-mails-from:{requester(client_address)}|{to}", f"code-mails-to:{to}"


def code_mails_left(recipient: str, *, origin: RequestOrigin, per_requester: int,
                    per_recipient: int, window: float) -> bool:
    """Whether one more code may be mailed to ``recipient`` for this requester: fewer than
    ``per_requester`` sent for them, and fewer than ``per_recipient`` for everybody, within
    ``window`` (one read; nothing counted)."""
    share, ceiling = code_mail_keys(recipient, origin.address)
    found = store.counters([share, ceiling])
    now = time.time()
    return all(counter.count < limit or counter.window_start <= now - window
               for key, limit in ((share, per_requester), (ceiling, per_recipient))
               if (counter := found.get(key)) is not None)


def count_code_mail(recipient: str, *, origin: RequestOrigin, window: float) -> None:
    """Count a code mailed to ``recipient`` for this requester (in the caller's transaction,
    with the message)."""
    now = time.time()
    for key in code_mail_keys(recipient, origin.address):
        store.count(key, now=now, window=window)


def _refuse(action: str, origin: RequestOrigin, seconds: float) -> None:
    retry_after = max(1, math.ceil(seconds))
    audit.record("throttle.refuse", "throttled", origin=origin.acting_as(action),
                 details={"action": action, "retryAfter": retry_after})
    raise TooManyRequests(f"Too many attempts; try again in {retry_after} seconds.",
                          retry_after=retry_after, code="too_many_attempts")


def record_failure(ctx: ServiceContext, *, action: str, account: str | None,
                   origin: RequestOrigin, password: bool = False) -> None:
    """Count a failed attempt against the address and, when it was one at ``account``,
    against the account at this address; a wrong ``password`` also counts toward the
    account's guesses from all addresses."""
    security, client_address = ctx.config.security, origin.address
    now = time.time()
    for key, limit in ((address_key(client_address) if client_address else None,
                        security.max_failures_per_address),
                       (pair_key(account, client_address) if account and client_address
                        else None, security.max_failures_per_account)):
        if key is None:
            continue
        until = store.count_failure(key, now=now, window=security.failure_window,
                                    limit=limit, block_for=security.lockout_seconds)
        if until is not None:
            audit.record("throttle.block", "throttled", origin=origin.acting_as(action),
                         details={"action": action, "scope": key.split(":", 1)[0],
                                  "seconds": security.lockout_seconds})
    if password and account:
        store.count(account_key(account), now=now, window=security.account_window)


def record_success(allowed: Allowed) -> None:
    """A success clears the account's failures at this address (only when
    :func:`ensure_allowed` saw some: nearly every success has nothing to clear) and, for a
    password, remembers the address as one the account signs in from."""
    if allowed.counted_pair is not None:
        store.clear([allowed.counted_pair])
    if allowed.trust is not None:
        store.mark(allowed.trust, now=time.time())


def count_start(ctx: ServiceContext, *, origin: RequestOrigin) -> None:
    """Count a ceremony start against its address (in the start's own transaction)."""
    if origin.address:
        store.count(starts_key(origin.address), now=time.time(),
                    window=ctx.config.security.failure_window)


def unlock_account(account: str) -> None:
    """Lift every throttle on an account (``identityctl user unlock``): its password
    slow-down and its blocks at every address."""
    name = _account(account)
    pairs = [key for key in store.keys_ending_with("|" + name)
             if key.startswith("pair:") and key.split("|", 1)[1] == name]
    store.clear([account_key(account), *pairs])
