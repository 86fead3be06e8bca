"""The keys each kind of document may hold, at every depth, and the one check that walks a
document against them.

A document an admin or an assistant writes (an application, a flow, a theme, a configuration
document for ``identityctl apply``) is read by services that take the keys they know and
ignore the rest; a misspelt key (``isRegistrationFlowEnable``) would be dropped without a
word, and the real key fall back to its default. So every entry point walks the document
against its shape first (:func:`check`): a key its kind does not know is refused, naming its
path and the known key it is nearest to. The values themselves are the validators' business
(services/catalog/applications.py, flow/definition.py, theme/stylesheet.py): a shape says
only which keys exist.

A shape is a mapping of the known keys to the shape of their values: another mapping, a list
of objects (:class:`Each`), or ``None`` for a value whose keys are free (names an admin
chooses: colour names, attributes, executor properties).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from identityctl.config import did_you_mean
from identityctl.errors import InvalidField
from identityctl.theme import branding, css_values


@dataclass(frozen=True, slots=True)
class Each:
    """A list whose items are objects of ``item``'s shape."""

    item: Shape


Shape: TypeAlias = Mapping[str, "Shape | Each | None"]

#: What the service adds to a record it stores: shown by `show --json`, ignored on input,
#: so a record read, edited and sent back passes.
_STORED = {"id": None, "createdAt": None, "updatedAt": None}

# --- applications ---------------------------------------------------------------------------

TOKEN_SETTINGS: Shape = {"accessTokenTtl": None, "idTokenTtl": None, "refreshTokenTtl": None}
OAUTH_CONFIG: Shape = {
    "clientId": None, "redirectUris": None, "grantTypes": None, "responseTypes": None,
    "tokenEndpointAuthMethod": None, "pkceRequired": None, "publicClient": None,
    "scopes": None, "token": TOKEN_SETTINGS, "backchannelLogoutUri": None,
    "requirePushedAuthorizationRequests": None, "dpopBoundAccessTokens": None,
    "tokenExchange": {"targets": None, "subjectAudiences": None},
    "jwks": None, "jwksUri": None, "tokenEndpointAuthSigningAlg": None,
    # What the service records of a client that described itself (services/catalog/applications.py's
    # ``marks``): shown, dropped when an admin's document replaces the settings.
    "selfRegistered": None, "clientDocument": None, "documentExpiresAt": None,
    "logoUri": None, "secretRef": None,
}
APPLICATION: Shape = {
    **_STORED, "name": None, "description": None, "template": None, "themeId": None,
    "ouId": None, "authFlowId": None, "registrationFlowId": None,
    "isRegistrationFlowEnabled": None, "passkeyUpgrade": None, "allowedUserTypes": None,
    "passkeysOnly": None,
    "inboundAuthConfig": Each({"type": None, "config": OAUTH_CONFIG}),
}

# --- flows (docs/flows.md) ------------------------------------------------------------------

FLOW_NODE: Shape = {
    "id": None, "type": None, "onSuccess": None, "onIncomplete": None, "onFailure": None,
    "executor": {"name": None, "mode": None, "properties": None},
    "prompts": Each({"inputs": Each({"ref": None, "identifier": None, "type": None,
                                     "required": None, "label": None}),
                     "action": {"ref": None, "nextNode": None, "label": None}}),
    "meta": None,
}
FLOW: Shape = {**_STORED, "handle": None, "name": None, "flowType": None,
               "nodes": Each(FLOW_NODE)}

# --- themes (theme/stylesheet.py: its SECTIONS) --------------------------------------------

THEME_DOCUMENT: Shape = {
    "colorSchemes": None,  # scheme name -> colour name -> colour: names the admin chooses
    "typography": dict.fromkeys(css_values.TYPOGRAPHY),
    "branding": dict.fromkeys(branding.KEYS),
}
THEME: Shape = {**_STORED, "handle": None, "displayName": None, "description": None,
                "theme": THEME_DOCUMENT}

# --- configuration as code (services/admin/configuration.py) --------------------------------------

#: An entry of each section of a configuration document.
CONFIGURATION: dict[str, Shape] = {
    "themes": THEME,
    "flows": FLOW,
    "organizationUnits": {"handle": None, "name": None, "description": None, "parent": None,
                          "passkeysOnly": None},
    "userTypes": {"name": None, "ou": None, "allowSelfRegistration": None, "schema": None},
    "roles": {"name": None, "description": None, "scopes": None},
    "resourceServers": {"identifier": None, "name": None, "scopes": None},
    "identityProviders": {"handle": None, "name": None, "kind": None, "clientId": None,
                          "clientSecret": None, "scopes": None, "mapping": None,
                          "issuer": None, "tenant": None, "webUrl": None, "apiUrl": None,
                          "discoveryUrl": None},
    "applications": {**APPLICATION, "clientSecret": None},
}


def unknown_keys(value: Any, shape: Shape | Each | None,
                 path: str = "") -> list[tuple[str, str]]:
    """Every key of ``value`` its shape does not know: (its path, what to write instead);
    a value of another type than its shape's is left to the validators."""
    if shape is None:
        return []
    if isinstance(shape, Each):
        if not isinstance(value, list):
            return []
        return [problem for index, item in enumerate(value)
                for problem in unknown_keys(item, shape.item, f"{path}[{index}]")]
    if not isinstance(value, dict):
        return []
    found: list[tuple[str, str]] = []
    for key, inner in value.items():
        where = f"{path}.{key}" if path else str(key)
        if key in shape:
            found += unknown_keys(inner, shape[key], where)
        else:
            found.append((where, did_you_mean(str(key), shape)
                          or f"the keys here are {', '.join(shape)}"))
    return found


def refuse(problems: list[tuple[str, str]]) -> None:
    """One error naming every unknown key (so all are fixed at once), if there is any."""
    if problems:
        (path, hint), *others = problems
        also = "; ".join(f"{where} ({instead})" for where, instead in others)
        raise InvalidField(path, f"unknown key ({hint})"
                           + (f"; also unknown: {also}" if others else ""), code="unknown_key")


def check(document: Any, shape: Shape, *, where: str = "") -> None:
    """Refuse ``document`` if it holds a key ``shape`` does not know, at any depth."""
    refuse(unknown_keys(document, shape, where))
