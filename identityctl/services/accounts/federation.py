"""Upstream identity providers: managing them, the conversation with them, and the accounts
their sign-ins make and link. The flow executors that use this (OIDCAuthExecutor,
GoogleOIDCAuthExecutor, GithubOAuthExecutor, FederatedAuthResolverExecutor) are in
services/flows/executors/federation.py.

An executor's first run sends the browser to the provider (a REDIRECTION step); the
provider sends it back to ``{base_url}/gate/federated``, whose page continues the same
execution with ``code`` and ``state``; the executor's second run checks the answer
(``identityctl.federation``), redeems the code (PKCE, the client secret) and resolves our
user:

- an upstream account already linked signs its user in;
- else, when no user has its e-mail address, a user is created from it (the application's
  self-registration user type, the provider's attribute mapping) and linked;
- else the upstream account waits, unlinked, until the person signs in to that account
  another way; FederatedAuthResolverExecutor then names both accounts and links them only
  when the person says so: neither a matching e-mail address nor a sign-in alone ever gives
  an account away (docs/security.md, "Linking accounts").
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import time
import weakref
from functools import partial
from typing import Any
from urllib.parse import quote, urlsplit

from identityctl.errors import InvalidField
from identityctl.federation import (
    GITHUB,
    GOOGLE,
    KINDS,
    MICROSOFT,
    OIDC,
    PRESETS,
    FederationError,
    UpstreamIdentity,
    identity_from_claims,
    identity_from_github,
    mapped_attributes,
    verify_id_token,
)
from identityctl.security.email_address import EMAIL, address_or_none
from identityctl.services import audit
from identityctl.services.accounts import upstream
from identityctl.services.context import ServiceContext
from identityctl.services.directory import users as directory_service
from identityctl.services.origin import RequestOrigin
from identityctl.store import db, directory
from identityctl.store import identity_providers as store
from identityctl.store import recovery as recovery_store
from identityctl.store.directory import UserRecord
from identityctl.store.identity_providers import ProviderRecord

CALLBACK_PATH = "/gate/federated"
#: What the page sends when the browser came back from the provider without an answer
#: (the back button): the sign-in goes back to its choices.
CANCELLED = "cancelled"
#: Microsoft's tenants that are not one directory: the issuer names the account's own.
MICROSOFT_SHARED_TENANTS = ("common", "organizations", "consumers")
_HANDLE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def callback_uri(ctx: ServiceContext) -> str:
    """The redirect URI to register at every provider."""
    return ctx.config.base_url + CALLBACK_PATH


# --- managing providers ---------------------------------------------------------------------------


def add_provider(ctx: ServiceContext, *, kind: str, client_id: str, client_secret: str,
                 handle: str = "", name: str = "", issuer: str = "", tenant: str = "",
                 scopes: list[str] | None = None, mapping: dict[str, str] | None = None,
                 api_url: str = "", web_url: str = "", discovery_url: str = "",
                 secret_ref: dict[str, str] | None = None, origin: RequestOrigin
                 ) -> ProviderRecord:
    """Register an upstream identity provider; an OpenID one's discovery is checked now.
    ``secret_ref``: where the secret came from (configuration as code writes it back)."""
    fields = _provider_fields(kind=kind, client_id=client_id, client_secret=client_secret,
                              handle=handle or kind, name=name, issuer=issuer, tenant=tenant,
                              scopes=scopes, mapping=mapping, api_url=api_url,
                              web_url=web_url, discovery_url=discovery_url,
                              secret_ref=secret_ref)
    with db.transaction():
        created = store.create_provider(**fields)
        audit.record("identity_provider.create", "success", origin=origin,
                     details={"handle": created.handle, "kind": kind})
    _forget_choices()
    return created


def update_provider(handle: str, *, origin: RequestOrigin, **arguments: Any) -> ProviderRecord:
    """Replace a provider's settings (``arguments``: :func:`add_provider`'s, but its kind and
    handle stay; linked accounts stay linked)."""
    current = store.require_provider(handle)
    fields = _provider_fields(**{**_ADD_DEFAULTS, **arguments}, kind=current.kind,
                              handle=current.handle)
    with db.transaction():
        updated = store.update_provider(current.id, **fields)
        audit.record("identity_provider.update", "success", origin=origin,
                     details={"handle": current.handle})
    _forget_choices()
    return updated


def provider_settings(provider: ProviderRecord) -> dict[str, Any]:
    """The arguments that made ``provider`` (:func:`add_provider`'s, secret aside), as a
    document: what configuration as code exports."""
    document: dict[str, Any] = {"handle": provider.handle, "name": provider.name,
                                "kind": provider.kind, "clientId": provider.client_id,
                                "scopes": provider.scopes, "mapping": provider.mapping}
    settings = provider.settings
    if provider.kind == OIDC:
        document["issuer"] = provider.issuer
    elif provider.kind == MICROSOFT:
        document["tenant"] = urlsplit(provider.issuer).path.strip("/").split("/")[0]
    elif provider.kind == GITHUB:
        document["webUrl"] = settings["authorizationEndpoint"].removesuffix(
            "/login/oauth/authorize")
        document["apiUrl"] = settings["api"]
    if settings.get("discoveryUrl"):
        document["discoveryUrl"] = settings["discoveryUrl"]
    return document


_ADD_DEFAULTS: dict[str, Any] = {"name": "", "issuer": "", "tenant": "", "scopes": None,
                                 "mapping": None, "api_url": "", "web_url": "",
                                 "discovery_url": "", "secret_ref": None}


def _provider_fields(*, kind: str, client_id: str, client_secret: str, handle: str, name: str,
                     issuer: str, tenant: str, scopes: list[str] | None,
                     mapping: dict[str, str] | None, api_url: str, web_url: str,
                     discovery_url: str, secret_ref: dict[str, str] | None) -> dict[str, Any]:
    """A provider's columns from what an admin gives; an OpenID one's discovery is checked."""
    if kind not in KINDS:
        raise InvalidField("kind", f"must be one of {', '.join(KINDS)}")
    preset = PRESETS[kind]
    if not _HANDLE.match(handle):
        raise InvalidField("handle", "must be 1-64 of a-z 0-9 - _")
    if not client_id or not client_secret:
        raise InvalidField("clientSecret" if client_id else "clientId", "is required")
    settings: dict[str, Any] = {}
    if kind == MICROSOFT:
        tenant = tenant or "organizations"
        issuer = preset["issuer"].format(tenant=tenant)
        settings["tenantIssuer"] = tenant in MICROSOFT_SHARED_TENANTS
    elif kind == GOOGLE:
        issuer = preset["issuer"]
    elif kind == GITHUB:
        web = (web_url or "https://github.com").rstrip("/")
        settings.update(authorizationEndpoint=f"{web}/login/oauth/authorize",
                        tokenEndpoint=f"{web}/login/oauth/access_token",
                        api=(api_url or preset["api"]).rstrip("/"))
    elif not issuer:
        raise InvalidField("issuer", "is required for an OpenID provider")
    issuer = issuer.rstrip("/")
    if discovery_url:  # metadata published somewhere else than under the issuer
        settings["discoveryUrl"] = discovery_url
    if secret_ref:
        settings["clientSecretRef"] = secret_ref
    if kind == OIDC:
        _discovery(issuer, tenant_issuer=False, url=discovery_url)  # reachable, that issuer
    return {"handle": handle, "name": name or preset.get("name") or handle, "kind": kind,
            "issuer": issuer, "client_id": client_id, "client_secret": client_secret,
            "scopes": list(scopes or preset["scopes"]), "mapping": dict(mapping or {}),
            "settings": settings}


def list_providers() -> list[ProviderRecord]:
    return store.list_providers()


def require_provider(id_or_handle: str) -> ProviderRecord:
    return store.require_provider(id_or_handle)


def remove_provider(provider_id: str, *, origin: RequestOrigin) -> None:
    """Remove a provider; the accounts linked through it are unlinked (users stay)."""
    provider = store.require_provider(provider_id)
    with db.transaction():
        store.delete_provider(provider.id)
        audit.record("identity_provider.delete", "success", origin=origin,
                     details={"handle": provider.handle})
    _forget_choices()


#: PERF: every sign-in page of the default flow lists the providers; they change rarely, so
#: each process reads them at most once per CHOICES_SECONDS (another instance's change shows
#: within that; this instance's at once). A cache, not state: any instance rebuilds it.
CHOICES_SECONDS = 5.0
#: The store (its database object, weakly: a store dropped takes its entry) -> (when read,
#: the JSON).
_choices: weakref.WeakKeyDictionary[Any, tuple[float, str]] = weakref.WeakKeyDictionary()


def provider_choices_json() -> str:
    """What a sign-in page shows: one "Continue with …" per provider (JSON)."""
    cached, moment = _choices.get(db.database.obj), time.monotonic()
    if cached is not None and moment - cached[0] < CHOICES_SECONDS:
        return cached[1]
    listed = json.dumps([{"id": provider.id, "name": provider.name, "kind": provider.kind}
                         for provider in store.list_providers()])
    _choices[db.database.obj] = (moment, listed)
    return listed


def _forget_choices() -> None:
    _choices.pop(db.database.obj, None)


# --- the upstream conversation ------------------------------------------------------------------


def _discovery(issuer: str, *, tenant_issuer: bool, url: str = "") -> dict[str, Any]:
    document = upstream.cached_json(url or f"{issuer}/.well-known/openid-configuration")
    if not isinstance(document, dict) or (not tenant_issuer and \
            str(document.get("issuer", "")).rstrip("/") != issuer):
        raise FederationError(f"The discovery document of {issuer} names another issuer.",
                              code="federation_failed")
    return document


def authorization_endpoint(provider: ProviderRecord) -> str:
    if provider.kind == GITHUB:
        return provider.settings["authorizationEndpoint"]
    return _provider_discovery(provider)["authorization_endpoint"]


def _provider_discovery(provider: ProviderRecord) -> dict[str, Any]:
    return _discovery(provider.issuer, tenant_issuer=bool(provider.settings.get("tenantIssuer")),
                      url=provider.settings.get("discoveryUrl", ""))


def _basic(provider: ProviderRecord) -> str:
    """RFC 6749 §2.3.1: both parts form-encoded, then Base64."""
    pair = f"{quote(provider.client_id, safe='')}:{quote(provider.client_secret, safe='')}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


def _redeem(ctx: ServiceContext, provider: ProviderRecord, token_endpoint: str, code: str,
            verifier: str, *, basic: bool) -> dict[str, Any]:
    fields = {"grant_type": "authorization_code", "code": code,
              "redirect_uri": callback_uri(ctx), "code_verifier": verifier}
    if basic:
        headers = {"Authorization": _basic(provider)}
    else:
        headers = {}
        fields.update(client_id=provider.client_id, client_secret=provider.client_secret)
    answer = upstream.request_json("POST", token_endpoint, fields=fields, headers=headers)
    if not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str):
        raise FederationError("The identity provider did not give an access token.",
                              code="federation_failed")
    return answer


def _openid_identity(ctx: ServiceContext, provider: ProviderRecord, code: str,
                     pending: dict[str, Any]) -> UpstreamIdentity:
    tenant_issuer = bool(provider.settings.get("tenantIssuer"))
    discovery = _provider_discovery(provider)
    methods = discovery.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    tokens = _redeem(ctx, provider, discovery["token_endpoint"], code, pending["verifier"],
                     basic="client_secret_basic" in methods)
    if not isinstance(tokens.get("id_token"), str):
        raise FederationError("The identity provider sent no ID token.",
                              code="federation_token_invalid")
    check = partial(verify_id_token, tokens["id_token"],
                    issuer=discovery["issuer"] if tenant_issuer else provider.issuer,
                    client_id=provider.client_id, nonce=pending["nonce"],
                    tenant_issuer=tenant_issuer)
    try:
        claims = check(jwks=upstream.cached_json(discovery["jwks_uri"]))
    except FederationError:  # perhaps a key newer than our copy of the JWKS
        claims = check(jwks=upstream.cached_json(discovery["jwks_uri"], refresh=True))
    if discovery.get("userinfo_endpoint"):
        info = upstream.request_json("GET", discovery["userinfo_endpoint"], headers={
            "Authorization": f"Bearer {tokens['access_token']}"})
        if isinstance(info, dict) and info.get("sub") == claims["sub"]:  # OIDC Core §5.3.2
            claims = {**info, **claims}
    return identity_from_claims(claims)


def upstream_identity(ctx: ServiceContext, provider: ProviderRecord, code: str,
                      pending: dict[str, Any]) -> UpstreamIdentity:
    """The upstream account behind ``code`` (redeemed with the ``pending`` sign-in's PKCE
    verifier and nonce), checked as its provider's kind requires."""
    identity = _github_identity if provider.kind == GITHUB else _openid_identity
    return identity(ctx, provider, code, pending)


def _github_identity(ctx: ServiceContext, provider: ProviderRecord, code: str,
                     pending: dict[str, Any]) -> UpstreamIdentity:
    tokens = _redeem(ctx, provider, provider.settings["tokenEndpoint"], code,
                     pending["verifier"], basic=False)
    api, bearer = provider.settings["api"], {"Authorization": f"Bearer {tokens['access_token']}",
                                             "X-GitHub-Api-Version": "2022-11-28"}
    user = upstream.request_json("GET", f"{api}/user", headers=bearer)
    emails = upstream.request_json("GET", f"{api}/user/emails", headers=bearer)
    return identity_from_github(user if isinstance(user, dict) else {},
                                emails if isinstance(emails, list) else [])


# --- the accounts it makes and links -----------------------------------------------------


def someone_proved(address: str) -> bool:
    """Whether an account proved ``address``: only a proven address is anyone's (a copy
    nobody proved blocks nobody, and nobody learns it is there). A value that is not one
    e-mail address by our rule is nobody's."""
    proper = address_or_none(address)
    return proper is not None and recovery_store.user_with_verified_address(proper) is not None


def new_linked_user(*, application: dict[str, Any], provider: ProviderRecord,
                    identity: UpstreamIdentity, origin: RequestOrigin) -> UserRecord:
    """(In the caller's transaction.) A user made from the upstream account, linked."""
    kind = directory_service.self_registration_type(application)
    if not kind["allowSelfRegistration"]:
        raise FederationError("New accounts cannot be made here; ask an administrator.",
                              code="self_registration_disabled")
    mapping = provider.mapping or {"given_name": "given_name", "family_name": "family_name"}
    attributes = {name: value for name, value in mapped_attributes(identity, mapping).items()
                  if name in kind["schema"]}
    # An upstream value that is not one e-mail address by our rule is not used as one.
    if EMAIL in attributes and address_or_none(attributes[EMAIL]) is None:
        del attributes[EMAIL]
    provisioning = origin.acting_as(f"federation:{provider.handle}")
    user = directory_service.create_user(
        username=_free_username(identity.suggested_username(), provider, identity),
        attributes=attributes, user_type=kind["name"], origin=provisioning)
    store.link(provider.id, identity.subject, user.id)
    verified = address_or_none(identity.email)
    if verified:  # the provider verified it
        directory_service.address_proven(user.id, verified, origin=provisioning,
                                         how="provider")
    return user


def _free_username(wanted: str, provider: ProviderRecord, identity: UpstreamIdentity) -> str:
    base = re.sub(r"[^A-Za-z0-9._@+-]", "", wanted)[:100].lstrip("._@+-") or \
        f"{provider.handle}-{identity.subject[:12]}"
    candidate = base
    while directory.find_user_by_username(candidate) is not None:
        candidate = f"{base}-{secrets.token_hex(2)}"
    return candidate
