"""OpenID Connect RP-Initiated Logout 1.0."""

from __future__ import annotations

from identityctl.errors import Unauthorized
from identityctl.oauth.authorization import trusted_redirect_uri, with_query
from identityctl.oauth.errors import OAuthError, UntrustedRedirect
from identityctl.oauth.parameters import RawParameters, read_parameters
from identityctl.services import sessions
from identityctl.services.context import ServiceContext
from identityctl.services.oauth.clients import client_of
from identityctl.services.oauth.revocation import end_grant
from identityctl.store import audit
from identityctl.store import catalog as catalog_store


def logout(ctx: ServiceContext, raw: RawParameters, *,
           session_cookie: str | None = None) -> str | None:
    """OIDC RP-Initiated Logout 1.0: end the browser's session (every client signed in
    through it, each told by back-channel logout where it asked to be), and the grant named
    by the ID token's ``sid``.

    Returns where to send the browser (a registered redirect URI of the client, with
    ``state``), or None to show the signed-out page.
    """
    try:
        parameters = read_parameters(raw)
    except OAuthError as error:
        raise UntrustedRedirect(error.description, code=error.code) from error
    client_id = parameters.get("client_id")
    hint = parameters.get("id_token_hint")
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
        if claims.get("sid"):
            issued_to = catalog_store.find_application_by_client_id(client_id)
            end_grant(ctx, str(claims["sid"]), client_of(issued_to) if issued_to else None)
        audit.record("oauth.logout", "success", actor=client_id, user_id=str(claims["sub"]))
    sessions.end_current(ctx, session_cookie, actor=client_id or "browser")
    target = parameters.get("post_logout_redirect_uri")
    if target is None:
        return None
    application = catalog_store.find_application_by_client_id(client_id) if client_id else None
    if application is None:
        raise UntrustedRedirect("post_logout_redirect_uri needs id_token_hint or client_id to "
                                "name the client.", code="logout_client_unknown")
    trusted = trusted_redirect_uri(client_of(application), target)
    return with_query(trusted, {"state": parameters.get("state")})
