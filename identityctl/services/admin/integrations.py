"""What the admin API's integrations need besides the services the CLI and the MCP tools call
(directory/roles, accounts/federation, clients/resource_servers, delivery/webhooks): a role's
member count and an identity provider's settings changed in part. Every change (a removal
too, which the resources ask of those services directly) is audited by them with the
admin's actor.
"""

from __future__ import annotations

from typing import Any

from identityctl.errors import InvalidField
from identityctl.services import shapes
from identityctl.services.accounts import federation
from identityctl.services.admin.console import AdminHolder
from identityctl.services.context import ServiceContext
from identityctl.services.directory import roles as roles_service
from identityctl.store import roles as roles_store
from identityctl.store.identity_providers import ProviderRecord

#: What a body may hold: a role's, a resource server's and a provider's fields are those of
#: their sections of a configuration document; a provider keeps its handle and kind.
ROLE = shapes.CONFIGURATION["roles"]
RESOURCE_SERVER = shapes.CONFIGURATION["resourceServers"]
PROVIDER = shapes.CONFIGURATION["identityProviders"]
PROVIDER_CHANGES: shapes.Shape = {key: None for key in PROVIDER if key not in ("handle", "kind")}
WEBHOOK: shapes.Shape = {"url": None, "events": None, "description": None}

#: A provider's settings as the API names them -> federation.add_provider's arguments.
_PROVIDER_ARGUMENTS = {"name": "name", "clientId": "client_id", "clientSecret": "client_secret",
                       "issuer": "issuer", "tenant": "tenant", "webUrl": "web_url",
                       "apiUrl": "api_url", "discoveryUrl": "discovery_url",
                       "scopes": "scopes", "mapping": "mapping"}


def roles() -> list[dict[str, Any]]:
    """The roles by name, each with how many people hold it (``members``)."""
    return [{**role.to_api(), "members": roles_store.holders(role.id)}
            for role in roles_service.list_roles()]


# --- identity providers ---------------------------------------------------------------------


def provider_item(ctx: ServiceContext, provider: ProviderRecord) -> dict[str, Any]:
    """A provider as the API shows it (never its secret), with the redirect URI to register
    there (``callbackUri``)."""
    return {**provider.to_api(), "callbackUri": federation.callback_uri(ctx)}


def add_provider(ctx: ServiceContext, holder: AdminHolder,
                 body: dict[str, Any]) -> ProviderRecord:
    """A new upstream provider from the body (:data:`PROVIDER`'s fields; ``kind``,
    ``clientId`` and ``clientSecret`` required, the secret never shown again)."""
    shapes.check(body, PROVIDER)
    given = _arguments(body)
    return federation.add_provider(
        ctx, kind=_text(body, "kind"), handle=_text(body, "handle", required=False),
        **{"client_id": "", "client_secret": "", **given}, origin=holder.origin)


def update_provider(holder: AdminHolder, provider_id: str,
                    body: dict[str, Any]) -> ProviderRecord:
    """Change some of a provider's settings; what the body leaves out stays, its secret too
    unless ``clientSecret`` gives a new one."""
    shapes.check(body, PROVIDER_CHANGES)
    current = federation.require_provider(provider_id)
    kept = _arguments(federation.provider_settings(current))
    # A secret that came from configuration as code keeps its reference until replaced.
    reference = None if "clientSecret" in body else current.settings.get("clientSecretRef")
    return federation.update_provider(
        current.handle, **{**kept, "client_secret": current.client_secret,
                           "secret_ref": reference, **_arguments(body)}, origin=holder.origin)


def _arguments(settings: dict[str, Any]) -> dict[str, Any]:
    """add_provider's arguments from settings as the API names them, each checked for its
    type (``scopes``: names; ``mapping``: attribute -> claim; the others text)."""
    arguments: dict[str, Any] = {}
    for key, argument in _PROVIDER_ARGUMENTS.items():
        if key not in settings:
            continue
        value = settings[key]
        if key == "scopes":
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise InvalidField(key, "must be a list of scope names")
        elif key == "mapping":
            if not isinstance(value, dict) or not all(isinstance(claim, str)
                                                      for claim in value.values()):
                raise InvalidField(key, "must map attribute names to claim names")
        elif not isinstance(value, str):
            raise InvalidField(key, "must be text")
        arguments[argument] = value
    return arguments


def _text(body: dict[str, Any], key: str, *, required: bool = True) -> str:
    value = body.get(key, None if required else "")
    if not isinstance(value, str) or (required and not value):
        raise InvalidField(key, "is required (text)" if required else "must be text")
    return value
