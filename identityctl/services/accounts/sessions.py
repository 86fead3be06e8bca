"""The browser session at the identity service: single sign-on, and signing out everywhere.

A completed sign-in starts a session: a random value in a ``__Host-`` cookie (Secure,
HttpOnly, SameSite=Lax, path /), kept in the store only as its hash, with the user, when and
how they signed in, and an idle and an absolute expiry (``[session]``). Any instance serves
it. ``/oauth2/authorize`` lets it stand for a new sign-in where the application's flow says
so (oauth/sso.py); every client that gets tokens through it is recorded with its token
family (``sid``). Ending a session, by logout, an administrator, the person on their
account page (one device, every other one, or all), or a change to the person's account,
ends those families and tells each client that registered a ``backChannelLogoutUri``
(OpenID Connect Back-Channel Logout 1.0, from the outbox). A session keeps the browser's
User-Agent, which the account page puts in plain words (:func:`describe_browser`).
"""

from __future__ import annotations

import re
import time

from identityctl.security.secrets import new_token, token_hash
from identityctl.services import audit
from identityctl.services.catalog.applications import oauth_config
from identityctl.services.clients.client import client_of
from identityctl.services.clients.revocation import end_grant
from identityctl.services.context import ServiceContext
from identityctl.services.delivery.outbox import BACKCHANNEL_LOGOUT
from identityctl.services.directory.users import is_usable, require_user
from identityctl.services.origin import RequestOrigin
from identityctl.store import catalog as catalog_store
from identityctl.store import directory as directory_store
from identityctl.store import outbox
from identityctl.store import sessions as store
from identityctl.store.db import transaction
from identityctl.store.models import new_id
from identityctl.store.sessions import SessionRecord

#: The cookie. ``__Host-``: the browser keeps it only when Secure, for this host alone (no
#: Domain), with path / (RFC 6265bis §4.1.3.2).
COOKIE = "__Host-identityctl-session"
#: PERF: a session's last use is written at most this often (seconds).
TOUCH_EVERY = 60
#: Of a User-Agent, what is kept (they are rarely longer; a header is not a store).
USER_AGENT_KEPT = 512
#: A User-Agent's browser, by the first of these tokens it contains (Edge and Opera say
#: "Chrome" too, Chrome says "Safari": the more particular first).
BROWSERS = (("Edg", "Edge"), ("OPR", "Opera"), ("SamsungBrowser", "Samsung Internet"),
            ("Firefox", "Firefox"), ("FxiOS", "Firefox"), ("CriOS", "Chrome"),
            ("Chromium", "Chromium"), ("HeadlessChrome", "Chrome"), ("Chrome", "Chrome"),
            ("Safari", "Safari"))
#: Its operating system, likewise (Android says "Linux", an iPhone "Mac OS X").
SYSTEMS = (("iPhone", "iPhone"), ("iPad", "iPad"), ("Android", "Android"),
           ("CrOS", "ChromeOS"), ("Windows", "Windows"), ("Macintosh", "macOS"),
           ("Linux", "Linux"))
_TOKEN = re.compile(r"[A-Za-z]+")


def describe_browser(user_agent: str) -> dict[str, str]:
    """The browser and the system of a User-Agent as a person names them ("Firefox",
    "Windows"); an empty string for what it does not tell."""
    words = set(_TOKEN.findall(user_agent))
    return {"browser": next((name for token, name in BROWSERS if token in words), ""),
            "system": next((name for token, name in SYSTEMS if token in words), "")}


def start(ctx: ServiceContext, *, user_id: str, auth_time: float, amr: list[str],
          origin: RequestOrigin, user_agent: str = "",
          replacing: str | None = None) -> tuple[str, SessionRecord]:
    """A new session for a completed sign-in (in the browser ``user_agent`` names): the
    cookie's value and the session.

    Always a new id (no fixation). A session the browser held before is ended: the same
    person's clients move over to the new one; another person's are signed out.
    """
    value = new_token()
    session_id = token_hash(value)
    previous = store.find_live(token_hash(replacing), idle_since=0) if replacing else None
    with transaction():
        session = store.create(session_id=session_id, user_id=user_id, auth_time=auth_time,
                               amr=amr, client_address=origin.address,
                               user_agent=user_agent[:USER_AGENT_KEPT],
                               expires_at=time.time() + ctx.config.session.absolute_timeout)
        if previous is not None and previous.user_id == user_id:
            store.move_grants(previous.id, session_id)
            store.end([previous.id])
    if previous is not None and previous.user_id != user_id:
        end_sessions(ctx, [previous.id], origin=origin.acting_as(user_id),
                     reason="another sign-in")
    audit.record("session.start", "success", origin=origin.acting_as(user_id), user_id=user_id,
                 details={"amr": amr})
    return value, session


def current(ctx: ServiceContext, cookie_value: str | None) -> SessionRecord | None:
    """The live session the browser's cookie names, when its user may still act."""
    if not cookie_value:
        return None
    now = time.time()
    session = store.find_live(token_hash(cookie_value),
                              idle_since=now - ctx.config.session.idle_timeout)
    if session is None or not is_usable(directory_store.find_user_by_id(session.user_id)):
        return None
    if now - session.last_seen_at > TOUCH_EVERY:
        store.touch(session.id)
    return session


def record_client(*, session_id: str, application_id: str, user_id: str) -> str:
    """A client gets a code through the session: the token family (``sid``) it will get,
    recorded so that ending the session ends it."""
    family = new_id()
    store.add_grant(session_id=session_id, family=family, application_id=application_id,
                    user_id=user_id)
    return family


def end_sessions(ctx: ServiceContext, session_ids: list[str], *, origin: RequestOrigin,
                 reason: str) -> int:
    """End sessions: every token family of a client signed in through them ends, and each
    such client with a back-channel logout URI is told (from the outbox). How many ended."""
    with transaction():
        ended = store.end(session_ids)
        for grant in store.grants_of(ended):
            # The row goes with its application (a foreign key), so the application is there.
            application = catalog_store.get_application(grant.application_id)
            end_grant(ctx, grant.family, client_of(application))
            logout_uri = oauth_config(application).get("backchannelLogoutUri")
            if logout_uri:
                outbox.enqueue(kind=BACKCHANNEL_LOGOUT, target=logout_uri, payload={
                    "clientId": grant.client_id, "sub": grant.user_id, "sid": grant.family,
                    "jti": new_id()})
        for session_id in ended:
            audit.record("session.end", "success", origin=origin,
                         details={"session": session_id[:12], "reason": reason})
    return len(ended)


def end_current(ctx: ServiceContext, cookie_value: str | None, *, origin: RequestOrigin) -> int:
    """Sign the browser out (RP-initiated logout)."""
    if not cookie_value:
        return 0
    return end_sessions(ctx, [token_hash(cookie_value)], origin=origin, reason="logout")


def end_user_sessions(ctx: ServiceContext, user: str, *, origin: RequestOrigin,
                      reason: str = "ended by an administrator") -> int:
    """End every session of a user (id or username)."""
    person = require_user(user)
    return end_sessions(ctx, store.open_session_ids(person.id), origin=origin, reason=reason)


def list_user_sessions(ctx: ServiceContext, user: str) -> list[SessionRecord]:
    person = require_user(user)
    return store.live_sessions_of(person.id,
                                  idle_since=time.time() - ctx.config.session.idle_timeout)
