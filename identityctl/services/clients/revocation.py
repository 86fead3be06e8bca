"""Ending grants and tokens: token revocation (RFC 7009), and the end of a grant on a code or
refresh-token replay and on logout."""

from __future__ import annotations

import time

from identityctl.errors import Unauthorized
from identityctl.oauth.client import Client
from identityctl.oauth.discovery import REVOKE_PATH
from identityctl.oauth.parameters import RawParameters, read_parameters, require
from identityctl.security.secrets import token_hash
from identityctl.security.tokens import LEEWAY_SECONDS
from identityctl.services import audit
from identityctl.services.clients.client import authenticate_client
from identityctl.services.context import ServiceContext
from identityctl.services.origin import RequestOrigin
from identityctl.store import oauth as oauth_store
from identityctl.store.oauth import IssuedToken


def end_grant(ctx: ServiceContext, family: str, client: Client | None) -> None:
    """End a grant: its refresh tokens, and every access token that names it (``sid``),
    remembered until the longest-lived of them would have expired anyway."""
    default = ctx.config.oauth.access_token_ttl
    ttl = max(default, client.ttl("accessTokenTtl", default)) if client else default
    oauth_store.revoke_family(family, tokens_live_until=time.time() + ttl + LEEWAY_SECONDS)


def revoke(ctx: ServiceContext, raw: RawParameters, *, authorization: str | None,
           origin: RequestOrigin) -> None:
    """RFC 7009: end a refresh token's grant, or an access token, of the calling client.

    Unknown, invalid and other clients' tokens are answered alike (200, nothing done), so
    the endpoint says nothing about tokens the caller does not own.
    """
    parameters = read_parameters(raw)
    client = authenticate_client(ctx, parameters, authorization, origin=origin,
                                 endpoint=REVOKE_PATH)
    presented = require(parameters, "token")
    stored = oauth_store.find_refresh_token(token_hash(presented))
    if stored is not None:
        if stored.application_id == client.application_id:
            end_grant(ctx, stored.family, client)
            audit.record("oauth.revoke", "success", origin=origin.acting_as(client.client_id),
                         user_id=stored.user_id,
                         details={"token": "refresh_token"})
        return
    try:
        claims = ctx.tokens.verify_access_token(presented, audience=None)
    except Unauthorized:
        return
    if claims.get("client_id") == client.client_id:
        oauth_store.revoke_tokens([IssuedToken(jti=str(claims["jti"]),
                                               expires_at=float(claims["exp"]))])
        audit.record("oauth.revoke", "success", origin=origin.acting_as(client.client_id),
                     details={"token": "access_token"})
