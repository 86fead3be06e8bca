"""Applications (OAuth clients): validation, templates, secrets; the single implementation
behind the CLI, the MCP tools and the OAuth layer."""

from __future__ import annotations

import copy
import secrets
import string
from typing import Any
from urllib.parse import urlsplit

from identityctl.errors import BadRequest, Conflict, InvalidField, MissingField, NotFound
from identityctl.oauth import client_auth
from identityctl.oauth.client_assertion import check_client_keys
from identityctl.oauth.grants import GRANT_TYPES, device_code, token_exchange
from identityctl.oauth.registration import exact_uri_problem
from identityctl.security import passwords
from identityctl.services import audit, shapes
from identityctl.services.catalog.flows import (
    DEFAULT_AUTH_FLOW,
    DEFAULT_REGISTRATION_FLOW,
    require_flow,
)
from identityctl.services.catalog.themes import require_theme
from identityctl.services.directory.users import require_ou
from identityctl.services.origin import RequestOrigin
from identityctl.store import catalog

THEME_PLACEHOLDER = "<THEME_ID>"
AUTH_METHODS = client_auth.METHODS

_BROWSER_SCOPES = ["openid", "profile", "email"]
TEMPLATES: dict[str, dict[str, Any]] = {
    "SPA": {
        "name": "My single-page app", "template": "SPA", "themeId": THEME_PLACEHOLDER,
        "isRegistrationFlowEnabled": False,
        "inboundAuthConfig": [{"type": "oauth2", "config": {
            "redirectUris": ["http://localhost:3000/callback"],
            "grantTypes": ["authorization_code", "refresh_token"], "responseTypes": ["code"],
            "tokenEndpointAuthMethod": "none", "pkceRequired": True, "publicClient": True,
            "scopes": _BROWSER_SCOPES}}],
    },
    "Mobile": {
        "name": "My mobile app", "template": "Mobile", "themeId": THEME_PLACEHOLDER,
        "isRegistrationFlowEnabled": False,
        "inboundAuthConfig": [{"type": "oauth2", "config": {
            "redirectUris": ["<CUSTOM_SCHEME>://callback"],
            "grantTypes": ["authorization_code", "refresh_token"], "responseTypes": ["code"],
            "tokenEndpointAuthMethod": "none", "pkceRequired": True, "publicClient": True,
            "scopes": _BROWSER_SCOPES}}],
    },
    "Server": {
        "name": "My server-rendered app", "template": "Server", "themeId": THEME_PLACEHOLDER,
        "isRegistrationFlowEnabled": False,
        "inboundAuthConfig": [{"type": "oauth2", "config": {
            "redirectUris": ["https://app.example.com/callback"],
            "grantTypes": ["authorization_code", "refresh_token"], "responseTypes": ["code"],
            "tokenEndpointAuthMethod": "client_secret_basic", "pkceRequired": True,
            "publicClient": False, "scopes": _BROWSER_SCOPES}}],
    },
    # A TV, console or command-line tool: the person signs in on another device with the
    # code it shows (RFC 8628); no redirect URI, no page of its own, so no theme.
    "Device": {
        "name": "My TV or device app", "template": "Device",
        "isRegistrationFlowEnabled": False,
        "inboundAuthConfig": [{"type": "oauth2", "config": {
            "redirectUris": [], "grantTypes": [device_code.GRANT_TYPE, "refresh_token"],
            "responseTypes": [], "tokenEndpointAuthMethod": "none", "pkceRequired": True,
            "publicClient": True, "scopes": _BROWSER_SCOPES}}],
    },
    "M2M": {
        "name": "My backend service", "template": "M2M",
        "inboundAuthConfig": [{"type": "oauth2", "config": {
            "redirectUris": [], "grantTypes": ["client_credentials"], "responseTypes": [],
            "tokenEndpointAuthMethod": "client_secret_basic", "pkceRequired": False,
            "publicClient": False, "scopes": ["api"]}}],
    },
}


def application_templates() -> dict[str, dict[str, Any]]:
    return copy.deepcopy(TEMPLATES)


def template_named(name: str) -> tuple[str, dict[str, Any]]:
    """The template called ``name`` (any letter case): its proper name and a copy of it."""
    for key, document in application_templates().items():
        if key.lower() == name.lower():
            return key, document
    raise InvalidField("template", f"must be one of {', '.join(TEMPLATES)}")


def require_own_redirect_uri(template: str, document: dict[str, Any]) -> None:
    """An application made from ``template`` that signs people in needs a redirect URI of
    its own: the template's example is not one."""
    config, example = oauth_config(document), oauth_config(TEMPLATES[template])
    if "authorization_code" in config["grantTypes"] and (
            not config["redirectUris"] or config["redirectUris"] == example["redirectUris"]):
        raise MissingField("redirectUris", f"The {template} template needs at least one "
                           "redirect URI (where users return after sign-in).")


def list_applications() -> list[dict[str, Any]]:
    return catalog.list_applications()


def applications_page(*, limit: int, offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
    """One page of applications (by name) and how many there are in all."""
    return catalog.applications_page(limit=limit, offset=offset)


def get_application(app_id: str) -> dict[str, Any]:
    """The application with this id (not a client id), else NotFound."""
    return catalog.get_application(app_id)


def require_application(id_or_client_id: str) -> dict[str, Any]:
    found = catalog.find_application(id_or_client_id)
    if found is None:
        raise NotFound(f"No application '{id_or_client_id}'.", code="application_not_found")
    return found


def require_application_named(reference: str) -> dict[str, Any]:
    """The application an admin names: by id, client id or name (a name in any letter case
    when no application has it exactly). A reference two applications fit is refused, naming
    both, rather than guessed: the next command may delete one."""
    everything = catalog.list_applications()
    exact = {app["id"]: app for app in everything
             if reference in (app["id"], app["name"], oauth_config(app).get("clientId"))}
    found = exact or {app["id"]: app for app in everything
                      if app["name"].casefold() == reference.casefold()}
    if not found:
        raise NotFound(f"No application with the id, client id or name '{reference}'.",
                       code="application_not_found")
    if len(found) > 1:
        named = "; ".join(f"{app['name']} (client id {oauth_config(app).get('clientId')})"
                          for app in found.values())
        raise Conflict(f"'{reference}' names more than one application: {named}. Give its "
                       "client id.", code="ambiguous_application")
    return next(iter(found.values()))


def require_application_by_client_id(client_id: str) -> dict[str, Any]:
    """The application whose OAuth client id is ``client_id`` (ids are not tried)."""
    found = catalog.find_application_by_client_id(client_id)
    if found is None:
        raise NotFound(f"No application with client id '{client_id}'.",
                       code="application_not_found")
    return found


def oauth_config(application: dict[str, Any]) -> dict[str, Any]:
    """The application's oauth2 inbound configuration (clientId included)."""
    for entry in application.get("inboundAuthConfig", []):
        if entry.get("type") == "oauth2":
            return entry.get("config", {})
    return {}


def _validate_redirect_uri(index: int, uri: object) -> str:
    field = f"inboundAuthConfig[0].config.redirectUris[{index}]"
    problem = exact_uri_problem(uri) if isinstance(uri, str) else "must be a URI (text)"
    if problem:
        raise InvalidField(field, problem)
    try:
        parts = urlsplit(uri)
    except ValueError:  # "http://[::1": not even a URI
        raise InvalidField(field, f"{uri!r} is not a URI") from None
    if not parts.scheme or (parts.scheme in ("http", "https") and not parts.hostname):
        raise InvalidField(field, f"{uri!r} is not an absolute URI")
    if "<" in uri:
        raise InvalidField(field, f"{uri!r} still holds a template placeholder")
    return uri


def _check_backchannel_logout_uri(field: str, uri: object) -> None:
    """OpenID Connect Back-Channel Logout 1.0 §2.2: an absolute http(s) URL without a
    fragment (https in production; the service POSTs logout tokens to it)."""
    if not isinstance(uri, str):
        raise InvalidField(field, "must be a URL")
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname or "#" in uri:
        raise InvalidField(field, f"{uri!r} is not an absolute http(s) URL without a fragment")


def _validate_oauth(config: dict[str, Any], template: str) -> dict[str, Any]:
    prefix = "inboundAuthConfig[0].config"
    grants = config.get("grantTypes") or (["client_credentials"] if template == "M2M"
                                          else ["authorization_code", "refresh_token"])
    for grant in grants:
        if grant not in GRANT_TYPES:
            raise InvalidField(f"{prefix}.grantTypes",
                               f"{grant!r} is not one of {', '.join(GRANT_TYPES)} "
                               "(implicit and password grants are not offered)")
    public = bool(config.get("publicClient", False))
    method = config.get("tokenEndpointAuthMethod") or ("none" if public
                                                       else "client_secret_basic")
    if method not in AUTH_METHODS:
        raise InvalidField(f"{prefix}.tokenEndpointAuthMethod",
                           f"must be one of {', '.join(AUTH_METHODS)}")
    if public != (method == "none"):
        raise InvalidField(f"{prefix}.tokenEndpointAuthMethod",
                           "public clients use 'none'; confidential clients need a secret")
    if public and "client_credentials" in grants:
        raise InvalidField(f"{prefix}.grantTypes", "a public client cannot use client_credentials")
    keys = _client_keys(config, method, prefix)
    exchange = _exchange_policy(config, grants, public, prefix)
    redirect_uris = [_validate_redirect_uri(i, uri)
                     for i, uri in enumerate(config.get("redirectUris") or [])]
    if "authorization_code" in grants and not redirect_uris:
        raise InvalidField(f"{prefix}.redirectUris", "the authorization_code grant needs at "
                           "least one redirect URI")
    scopes = config.get("scopes") or (["openid"] if "authorization_code" in grants else [])
    if not all(isinstance(s, str) and s and " " not in s for s in scopes):
        raise InvalidField(f"{prefix}.scopes", "must be a list of scope names")
    token = config.get("token") or {}
    if not isinstance(token, dict):
        raise InvalidField(f"{prefix}.token", "must be an object")
    logout_uri = config.get("backchannelLogoutUri")
    if logout_uri is not None:
        _check_backchannel_logout_uri(f"{prefix}.backchannelLogoutUri", logout_uri)
    par = config.get("requirePushedAuthorizationRequests", False)
    dpop = config.get("dpopBoundAccessTokens", False)
    for field, value in (("requirePushedAuthorizationRequests", par),
                         ("dpopBoundAccessTokens", dpop)):
        if not isinstance(value, bool):
            raise InvalidField(f"{prefix}.{field}", "must be true or false")
    return {**({"backchannelLogoutUri": logout_uri} if logout_uri else {}), **keys,
            **({"requirePushedAuthorizationRequests": True} if par else {}),
            **({"dpopBoundAccessTokens": True} if dpop else {}),
            **({"tokenExchange": exchange} if exchange else {}),
            "redirectUris": redirect_uris, "grantTypes": grants,
            "responseTypes": ["code"] if "authorization_code" in grants else [],
            "tokenEndpointAuthMethod": method,
            # PKCE is on for every client unless a confidential one turns it off explicitly.
            "pkceRequired": True if public else bool(config.get("pkceRequired", True)),
            "publicClient": public, "scopes": scopes, "token": token}


def _client_keys(config: dict[str, Any], method: str, prefix: str) -> dict[str, Any]:
    """private_key_jwt: the client's public keys, as a JWK Set (``jwks``) or at an https URL
    (``jwksUri``, fetched like a client metadata document), and perhaps the one algorithm it
    signs with (``tokenEndpointAuthSigningAlg``)."""
    keys = check_client_keys(
        uses_keys=method == client_auth.PRIVATE_KEY_JWT, jwks=config.get("jwks"),
        jwks_uri=config.get("jwksUri"), signing_alg=config.get("tokenEndpointAuthSigningAlg"),
        fields=(f"{prefix}.jwks", f"{prefix}.jwksUri", f"{prefix}.tokenEndpointAuthSigningAlg"))
    return {name: value for name, value in (
        ("jwks", keys.jwks), ("jwksUri", keys.jwks_uri),
        ("tokenEndpointAuthSigningAlg", keys.signing_alg)) if value is not None}


def _exchange_policy(config: dict[str, Any], grants: list[str], public: bool,
                     prefix: str) -> dict[str, list[str]]:
    """RFC 8693: the resources a client may exchange tokens for (``targets``), and those
    whose tokens it may present besides its own (``subjectAudiences``)."""
    policy = config.get("tokenExchange")
    if token_exchange.GRANT_TYPE not in grants:
        if policy:
            raise InvalidField(f"{prefix}.tokenExchange", "needs the grant type "
                               f"{token_exchange.GRANT_TYPE}")
        return {}
    if public:
        raise InvalidField(f"{prefix}.grantTypes", "a public client cannot exchange tokens")
    if not isinstance(policy, dict):
        raise InvalidField(f"{prefix}.tokenExchange", 'must be {"targets": [resource URIs], '
                           '"subjectAudiences": [resource URIs]}')
    checked: dict[str, list[str]] = {}
    for key in ("targets", "subjectAudiences"):
        values = policy.get(key) or []
        if not isinstance(values, list) or not all(
                isinstance(value, str) and urlsplit(value).scheme and "#" not in value
                for value in values):
            raise InvalidField(f"{prefix}.tokenExchange.{key}", "must be a list of absolute "
                               "URIs without a fragment")
        checked[key] = values
    if not checked["targets"]:
        raise InvalidField(f"{prefix}.tokenExchange.targets", "name at least one resource "
                           "the client may exchange tokens for")
    return checked


def has_client_secret(config: dict[str, Any]) -> bool:
    """Whether a client authenticates with a secret (not keys, not nothing); as validated,
    a confidential client without a method uses client_secret_basic."""
    method = config.get("tokenEndpointAuthMethod") or (
        client_auth.NONE if config.get("publicClient") else client_auth.BASIC)
    return method in client_auth.SECRET_METHODS


def _resolve_flow(value: str | None, flow_type: str, default_handle: str) -> str | None:
    if value:
        flow = require_flow(value, flow_type)
        if flow["flowType"] != flow_type:
            raise InvalidField("authFlowId" if flow_type == "AUTHENTICATION"
                               else "registrationFlowId", f"flow '{value}' is not {flow_type}")
        return flow["id"]
    default = catalog.find_flow_by_handle(default_handle, flow_type)
    return default["id"] if default else None


def _normalise_application(document: dict[str, Any]) -> dict[str, Any]:
    """Validate an application document into the store's fields (no client id/secret)."""
    if not isinstance(document, dict):
        raise BadRequest("The application must be a JSON object.")
    shapes.check(document, shapes.APPLICATION)
    name = document.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InvalidField("name", "is required")
    template = document.get("template") or ""
    if template and template not in TEMPLATES:
        raise InvalidField("template", f"must be one of {', '.join(TEMPLATES)}")
    config = oauth_config(document)
    oauth = _validate_oauth(config, template)
    is_m2m = oauth["grantTypes"] == ["client_credentials"]
    theme_id = document.get("themeId")
    if theme_id == THEME_PLACEHOLDER:
        # Where to find the themes is the adapter's to say (a command, a tool).
        raise InvalidField("themeId", f"still holds the template placeholder "
                           f"{THEME_PLACEHOLDER}: put a real theme's id or handle there",
                           code="theme_placeholder")
    if theme_id:
        theme_id = require_theme(theme_id)["id"]
    elif not is_m2m:
        default_theme = catalog.find_theme("default")
        theme_id = default_theme["id"] if default_theme else None
    ou_id = document.get("ouId")
    if ou_id:
        ou_id = require_ou(ou_id)["id"]
    login = "authorization_code" in oauth["grantTypes"]
    return {
        "name": name.strip(), "description": document.get("description") or "",
        "template": template, "ouId": ou_id,
        "authFlowId": _resolve_flow(document.get("authFlowId"), "AUTHENTICATION",
                                    DEFAULT_AUTH_FLOW) if login else None,
        "registrationFlowId": _resolve_flow(document.get("registrationFlowId"),
                                            "REGISTRATION",
                                            DEFAULT_REGISTRATION_FLOW) if login else None,
        "isRegistrationFlowEnabled": bool(document.get("isRegistrationFlowEnabled", False)),
        "passkeyUpgrade": bool(document.get("passkeyUpgrade", True)),
        "themeId": None if is_m2m else theme_id,
        "allowedUserTypes": list(document.get("allowedUserTypes") or []),
        "passkeysOnly": _passkeys_only(document),
        "oauth": oauth,
    }


def _passkeys_only(document: dict[str, Any]) -> bool:
    value = document.get("passkeysOnly", False)
    if not isinstance(value, bool):
        raise InvalidField("passkeysOnly", "must be true or false")
    return value


_CLIENT_ID_ALPHABET = string.ascii_letters + string.digits


def new_client_id() -> str:
    """24 letters and digits (~143 bits): never starts with "-", which a command line would
    take for an option (`identityctl app rotate-secret <client id>`), nor needs quoting."""
    return "".join(secrets.choice(_CLIENT_ID_ALPHABET) for _ in range(24))


def create_application(document: dict[str, Any], *, origin: RequestOrigin,
                       marks: dict[str, Any] | None = None,
                       client_secret: str | None = None) -> tuple[dict[str, Any], str | None]:
    """Create an application; returns it and its client secret (shown once, stored hashed).
    A confidential client gets a new secret unless ``client_secret`` is given (configuration
    as code brings its own, checked by :func:`checked_client_secret`).

    ``marks``: what the service itself records in the oauth configuration of a client that
    described itself (``selfRegistered``: RFC 7591, services/oauth/registration.py;
    ``clientDocument``: a client metadata document, services/clients/client.py). An admin's
    document cannot set them, and an admin's update drops them (the client is theirs then).
    """
    fields = _normalise_application(document)
    fields["oauth"].update(marks or {})
    client_id = oauth_config(document).get("clientId") or new_client_id()
    secret = None if not has_client_secret(fields["oauth"]) else (
        checked_client_secret(client_secret) if client_secret else secrets.token_urlsafe(32))
    created = catalog.create_application(
        **fields, clientId=client_id,
        clientSecretHash=passwords.hash_password(secret) if secret else None)
    audit.record("application.create", "success", origin=origin,
                 details={"id": created["id"], "clientId": client_id})
    return created, secret


def update_application(document: dict[str, Any], *, origin: RequestOrigin,
                       marks: dict[str, Any] | None = None) -> dict[str, Any]:
    """Full replacement of an application (id required); client id and secret are kept.
    ``marks``: as for :func:`create_application`."""
    app_id = document.get("id") if isinstance(document, dict) else None
    if not app_id:
        raise InvalidField("id", "is required for an update")
    current = catalog.get_application(app_id)
    fields = _normalise_application(document)
    fields["oauth"].update(marks or {})
    if fields["oauth"]["publicClient"] != oauth_config(current).get("publicClient"):
        raise InvalidField("inboundAuthConfig[0].config.publicClient",
                           "cannot change; create a new application instead")
    updated = catalog.update_application(app_id, **fields)
    audit.record("application.update", "success", origin=origin, details={"id": app_id})
    return updated


#: A secret an admin brings is at least this long: 32 characters of a generator's output
#: hold 128 bits or more (OWASP ASVS 5 §11.2).
MIN_CLIENT_SECRET = 32


def checked_client_secret(secret: str) -> str:
    if len(secret) < MIN_CLIENT_SECRET:
        raise InvalidField("clientSecret", f"must be at least {MIN_CLIENT_SECRET} characters "
                           "(make one with `openssl rand -base64 32`)", code="weak_secret")
    return secret


def client_secret_matches(application: dict[str, Any], secret: str) -> bool:
    """Whether ``secret`` is the confidential client's current secret."""
    return passwords.verify_password(
        catalog.client_secret_hash(oauth_config(application)["clientId"]), secret)


def regenerate_client_secret(id_or_client_id: str, *, origin: RequestOrigin,
                             secret: str | None = None) -> str:
    """A new client secret for a confidential client (``secret``: the admin's own)."""
    application = require_application(id_or_client_id)
    if not has_client_secret(oauth_config(application)):
        raise BadRequest("This client has no secret: it is public, or it authenticates with "
                         "its keys (private_key_jwt).", code="public_client")
    secret = checked_client_secret(secret) if secret else secrets.token_urlsafe(32)
    catalog.update_application(application["id"],
                               clientSecretHash=passwords.hash_password(secret))
    audit.record("application.secret_rotated", "success", origin=origin,
                 details={"id": application["id"]})
    return secret


def last_uses() -> dict[str, float]:
    """When each application (by id) was last used: its newest code or refresh token."""
    return catalog.last_uses()


def delete_application(id_or_client_id: str, *, origin: RequestOrigin) -> None:
    app_id = require_application(id_or_client_id)["id"]
    catalog.delete_application(app_id)
    audit.record("application.delete", "success", origin=origin, details={"id": app_id})
