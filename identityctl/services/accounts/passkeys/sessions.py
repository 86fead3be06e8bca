"""Ceremony sessions: the server-side state of a started passkey ceremony.

A ceremony's state (challenge, user, policy) lives in the store under the hash of an opaque
session token, so any instance can finish what another started. A start stores it and hands
out the token; a finish opens it, and consumes it in the transaction that commits what the
ceremony changes, so a lost race leaves nothing behind.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from identityctl.errors import BadRequest, InvalidField, MissingField
from identityctl.passkey import codec
from identityctl.security.secrets import new_token, token_hash
from identityctl.services import throttle
from identityctl.services.context import ServiceContext
from identityctl.services.origin import RequestOrigin
from identityctl.store import passkeys as store
from identityctl.store.db import transaction

#: Expired sessions are kept this long so a late finish hears "expired", not "unknown".
EXPIRED_SESSION_GRACE = 3600
#: Expired sessions are deleted by about one start in this many (lookups check expiry).
PURGE_ONE_IN = 64


def _session_error(code: str, description: str) -> BadRequest:
    return BadRequest(description, code=code, message="The session token cannot be used.")


def ceremony_scope(*, client_address: str) -> str:
    """The scope of a ceremony started through the atomic API: its client address.

    A start supersedes only the open sessions of the same user, ceremony and scope, so the
    most recent start of one caller wins over that caller's older ones, and a start by
    somebody else (another address; another flow execution, whose scope is its id) cancels
    nothing (docs/security.md, "Ceremonies").
    """
    return "address:" + client_address


def new_session(ctx: ServiceContext, *, ceremony: str, user_id: str | None, scope: str,
                origin: RequestOrigin, challenge: bytes, state: dict[str, Any]) -> str:
    """Store the ceremony (superseding the same scope's older one), count the start against
    its address, and hand out its token."""
    token = new_token()
    now = time.time()
    if secrets.randbelow(PURGE_ONE_IN) == 0:  # housekeeping, not on every request's path
        store.purge_sessions(expired_before=now - EXPIRED_SESSION_GRACE)
    with transaction():
        throttle.count_start(ctx, origin=origin)
        store.create_session(token_hash=token_hash(token), ceremony=ceremony, user_id=user_id,
                             scope=scope, rp_id=ctx.config.passkey.rp_id,
                             challenge=codec.encode(challenge), state=state, now=now,
                             expires_at=now + ctx.config.passkey.session_token_ttl)
    return token


def open_session(session_token: Any, *, ceremony: str, now: float) -> store.CeremonySessionRecord:
    """The session behind ``session_token``, if it may still finish ``ceremony``."""
    if session_token is None or (isinstance(session_token, str) and not session_token.strip()):
        raise MissingField("sessionToken")
    if not isinstance(session_token, str):
        raise InvalidField("sessionToken", "must be a string")
    session = store.find_session(token_hash(session_token))
    if session is None or session.ceremony != ceremony:
        raise _session_error("unknown_session_token", f"The session token is unknown or "
                             f"already used; call the {ceremony} start endpoint again.")
    if session.superseded:
        raise _session_error("stale_session_token", "A newer start of this ceremony by the "
                             "same caller replaced this session; finish with the newest "
                             "session token.")
    if session.expires_at <= now:
        raise _session_error("expired_session_token", "The session token expired; start the "
                             "ceremony again and finish it within passkey.session_token_ttl.")
    return session


def used_concurrently() -> BadRequest:
    """The error of a finish whose session token a concurrent request used first."""
    return _session_error("unknown_session_token", "The session token was used by a "
                          "concurrent request; start the ceremony again.")


def consume_session(session: store.CeremonySessionRecord, now: float) -> None:
    """Inside the finishing transaction: win the token or roll everything back."""
    if not store.consume_session(session.token_hash, ceremony=session.ceremony, now=now):
        raise used_concurrently()
