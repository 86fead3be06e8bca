"""What a resource learns from a token: userinfo (OIDC Core §5.3) and introspection
(RFC 7662)."""

from __future__ import annotations

import time
from typing import Any

from identityctl.errors import Unauthorized
from identityctl.oauth.claims import OPENID
from identityctl.oauth.discovery import INTROSPECT_PATH
from identityctl.oauth.dpop import PresentedToken
from identityctl.oauth.errors import InsufficientScope, InvalidToken, UnauthorizedClient
from identityctl.oauth.parameters import RawParameters, parse_scope, read_parameters, require
from identityctl.security.secrets import token_hash
from identityctl.services.clients.bearer import dpop_challenge, scheme_of, verify_presented
from identityctl.services.clients.client import authenticate_client
from identityctl.services.context import ServiceContext
from identityctl.services.directory.users import is_usable
from identityctl.services.oauth.token_endpoint import released_claims
from identityctl.services.origin import RequestOrigin
from identityctl.store import directory
from identityctl.store import oauth as oauth_store

BEARER_REALM = 'Bearer realm="identityctl"'


def userinfo(ctx: ServiceContext, access_token: PresentedToken | None) -> dict[str, Any]:
    """OIDC Core §5.3: the standard claims the token's scope releases about its user."""
    if access_token is None:
        raise InvalidToken("Send the access token in an Authorization: Bearer header.",
                           code="missing_token", headers={"WWW-Authenticate": BEARER_REALM})
    scheme = scheme_of(access_token)
    challenge = {"WWW-Authenticate": dpop_challenge("invalid_token") if scheme == "DPoP"
                 else f'{BEARER_REALM}, error="invalid_token"'}
    try:
        claims = verify_presented(ctx, access_token, audience=ctx.config.issuer)
    except Unauthorized as refusal:
        raise InvalidToken(refusal.description, headers=challenge) from refusal
    scope = parse_scope(claims.get("scope"))
    if OPENID not in scope:
        raise InsufficientScope("userinfo needs a token with the openid scope.", headers={
            "WWW-Authenticate": dpop_challenge("insufficient_scope", 'scope="openid"')
            if scheme == "DPoP"
            else f'{BEARER_REALM}, error="insufficient_scope", scope="openid"'})
    user = directory.find_user_by_id(str(claims["sub"]))
    if not is_usable(user):
        raise InvalidToken("The token's user no longer exists or is disabled.",
                           code="user_inactive", headers=challenge)
    return released_claims(user, scope)


def introspect(ctx: ServiceContext, raw: RawParameters, *, authorization: str | None,
               origin: RequestOrigin) -> dict[str, Any]:
    """RFC 7662 for confidential clients (resource servers): is this token live, and whose."""
    parameters = read_parameters(raw)
    client = authenticate_client(ctx, parameters, authorization, origin=origin,
                                 endpoint=INTROSPECT_PATH)
    if client.public or client.described_itself:
        # RFC 7662 §4: the server decides who may ask; a client a stranger registered (or
        # described) is no resource server of this deployment.
        raise UnauthorizedClient("Only confidential clients an administrator made can "
                                 "introspect tokens.", code="introspection_not_allowed")
    presented = require(parameters, "token")
    stored = oauth_store.find_refresh_token(token_hash(presented))
    if stored is not None:
        live = (stored.application_id == client.application_id and not stored.revoked
                and stored.rotated_at is None and stored.expires_at > time.time())
        if not live or _inactive_user(stored.user_id):
            return {"active": False}
        return {"active": True, "token_type": "refresh_token", "scope": stored.scope,
                "client_id": client.client_id, "sub": stored.user_id,
                "exp": int(stored.expires_at), "iss": ctx.config.issuer}
    try:
        claims = ctx.tokens.verify_access_token(presented, audience=None)
    except Unauthorized:
        return {"active": False}
    if claims.get("auth_time") is not None and _inactive_user(str(claims["sub"])):
        return {"active": False}
    # RFC 9449 §6.2: a bound token says so, with its key's thumbprint (cnf); RFC 8693 §4.1:
    # who acts for the subject (act).
    return {"active": True, "token_type": "DPoP" if "cnf" in claims else "Bearer",
            **{name: claims[name] for name in ("scope", "client_id", "sub", "aud", "iss", "exp",
                                               "iat", "jti", "cnf", "act") if name in claims}}


def _inactive_user(user_id: str | None) -> bool:
    user = directory.find_user_by_id(user_id) if user_id else None
    return not is_usable(user)
