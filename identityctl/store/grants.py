"""Grants: the scopes a person let one client (application) have, and the token families
(``sid``) issued under them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import peewee

from identityctl.store import db
from identityctl.store.models import Application, AuthorizationCode, Grant, RefreshToken, User, now


@dataclass(slots=True)
class GrantRecord:
    user_id: str
    username: str
    application_id: str
    client_id: str
    application_name: str
    scopes: list[str]
    granted_at: float
    updated_at: float

    def to_api(self) -> dict[str, Any]:
        return {"userId": self.user_id, "username": self.username,
                "applicationId": self.application_id, "clientId": self.client_id,
                "application": self.application_name, "scopes": self.scopes,
                "grantedAt": self.granted_at, "updatedAt": self.updated_at}


def remember(user_id: str, application_id: str, scopes: list[str]) -> None:
    """Record (or widen) the person's grant to the application (in the caller's
    transaction when there is one)."""
    try:
        with db.savepoint():
            Grant.create(user=user_id, application=application_id, scopes=scopes)
        return
    except peewee.IntegrityError:
        pass  # granted before, or by a parallel authorization this instant: widen it
    mine = (Grant.user == user_id) & (Grant.application == application_id)
    with db.transaction():
        found = Grant.get(mine)
        merged = list(dict.fromkeys([*(found.scopes or []), *scopes]))
        Grant.update(scopes=merged, updated_at=now()).where(mine).execute()


def granted_scopes(user_id: str, application_id: str) -> list[str]:
    """The scopes the person let the application have so far (none without a grant)."""
    found = Grant.get_or_none((Grant.user == user_id) & (Grant.application == application_id))
    return list(found.scopes or []) if found else []


def list_grants(*, user_id: str | None = None) -> list[GrantRecord]:
    query = (Grant.select(Grant, User.username, Application.client_id, Application.name)
             .join(User).switch(Grant).join(Application))
    if user_id is not None:
        query = query.where(Grant.user == user_id)
    return [GrantRecord(user_id=row.user_id, username=row.user.username,
                        application_id=row.application_id,
                        client_id=row.application.client_id,
                        application_name=row.application.name, scopes=list(row.scopes or []),
                        granted_at=row.granted_at, updated_at=row.updated_at)
            for row in query.order_by(Grant.granted_at)]


def forget(user_id: str, application_id: str) -> bool:
    return bool(Grant.delete().where((Grant.user == user_id)
                                     & (Grant.application == application_id)).execute())


def token_families(application_id: str, user_id: str | None = None) -> set[str]:
    """Every ``sid`` issued to the application (for one person, or anyone): the families of
    its refresh tokens and of its redeemed codes (grants without refresh tokens)."""
    codes = AuthorizationCode.select(AuthorizationCode.refresh_family).where(
        (AuthorizationCode.application == application_id)
        & AuthorizationCode.refresh_family.is_null(False))
    refresh = RefreshToken.select(RefreshToken.family).where(
        (RefreshToken.application == application_id)
        & (RefreshToken.revoked == False))  # noqa: E712 - SQL, not Python truthiness
    if user_id is not None:
        codes = codes.where(AuthorizationCode.user == user_id)
        refresh = refresh.where(RefreshToken.user == user_id)
    return {family for (family,) in codes.tuples()} | {
        family for (family,) in refresh.tuples()}


@dataclass(slots=True)
class SignedInClient:
    """A token family of a person's: a client they are signed in to, until it ends."""

    family: str
    client_id: str
    application: str
    signed_in_at: float | None
    last_used_at: float
    expires_at: float
    address: str

    def to_api(self) -> dict[str, Any]:
        return {"id": self.family, "clientId": self.client_id, "application": self.application,
                "signedInAt": self.signed_in_at, "lastUsedAt": self.last_used_at,
                "expiresAt": self.expires_at, "address": self.address}


def signed_in_clients(user_id: str) -> list[SignedInClient]:
    """The person's live refresh-token families: each family's current (unrotated) token."""
    rows = (RefreshToken.select(RefreshToken, Application.client_id, Application.name)
            .join(Application)
            .where((RefreshToken.user == user_id) & (RefreshToken.revoked == False)  # noqa: E712
                   & RefreshToken.rotated_at.is_null() & (RefreshToken.expires_at > now()))
            .order_by(RefreshToken.created_at.desc()))
    return [SignedInClient(family=row.family, client_id=row.application.client_id,
                           application=row.application.name, signed_in_at=row.auth_time,
                           last_used_at=row.created_at, expires_at=row.expires_at,
                           address=str((row.extra or {}).get("address", "")))
            for row in rows]


def family_of(user_id: str, family: str) -> str | None:
    """The application id of the person's token family ``family``, or None (not theirs)."""
    row = (RefreshToken.select(RefreshToken.application)
           .where((RefreshToken.user == user_id) & (RefreshToken.family == family)).first())
    return row.application_id if row else None
