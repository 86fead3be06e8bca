"""Which checks run at which authorization endpoint, in the style of node oidc-provider's
``lib/actions/authorization/index.js``.

Each check is one function, named once in :data:`CHECKS`; :data:`ENDPOINT_CHECKS` lists, per
endpoint, the checks that run there, in order. ``/oauth2/authorize``, the pushed request
(RFC 9126: checked as authorize would check it) and the device authorization request
(RFC 8628) share a rule by naming the same check, so they cannot drift apart.

The checks of the code request itself are pure (``identityctl.oauth.authorization``:
:data:`CODE_REQUEST`); the ones here need the deployment: its resource servers, the DPoP
proofs it has seen, whether it wants requests pushed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from identityctl.oauth.authorization import CODE_REQUEST, RequestUnderCheck, check_redirect_uri
from identityctl.oauth.discovery import AUTHORIZE_PATH, DEVICE_AUTHORIZATION_PATH, PAR_PATH
from identityctl.oauth.errors import InvalidRequest
from identityctl.oauth.grants import device_code
from identityctl.oauth.pushed_requests import pushed_parameters
from identityctl.services.clients import dpop, resource_servers
from identityctl.services.context import ServiceContext


@dataclass(slots=True, kw_only=True)
class EndpointRequest(RequestUnderCheck):
    """A request under check at one of the endpoints, with what only the service knows."""

    ctx: ServiceContext
    #: authorize: the parameters are those of a pushed request (its request_uri came).
    pushed: bool = False
    #: The pushed request's DPoP header, if any.
    dpop_proof: str | None = None
    #: What a push stores: its parameters without the client's credentials.
    kept: dict[str, Any] = field(default_factory=dict)


def keep_pushed_parameters(request: EndpointRequest) -> None:
    request.kept = pushed_parameters(request.parameters)


def check_dpop_proof(request: EndpointRequest) -> None:
    """RFC 9449 §10.1: with a DPoP proof, the code will be redeemable only with a proof by
    the same key; a dpop_jkt sent as well must name that key."""
    if request.dpop_proof is None:
        return
    ctx = request.ctx
    proof = dpop.checked_proof(ctx, request.dpop_proof, method="POST",
                               url=ctx.config.base_url + PAR_PATH)
    if request.kept.setdefault("dpop_jkt", proof.jkt) != proof.jkt:
        raise InvalidRequest("dpop_jkt is not the thumbprint of the DPoP proof's key.",
                             code="dpop_jkt_mismatch")


def check_par_required(request: EndpointRequest) -> None:
    """RFC 9126 §5-6: the deployment, or the client, takes pushed requests only."""
    if not request.pushed and (request.client.par_required or
                               request.ctx.config.oauth.require_pushed_authorization_requests):
        raise InvalidRequest("This client's authorization requests must be pushed to "
                             f"{PAR_PATH} first (RFC 9126).", code="par_required")


def check_device_grant(request: EndpointRequest) -> None:
    request.client.require_grant(device_code.GRANT_TYPE)


def check_resources(request: EndpointRequest) -> None:
    """RFC 8707: each resource asked for is one of ours, and the scope is one it serves."""
    resource_servers.check_requested_resources(request.ctx, request.parameters.resources,
                                               request.scope)


Check = Callable[[EndpointRequest], None]

#: Every check, once, by name.
CHECKS: dict[str, Check] = {
    "pushed_parameters": keep_pushed_parameters,
    "dpop_proof": check_dpop_proof,
    "redirect_uri": check_redirect_uri,
    "par_required": check_par_required,
    **CODE_REQUEST,
    "device_grant": check_device_grant,
    "resources": check_resources,
}

#: The checks each endpoint runs, in order (the first refusal is the answer).
ENDPOINT_CHECKS: dict[str, tuple[str, ...]] = {
    AUTHORIZE_PATH: ("redirect_uri", "par_required", *CODE_REQUEST, "resources"),
    PAR_PATH: ("pushed_parameters", "dpop_proof", "redirect_uri", *CODE_REQUEST,
               "resources"),
    DEVICE_AUTHORIZATION_PATH: ("device_grant", "scope", "resources"),
}


def run_checks(endpoint: str, request: EndpointRequest) -> None:
    """Run ``endpoint``'s checks over ``request``, which then holds what they found."""
    for name in ENDPOINT_CHECKS[endpoint]:
        CHECKS[name](request)
