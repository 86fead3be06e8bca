"""OpenID Connect RP-Initiated Logout 1.0."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from identityctl.errors import Unauthorized
from identityctl.oauth.authorization import trusted_redirect_uri, with_query
from identityctl.oauth.errors import OAuthError, UntrustedRedirect
from identityctl.oauth.parameters import RawParameters, read_parameters
from identityctl.security.secrets import constant_time_equal, token_hash
from identityctl.services import audit
from identityctl.services.accounts import sessions
from identityctl.services.clients.client import client_of
from identityctl.services.clients.revocation import end_grant
from identityctl.services.context import ServiceContext
from identityctl.services.origin import RequestOrigin
from identityctl.store import catalog as catalog_store

#: The form field of the confirming POST that carries :attr:`LogoutAnswer.confirmation`.
CONFIRMATION_FIELD = "confirmation"
#: What the confirmation page sends again (the client's request as it came).
_PASSED_ON = ("client_id", "post_logout_redirect_uri", "state", "ui_locales")


@dataclass(slots=True)
class LogoutAnswer:
    """What the browser gets: the client's return address (``location``), the question
    whether to sign out (``confirmation``, with the request's ``parameters`` to send again),
    or the signed-out page; ``application_id``: the application the request named (the
    pages' way back to it)."""

    location: str | None = None
    confirmation: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    application_id: str | None = None


def confirmation_of(session_cookie: str) -> str:
    """The token only this browser's pages can know: derived from its session cookie (which
    no script and no other site reads), so another site cannot confirm for it."""
    return token_hash(f"logout:{session_cookie}")


def logout(ctx: ServiceContext, raw: RawParameters, *, origin: RequestOrigin,
           session_cookie: str | None = None, confirmation: str | None = None) -> LogoutAnswer:
    """OIDC RP-Initiated Logout 1.0: end the browser's session (every client signed in
    through it, each told by back-channel logout where it asked to be), and the grant named
    by the ID token's ``sid``.

    A valid ``id_token_hint`` shows the client asks for the person who is signed in: the
    logout happens at once. Without one, anybody's page could have sent the browser here,
    so a live session ends only when the person confirms (§2: the provider asks); the
    confirming POST carries ``confirmation`` (:func:`confirmation_of`).
    """
    try:
        parameters = read_parameters(raw)
    except OAuthError as error:
        raise UntrustedRedirect(error.description, code=error.code) from error
    client_id = parameters.get("client_id")
    hint = parameters.get("id_token_hint")
    claims: dict[str, Any] | None = None
    if hint is not None:
        try:
            claims = ctx.tokens.verify_id_token(hint)
        except Unauthorized as refusal:
            raise UntrustedRedirect(f"id_token_hint is not a valid ID token of this service: "
                                    f"{refusal.description}", code="invalid_id_token_hint") \
                from refusal
        if client_id is not None and client_id != claims.get("aud"):
            raise UntrustedRedirect("client_id is not the audience of id_token_hint.",
                                    code="client_id_mismatch")
        client_id = str(claims.get("aud"))
    application = catalog_store.find_application_by_client_id(client_id) if client_id else None
    location = _return_address(parameters.get("post_logout_redirect_uri"), application,
                               parameters.get("state"))
    if claims is None and sessions.current(ctx, session_cookie) is not None and not (
            confirmation and session_cookie
            and constant_time_equal(confirmation, confirmation_of(session_cookie))):
        return LogoutAnswer(confirmation=confirmation_of(str(session_cookie)), parameters={
            name: str(parameters.get(name)) for name in _PASSED_ON
            if parameters.get(name) is not None},
            application_id=application["id"] if application else None)
    if claims is not None:
        if claims.get("sid"):
            end_grant(ctx, str(claims["sid"]), client_of(application) if application else None)
        audit.record("oauth.logout", "success", origin=origin.acting_as(client_id or ""),
                     user_id=str(claims["sub"]))
    sessions.end_current(ctx, session_cookie, origin=origin.acting_as(client_id or "browser"))
    return LogoutAnswer(location=location,
                        application_id=application["id"] if application else None)


def _return_address(target: str | None, application: dict[str, Any] | None,
                    state: str | None) -> str | None:
    """``post_logout_redirect_uri`` with ``state``, once it is one of the client's
    registered redirect URIs (checked before anything ends)."""
    if target is None:
        return None
    if application is None:
        raise UntrustedRedirect("post_logout_redirect_uri needs id_token_hint or client_id to "
                                "name the client.", code="logout_client_unknown")
    return with_query(trusted_redirect_uri(client_of(application), target), {"state": state})
