"""Browser sessions (single sign-on) and the clients signed in through each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import peewee

from identityctl.store import db
from identityctl.store.models import Application, BrowserSession, SessionGrant, now


@dataclass(frozen=True, slots=True)
class SessionRecord:
    id: str  # the hash of the cookie's value: never the value itself
    user_id: str
    auth_time: float
    amr: list[str]
    created_at: float
    last_seen_at: float
    expires_at: float
    client_address: str
    user_agent: str

    @property
    def public_id(self) -> str:
        """What names the session outside the store: a prefix of its hash, never all of it."""
        return self.id[:12]

    def to_api(self) -> dict[str, Any]:
        return {"id": self.public_id, "userId": self.user_id, "authTime": self.auth_time,
                "amr": self.amr, "createdAt": self.created_at,
                "lastSeenAt": self.last_seen_at, "expiresAt": self.expires_at,
                "clientAddress": self.client_address, "userAgent": self.user_agent}


@dataclass(frozen=True, slots=True)
class SessionGrantRecord:
    session_id: str
    family: str
    application_id: str
    client_id: str
    user_id: str


def _record(row: BrowserSession) -> SessionRecord:
    return SessionRecord(id=row.id, user_id=row.user_id, auth_time=row.auth_time,
                         amr=list(row.amr or []), created_at=row.created_at,
                         last_seen_at=row.last_seen_at, expires_at=row.expires_at,
                         client_address=row.client_address, user_agent=row.user_agent)


def create(*, session_id: str, user_id: str, auth_time: float, amr: list[str],
           expires_at: float, client_address: str, user_agent: str = "") -> SessionRecord:
    with db.transaction():
        return _record(BrowserSession.create(
            id=session_id, user=user_id, auth_time=auth_time, amr=amr, expires_at=expires_at,
            client_address=client_address, user_agent=user_agent))


def _live(idle_since: float) -> peewee.Expression:
    """Not ended, within the absolute expiry, and used since ``idle_since``."""
    return (BrowserSession.ended_at.is_null() & (BrowserSession.expires_at > now())
            & (BrowserSession.last_seen_at > idle_since))


def find_live(session_id: str, *, idle_since: float) -> SessionRecord | None:
    row = BrowserSession.get_or_none((BrowserSession.id == session_id) & _live(idle_since))
    return _record(row) if row else None


def touch(session_id: str) -> None:
    BrowserSession.update(last_seen_at=now()).where(BrowserSession.id == session_id).execute()


def live_sessions_of(user_id: str, *, idle_since: float) -> list[SessionRecord]:
    return [_record(row) for row in BrowserSession.select().where(
        (BrowserSession.user == user_id) & _live(idle_since)).order_by(BrowserSession.created_at)]


def end(session_ids: list[str]) -> list[str]:
    """Mark sessions ended (in the caller's transaction); the ids that were still open."""
    if not session_ids:
        return []
    open_ids = [row.id for row in BrowserSession.select(BrowserSession.id).where(
        BrowserSession.id.in_(session_ids) & BrowserSession.ended_at.is_null())]
    if open_ids:
        BrowserSession.update(ended_at=now()).where(
            BrowserSession.id.in_(open_ids) & BrowserSession.ended_at.is_null()).execute()
    return open_ids


def open_session_ids(user_id: str) -> list[str]:
    return [row.id for row in BrowserSession.select(BrowserSession.id).where(
        (BrowserSession.user == user_id) & BrowserSession.ended_at.is_null())]


def add_grant(*, session_id: str, family: str, application_id: str, user_id: str) -> None:
    SessionGrant.create(session=session_id, family=family, application=application_id,
                        user=user_id)


def move_grants(from_session: str, to_session: str) -> None:
    """A new sign-in of the same person in the same browser keeps the clients signed in."""
    SessionGrant.update(session=to_session).where(
        SessionGrant.session == from_session).execute()


def session_of_grant(family: str) -> str | None:
    """The session a client's token family (its ``sid``) was signed in through, if any."""
    row = SessionGrant.get_or_none(SessionGrant.family == family)
    return row.session_id if row else None


def applications_of(session_ids: list[str]) -> dict[str, list[tuple[str, str]]]:
    """Session id -> the (client id, name) of each application signed in through it, in the
    order they signed in, each once."""
    signed_in: dict[str, list[tuple[str, str]]] = {session_id: [] for session_id in session_ids}
    if session_ids:
        for row in (SessionGrant.select(SessionGrant.session, Application.client_id,
                                        Application.name)
                    .join(Application).where(SessionGrant.session.in_(session_ids))
                    .order_by(SessionGrant.created_at)):
            application = (row.application.client_id, row.application.name)
            if application not in signed_in[row.session_id]:
                signed_in[row.session_id].append(application)
    return signed_in


def grants_of(session_ids: list[str]) -> list[SessionGrantRecord]:
    if not session_ids:
        return []
    return [SessionGrantRecord(session_id=row.session_id, family=row.family,
                               application_id=row.application_id,
                               client_id=row.application.client_id, user_id=row.user_id)
            for row in SessionGrant.select(SessionGrant, Application.id, Application.client_id)
            .join(Application).where(SessionGrant.session.in_(session_ids))]
