"""OAuth state: authorization requests, codes, refresh-token families and revoked token ids.

Everything single-use is consumed by one conditional UPDATE whose row count picks the one
winner, so two instances (or two threads) can never both redeem a code or rotate a refresh
token. Codes and refresh tokens are stored as SHA-256 hashes (``security.secrets``).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import peewee

from identityctl.store.compiled import CompiledQuery, Row
from identityctl.store.db import transaction
from identityctl.store.models import (
    AuthorizationCode,
    AuthorizationRequest,
    PushedRequest,
    RefreshToken,
    RevokedToken,
    now,
)


@dataclass(slots=True)
class IssuedToken:
    """A JWT handed out, remembered so that it can be revoked before it expires."""

    jti: str
    expires_at: float

    def to_json(self) -> dict[str, Any]:
        return {"jti": self.jti, "exp": self.expires_at}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> IssuedToken:
        return cls(jti=value["jti"], expires_at=value["exp"])


@dataclass(slots=True)
class StoredAuthorizationRequest:
    id: str
    application_id: str
    redirect_uri: str
    scope: str
    state: str | None
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    extra: dict[str, Any]
    expires_at: float


@dataclass(slots=True)
class StoredCode:
    code_hash: str
    application_id: str
    user_id: str
    redirect_uri: str
    scope: str
    nonce: str | None
    code_challenge: str | None
    auth_time: float
    amr: list[str]
    extra: dict[str, Any]
    consumed_at: float | None
    issued: list[IssuedToken]
    refresh_family: str | None
    expires_at: float


@dataclass(kw_only=True)
class _RefreshTokenGrant:
    """What a refresh token stands for: whose grant, to which client, with what scope."""

    token_hash: str
    family: str
    application_id: str
    user_id: str | None
    scope: str
    auth_time: float | None
    amr: list[str]
    extra: dict[str, Any]
    expires_at: float


@dataclass(kw_only=True)
class StoredRefreshToken(_RefreshTokenGrant):
    rotated_at: float | None
    revoked: bool


@dataclass(kw_only=True)
class NewRefreshToken(_RefreshTokenGrant):
    """A refresh token to store; ``access_token`` is the access token issued alongside it."""

    access_token: IssuedToken

    def create(self) -> None:
        extra = {**self.extra, "accessToken": self.access_token.to_json()}
        _INSERT_REFRESH_TOKEN.execute(
            token_hash=self.token_hash, family=self.family, application_id=self.application_id,
            user_id=self.user_id, scope=self.scope, auth_time=self.auth_time,
            amr=RefreshToken.amr.db_value(self.amr), extra=RefreshToken.extra.db_value(extra),
            created_at=now(), expires_at=self.expires_at)


#: The code exchange's statements (a hot path), built once per kind of database.
_CODE = CompiledQuery(lambda code_hash: AuthorizationCode.select().where(
    AuthorizationCode.code_hash == code_hash))
#: JSON columns (issued_jtis, amr, extra) are bound as JSON text (the field's db_value).
_REDEEM_CODE = CompiledQuery(
    lambda consumed_at, issued_jtis, refresh_family, code_hash: AuthorizationCode.update(
        consumed_at=consumed_at, issued_jtis=issued_jtis, refresh_family=refresh_family).where(
        (AuthorizationCode.code_hash == code_hash) & AuthorizationCode.consumed_at.is_null()))
_INSERT_REFRESH_TOKEN = CompiledQuery(
    lambda token_hash, family, application_id, user_id, scope, auth_time, amr, extra,
    created_at, expires_at, revoked=False: RefreshToken.insert(
        token_hash=token_hash, family=family, application=application_id, user=user_id,
        scope=scope, auth_time=auth_time, amr=amr, extra=extra, revoked=revoked,
        created_at=created_at, expires_at=expires_at))


# --- authorization requests -----------------------------------------------------------------


def _request_record(row: AuthorizationRequest) -> StoredAuthorizationRequest:
    return StoredAuthorizationRequest(
        id=row.id, application_id=row.application_id, redirect_uri=row.redirect_uri,
        scope=row.scope, state=row.state, nonce=row.nonce, code_challenge=row.code_challenge,
        code_challenge_method=row.code_challenge_method, extra=row.extra or {},
        expires_at=row.expires_at)


def create_authorization_request(*, request_id: str, application_id: str, redirect_uri: str,
                                 scope: str, state: str | None, nonce: str | None,
                                 code_challenge: str | None, code_challenge_method: str | None,
                                 extra: dict[str, Any], expires_at: float) -> None:
    with transaction():
        AuthorizationRequest.create(
            id=request_id, application=application_id, redirect_uri=redirect_uri, scope=scope,
            state=state, nonce=nonce, code_challenge=code_challenge,
            code_challenge_method=code_challenge_method, extra=extra, expires_at=expires_at)


def update_authorization_request_extra(request_id: str, extra: dict[str, Any]) -> bool:
    """Replace a pending request's ``extra``; False when it is no longer pending."""
    with transaction():
        return bool(AuthorizationRequest.update(extra=extra).where(
            (AuthorizationRequest.id == request_id)
            & (AuthorizationRequest.consumed == False)  # noqa: E712
            & (AuthorizationRequest.expires_at > now())).execute())


def find_authorization_request(request_id: str) -> StoredAuthorizationRequest | None:
    """A pending (unconsumed, unexpired) authorization request."""
    row = AuthorizationRequest.get_or_none(
        (AuthorizationRequest.id == request_id) & (AuthorizationRequest.consumed == False)  # noqa: E712
        & (AuthorizationRequest.expires_at > now()))
    return _request_record(row) if row else None


def consume_authorization_request(request_id: str) -> StoredAuthorizationRequest | None:
    """Mark a pending request used and return it; None when it is unknown, used or expired."""
    with transaction():
        taken = (AuthorizationRequest.update(consumed=True)
                 .where((AuthorizationRequest.id == request_id)
                        & (AuthorizationRequest.consumed == False)  # noqa: E712
                        & (AuthorizationRequest.expires_at > now()))
                 .execute())
        if not taken:
            return None
        return _request_record(AuthorizationRequest.get_by_id(request_id))


# --- authorization codes --------------------------------------------------------------------


def _code_record(row: AuthorizationCode | Row) -> StoredCode:
    return StoredCode(
        code_hash=row.code_hash, application_id=row.application_id, user_id=row.user_id,
        redirect_uri=row.redirect_uri, scope=row.scope, nonce=row.nonce,
        code_challenge=row.code_challenge, auth_time=row.auth_time, amr=row.amr or [],
        extra=row.extra or {}, consumed_at=row.consumed_at,
        issued=[IssuedToken.from_json(item) for item in row.issued_jtis or []],
        refresh_family=row.refresh_family, expires_at=row.expires_at)


def create_code(*, code_hash: str, application_id: str, user_id: str, redirect_uri: str,
                scope: str, nonce: str | None, code_challenge: str | None,
                code_challenge_method: str | None, auth_time: float, amr: list[str],
                extra: dict[str, Any], expires_at: float) -> None:
    with transaction():
        AuthorizationCode.create(
            code_hash=code_hash, application=application_id, user=user_id,
            redirect_uri=redirect_uri, scope=scope, nonce=nonce, code_challenge=code_challenge,
            code_challenge_method=code_challenge_method, auth_time=auth_time, amr=amr,
            extra=extra, expires_at=expires_at)


def find_code(code_hash: str) -> StoredCode | None:
    row = _CODE.first(AuthorizationCode, code_hash=code_hash)
    return _code_record(row) if row else None


def redeem_code(code_hash: str, *, issued: list[IssuedToken],
                refresh_token: NewRefreshToken | None, session_id: str) -> bool:
    """Use a code once: True for the one caller that wins, False for every later one.

    What the exchange issues is recorded in the same step, so a replay that loses the race
    always finds it and can revoke it (RFC 9700 §4.4.1).
    """
    with transaction():
        won = _REDEEM_CODE.execute(
            consumed_at=now(), issued_jtis=AuthorizationCode.issued_jtis.db_value(
                [token.to_json() for token in issued]),
            refresh_family=session_id, code_hash=code_hash)
        if won and refresh_token is not None:
            refresh_token.create()
    return bool(won)


# --- refresh tokens -------------------------------------------------------------------------


def _refresh_record(row: RefreshToken) -> StoredRefreshToken:
    return StoredRefreshToken(
        token_hash=row.token_hash, family=row.family, application_id=row.application_id,
        user_id=row.user_id, scope=row.scope, auth_time=row.auth_time, amr=row.amr or [],
        extra=row.extra or {}, rotated_at=row.rotated_at, revoked=row.revoked,
        expires_at=row.expires_at)


def find_refresh_token(token_hash: str) -> StoredRefreshToken | None:
    row = RefreshToken.get_or_none(RefreshToken.token_hash == token_hash)
    return _refresh_record(row) if row else None


def rotate_refresh_token(token_hash: str, successor: NewRefreshToken) -> bool:
    """Retire a live refresh token and store its successor; False if it was not live."""
    with transaction():
        won = (RefreshToken.update(rotated_at=now())
               .where((RefreshToken.token_hash == token_hash)
                      & RefreshToken.rotated_at.is_null()
                      & (RefreshToken.revoked == False)  # noqa: E712
                      & (RefreshToken.expires_at > now()))
               .execute())
        if won:
            successor.create()
    return bool(won)


def revoke_family(family: str, *, tokens_live_until: float) -> int:
    """End a grant: every refresh token of it, and every access token that names it in
    ``sid`` (one row, read by :func:`is_revoked`, kept until ``tokens_live_until``, when the
    last access token of the grant has expired anyway). Access tokens recorded with the
    refresh tokens are revoked one by one too (those issued before tokens named their grant).
    """
    with transaction():
        _revoke([IssuedToken(jti=_grant_key(family), expires_at=tokens_live_until)])
        rows = list(RefreshToken.select(RefreshToken.extra).where(RefreshToken.family == family))
        _revoke(IssuedToken.from_json(row.extra["accessToken"]) for row in rows
                if (row.extra or {}).get("accessToken"))
        return (RefreshToken.update(revoked=True)
                .where((RefreshToken.family == family) & (RefreshToken.revoked == False))  # noqa: E712
                .execute())


# --- revoked and used token ids -------------------------------------------------------------


def _revoke(tokens: Iterable[IssuedToken]) -> None:
    for token in tokens:
        RevokedToken.insert(jti=token.jti, expires_at=token.expires_at).on_conflict_ignore() \
            .execute()


def revoke_tokens(tokens: Iterable[IssuedToken]) -> None:
    """Refuse these JWTs from now on (until they would have expired anyway)."""
    with transaction():
        _revoke(tokens)


def use_once(token: IssuedToken) -> bool:
    """Record a single-use JWT as spent; False when it already was."""
    try:
        with transaction():
            RevokedToken.create(jti=token.jti, expires_at=token.expires_at)
    except peewee.IntegrityError:
        return False
    return True


def _grant_key(grant_id: str) -> str:
    """A grant's row among the token ids (a jti is a UUID: it never starts so)."""
    return "grant:" + grant_id


#: PERF: the one read every bearer-token use makes: the token's id and its grant's, by the
#: primary key.
_REVOKED = CompiledQuery(lambda jti, grant_key: RevokedToken.select(RevokedToken.jti).where(
    RevokedToken.jti.in_([jti, grant_key])))


def is_revoked(jti: str, grant_id: str | None = None) -> bool:
    """Whether the token ``jti``, or the grant ``grant_id`` it belongs to, was revoked."""
    return bool(_REVOKED.rows(jti=jti, grant_key=_grant_key(grant_id) if grant_id else ""))


# --- pushed authorization requests (RFC 9126) -------------------------------------------------

#: One push in this many also deletes the pushed requests past their expiry.
PURGE_PUSHED_ONE_IN = 100


def create_pushed_request(*, key: str, application_id: str, parameters: dict[str, Any],
                          expires_at: float) -> None:
    if secrets.randbelow(PURGE_PUSHED_ONE_IN) == 0:
        PushedRequest.delete().where(PushedRequest.expires_at < now()).execute()
    with transaction():
        PushedRequest.create(id=key, application=application_id, parameters=parameters,
                             expires_at=expires_at)


def take_pushed_request(key: str, application_id: str) -> dict[str, Any] | None:
    """The parameters of the application's pushed request ``key``, which is gone from here
    on; None when there is none (unknown, expired, used, or another client's, which stays
    usable by its own client). Two concurrent takes: one gets it."""
    with transaction():
        row = PushedRequest.get_or_none((PushedRequest.id == key)
                                        & (PushedRequest.application == application_id))
        if row is None:
            return None
        taken = PushedRequest.delete().where((PushedRequest.id == key)
                                             & (PushedRequest.application == application_id)
                                             ).execute()
    return row.parameters if taken and row.expires_at > now() else None
