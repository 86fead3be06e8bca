"""``POST /oauth2/par`` (RFC 9126): a client pushes its authorization request over the back
channel and gets a one-time ``request_uri`` for the browser to carry instead.

The push is checked as ``/oauth2/authorize`` would check it (the same checks, named in
services/oauth/request_checks.py) and answered with the error at once;
``/oauth2/authorize?client_id&request_uri`` then takes the stored request, once, and goes on
as with any other (services/oauth/authorization.py).
"""

from __future__ import annotations

import time
from typing import Any

from identityctl.oauth.discovery import PAR_PATH
from identityctl.oauth.errors import InvalidRequest, OAuthError, UntrustedRedirect
from identityctl.oauth.parameters import Parameters, RawParameters, read_parameters
from identityctl.oauth.pushed_requests import LIFETIME, REQUEST_URI_PREFIX, request_reference
from identityctl.security.secrets import new_token, token_hash
from identityctl.services import audit
from identityctl.services.clients.client import authenticate_client
from identityctl.services.context import ServiceContext
from identityctl.services.oauth.request_checks import EndpointRequest, run_checks
from identityctl.services.origin import RequestOrigin
from identityctl.store import oauth as oauth_store


def push(ctx: ServiceContext, raw: RawParameters, *, authorization: str | None,
         origin: RequestOrigin, dpop_proof: str | None = None) -> dict[str, Any]:
    """The pushed request's ``request_uri`` and its lifetime (RFC 9126 §2.2). With a DPoP
    proof, the code will be redeemable only with a proof by the same key (RFC 9449 §10.1)."""
    parameters = read_parameters(raw)
    client = authenticate_client(ctx, parameters, authorization, origin=origin,
                                 endpoint=PAR_PATH)
    request = EndpointRequest(ctx=ctx, client=client, parameters=parameters,
                              dpop_proof=dpop_proof)
    try:
        run_checks(PAR_PATH, request)
    except UntrustedRedirect as refusal:  # here it is an error answer like any other
        raise InvalidRequest(refusal.description, code=refusal.code) from None
    except OAuthError as refusal:
        audit.record("oauth.par", "failure", origin=origin.acting_as(client.client_id),
                     details={"error": refusal.code})
        raise
    reference = new_token(32)
    oauth_store.create_pushed_request(key=token_hash(reference),
                                      application_id=client.application_id,
                                      parameters=request.kept,
                                      expires_at=time.time() + LIFETIME)
    return {"request_uri": REQUEST_URI_PREFIX + reference, "expires_in": LIFETIME}


def take(application_id: str, client_id: str, request_uri: str) -> Parameters:
    """The parameters of the client's pushed request, used up; an error page for an unknown,
    expired, used or other client's request_uri (there is no trusted redirect URI yet)."""
    reference = request_reference(request_uri)
    stored = oauth_store.take_pushed_request(token_hash(reference), application_id) \
        if reference else None
    if stored is None:
        raise UntrustedRedirect("This sign-in link has expired or was used already. Go back to "
                                "the application and start again.", code="request_uri_invalid")
    return read_parameters({**stored, "client_id": client_id})
