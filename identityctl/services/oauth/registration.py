"""Dynamic Client Registration (RFC 7591) at ``/oauth2/register``: an MCP client or a native
app registers itself, public or with its own keys, per ``oauth.dynamic_registration``.

The rules of what may be registered are in ``identityctl.oauth.registration``; here: whether
registration is open, the initial access token when it needs one, the throttle per address,
the application it becomes (marked self-registered, visible in `app list` and to MCP), and the
audit trail.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from identityctl.errors import Forbidden, NotFound, Unauthorized
from identityctl.oauth.discovery import REGISTER_PATH
from identityctl.oauth.dpop import PresentedToken
from identityctl.oauth.errors import OAuthError
from identityctl.oauth.registration import validate_client_metadata
from identityctl.security.secrets import new_token, token_hash
from identityctl.security.tokens import require_scope
from identityctl.services import audit, throttle
from identityctl.services import catalog as catalog_service
from identityctl.services.clients import resource_servers
from identityctl.services.clients.bearer import verify_presented
from identityctl.services.clients.grants import remove_client
from identityctl.services.context import ServiceContext
from identityctl.services.origin import RequestOrigin
from identityctl.store import client_registrations
from identityctl.store.db import transaction

REGISTER_ACTION = "oauth.register"
#: About one registration in this many also removes idle self-registered clients.
PURGE_ONE_IN = 64
DAY = 86400
#: The scope of an initial access token (`identityctl token --scope client_registration`).
REGISTRATION_SCOPE = "client_registration"

#: Who the audit log names for a client removed for being unused.
IDLE_REMOVAL = RequestOrigin(actor="idle-client-removal")


def register(ctx: ServiceContext, document: Any, *, access_token: PresentedToken | None,
             origin: RequestOrigin) -> dict[str, Any]:
    """Register the client ``document`` describes; the RFC 7591 §3.2.1 response."""
    mode = ctx.config.oauth.dynamic_registration
    if mode == "off":
        raise NotFound("Clients cannot register themselves here (oauth.dynamic_registration "
                       "is off); an administrator creates applications.",
                       code="registration_disabled")
    registrant = origin.acting_as("dcr:" + (origin.address or "unknown"))
    try:
        if mode == "token":
            _check_initial_access_token(ctx, access_token)
        throttle.count_registration(ctx, action=REGISTER_ACTION, origin=origin)
        metadata = validate_client_metadata(
            document, allowed_scopes=resource_servers.registrable_scopes(ctx),
            default_scopes=tuple(ctx.config.oauth.registration_scopes))
    except (OAuthError, Unauthorized, Forbidden) as refusal:
        audit.record(REGISTER_ACTION, "failure", origin=registrant,
                     details={"code": refusal.code})
        raise
    if secrets.randbelow(PURGE_ONE_IN) == 0:  # housekeeping, not on every registration
        remove_idle_clients(ctx)
    client_id = catalog_service.applications.new_client_id()
    response = {"client_id": client_id, "client_id_issued_at": int(time.time()),
                **metadata.registered()}
    registration_token = new_token()
    with transaction():  # the client, its registration access token and the event together
        application, _ = catalog_service.applications.create_application({
            "name": f"{metadata.client_name} [{client_id[:8]}]",
            "description": "Registered itself (RFC 7591)"
                           + (f"; client_uri {metadata.client_uri}" if metadata.client_uri
                              else ""),
            "inboundAuthConfig": [{"type": "oauth2", "config": metadata.oauth_config(client_id)}],
        }, origin=registrant, marks={"selfRegistered": True})
        client_registrations.save(application["id"], token_hash(registration_token), response)
        audit.record(REGISTER_ACTION, "success", origin=registrant,
                     details={"applicationId": application["id"], "clientId": client_id,
                              "clientName": metadata.client_name,
                              "authMethod": metadata.token_endpoint_auth_method})
    return _with_management(ctx, response, registration_token)


def _with_management(ctx: ServiceContext, response: dict[str, Any],
                     registration_token: str) -> dict[str, Any]:
    """RFC 7592 §3: where and with what the client reads or deletes its registration."""
    return {**response, "registration_access_token": registration_token,
            "registration_client_uri":
                f"{ctx.config.base_url}{REGISTER_PATH}/{response['client_id']}"}


def _registration(client_id: str, registration_token: str | None
                  ) -> client_registrations.RegistrationRecord:
    """RFC 7592 §2: the registration the token is for; an unknown client, a wrong token and
    no token are all 401 invalid_token (nothing said about which client ids exist)."""
    found = client_registrations.find(client_id, token_hash(registration_token)) \
        if registration_token else None
    if found is None:
        raise Unauthorized("The registration access token is not valid for this client.",
                           code="invalid_token")
    return found


def read_registration(ctx: ServiceContext, client_id: str,
                      registration_token: str | None) -> dict[str, Any]:
    """RFC 7592 §2.1: the client's registration, as registered."""
    found = _registration(client_id, registration_token)
    assert registration_token is not None  # _registration refuses a missing one
    return _with_management(ctx, found.metadata, registration_token)


def delete_registration(ctx: ServiceContext, client_id: str, registration_token: str | None,
                        *, origin: RequestOrigin) -> None:
    """RFC 7592 §2.3: the client goes, with its grants and every token it holds."""
    found = _registration(client_id, registration_token)
    registrant = origin.acting_as(f"dcr:{client_id}")
    remove_client(ctx, catalog_service.applications.get_application(found.application_id),
                  origin=registrant)
    audit.record("oauth.register_delete", "success", origin=registrant,
                 details={"clientId": client_id})


def remove_idle_clients(ctx: ServiceContext) -> int:
    """Remove the clients that registered themselves or were described by a document and
    have not been used (no code, no refresh) for ``oauth.registration_idle_days``; how many.
    Their grants and tokens go with them."""
    cutoff = time.time() - ctx.config.oauth.registration_idle_days * DAY
    last_used = catalog_service.applications.last_uses()
    removed = 0
    for application in catalog_service.applications.list_applications():
        marks = catalog_service.applications.oauth_config(application)
        if (marks.get("selfRegistered") or marks.get("clientDocument")) \
                and last_used.get(application["id"], time.time()) < cutoff:
            remove_client(ctx, application, origin=IDLE_REMOVAL)
            removed += 1
    return removed


def _check_initial_access_token(ctx: ServiceContext,
                                access_token: PresentedToken | None) -> None:
    """RFC 7591 §3: in "token" mode a registration carries an initial access token, an
    access token of this issuer with scope client_registration (revocation checked)."""
    if access_token is None:
        raise Unauthorized("Registration needs an initial access token in an Authorization: "
                           "Bearer header (identityctl token --scope client_registration).",
                           code="missing_token")
    claims = verify_presented(ctx, access_token, audience=ctx.config.issuer)
    require_scope(claims, REGISTRATION_SCOPE)
