"""Dynamic Client Registration (RFC 7591): what a client may ask for when it registers
itself, and the loopback redirect rule of native apps (RFC 8252 §7.3).

A self-registered client gets no secret. It is public (``token_endpoint_auth_method``
``none``), or it proves itself with a key it registered (``private_key_jwt`` with ``jwks`` or
``jwks_uri``, RFC 7523). It uses the authorization code grant with PKCE (and refresh tokens),
and is sent back to an ``https`` redirect URI or to a loopback one on the person's own
machine. It may ask for DPoP-bound tokens (``dpop_bound_access_tokens``, RFC 9449 §5.2) and
for its requests to be pushed (``require_pushed_authorization_requests``, RFC 9126 §6).
Scopes are those the deployment lets self-registered clients ask for; what a person may grant
is decided when they sign in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from identityctl.errors import InvalidField
from identityctl.oauth.client_assertion import check_client_keys
from identityctl.oauth.client_auth import NONE, PRIVATE_KEY_JWT
from identityctl.oauth.errors import InvalidClientMetadata, InvalidRedirectUri
from identityctl.oauth.grants import authorization_code, refresh_token
from identityctl.oauth.parameters import MAX_URI_LENGTH, parse_scope

#: Hosts of a loopback redirect URI (RFC 8252 §7.3 names the IP literals; ``localhost`` is
#: what the MCP SDKs and most native apps use, so it is matched the same way).
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
MAX_REDIRECT_URIS = 10
MAX_NAME_LENGTH = 100
#: What a client may register itself for: a person signs in to it (identityctl.oauth.grants
#: offers more, to clients an administrator makes).
REGISTRABLE_GRANT_TYPES = (authorization_code.GRANT_TYPE, refresh_token.GRANT_TYPE)
#: No secret is ever handed out: a client is public, or proves itself with its own key.
AUTH_METHODS = (NONE, PRIVATE_KEY_JWT)


@dataclass(frozen=True, slots=True)
class ClientMetadata:
    """What a registration asked for, checked."""

    client_name: str
    redirect_uris: tuple[str, ...]
    grant_types: tuple[str, ...]
    scope: tuple[str, ...]
    client_uri: str | None
    logo_uri: str | None
    token_endpoint_auth_method: str = NONE
    jwks: dict[str, Any] | None = None
    jwks_uri: str | None = None
    token_endpoint_auth_signing_alg: str | None = None
    dpop_bound_access_tokens: bool = False
    require_pushed_authorization_requests: bool = False

    def oauth_config(self, client_id: str) -> dict[str, Any]:
        """The application's OAuth settings (``inboundAuthConfig[0].config``)."""
        return {
            "clientId": client_id, "redirectUris": list(self.redirect_uris),
            "grantTypes": list(self.grant_types), "scopes": list(self.scope),
            "publicClient": self.token_endpoint_auth_method == NONE,
            "tokenEndpointAuthMethod": self.token_endpoint_auth_method,
            **({"jwks": self.jwks} if self.jwks else {}),
            **({"jwksUri": self.jwks_uri} if self.jwks_uri else {}),
            **({"tokenEndpointAuthSigningAlg": self.token_endpoint_auth_signing_alg}
               if self.token_endpoint_auth_signing_alg else {}),
            **({"dpopBoundAccessTokens": True} if self.dpop_bound_access_tokens else {}),
            **({"requirePushedAuthorizationRequests": True}
               if self.require_pushed_authorization_requests else {})}

    def registered(self) -> dict[str, Any]:
        """The metadata as registered, in RFC 7591's names (its §3.2.1 response)."""
        return {
            "client_name": self.client_name, "redirect_uris": list(self.redirect_uris),
            "grant_types": list(self.grant_types), "response_types": ["code"],
            "token_endpoint_auth_method": self.token_endpoint_auth_method,
            "scope": " ".join(self.scope),
            **({"client_uri": self.client_uri} if self.client_uri else {}),
            **({"logo_uri": self.logo_uri} if self.logo_uri else {}),
            **({"jwks": self.jwks} if self.jwks else {}),
            **({"jwks_uri": self.jwks_uri} if self.jwks_uri else {}),
            **({"token_endpoint_auth_signing_alg": self.token_endpoint_auth_signing_alg}
               if self.token_endpoint_auth_signing_alg else {}),
            **({"dpop_bound_access_tokens": True} if self.dpop_bound_access_tokens else {}),
            **({"require_pushed_authorization_requests": True}
               if self.require_pushed_authorization_requests else {})}


def is_loopback(uri: str) -> bool:
    """An ``http`` URI on the person's own machine (RFC 8252 §7.3)."""
    try:
        parts = urlsplit(uri)
        return parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS
    except ValueError:
        return False


def redirect_uri_matches(registered: str, presented: str) -> bool:
    """Exact match, except that a loopback URI matches on any port (RFC 8252 §7.3: a native
    app listens on whatever port the system gives it)."""
    if presented == registered:
        return True
    if not (is_loopback(registered) and is_loopback(presented)):
        return False
    mine, theirs = urlsplit(registered), urlsplit(presented)
    try:
        theirs.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return False
    return (mine.hostname, mine.path, mine.query) == (theirs.hostname, theirs.path,
                                                      theirs.query)


def exact_uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be a registered redirect URI (compared exactly, sent back in a
    Location header), or None: no fragment, no wildcard, no whitespace or control
    characters, at most MAX_URI_LENGTH characters."""
    if len(uri) > MAX_URI_LENGTH:
        return f"is longer than {MAX_URI_LENGTH} characters"
    if "#" in uri or "*" in uri:
        return "must be an exact URI without a fragment or wildcards"
    if any(char.isspace() or not char.isprintable() for char in uri):
        return "must not contain spaces or control characters"
    return None


def validate_client_metadata(document: Any, *, allowed_scopes: tuple[str, ...],
                             default_scopes: tuple[str, ...] | None = None) -> ClientMetadata:
    """The registration ``document`` checked against RFC 7591 and what self-registered
    clients may be; anything else is refused naming the field. A document naming no scope
    gets ``default_scopes`` (all allowed ones when not given)."""
    if not isinstance(document, dict):
        raise InvalidClientMetadata("The registration must be a JSON object.")
    method = document.get("token_endpoint_auth_method", NONE)
    if method not in AUTH_METHODS:
        raise InvalidClientMetadata(
            f"token_endpoint_auth_method {method!r} is not offered: a client that registers "
            "itself gets no secret; it is public ('none', proving itself with PKCE) or signs "
            "with a key it registers ('private_key_jwt' with jwks or jwks_uri).",
            code="confidential_registration_unsupported")
    keys = _client_keys(document, method)
    grant_types = _strings(document, "grant_types", default=[authorization_code.GRANT_TYPE])
    if authorization_code.GRANT_TYPE not in grant_types \
            or not set(grant_types) <= set(REGISTRABLE_GRANT_TYPES):
        raise InvalidClientMetadata(f"grant_types must be authorization_code, optionally with "
                                    f"refresh_token; got {grant_types}.")
    response_types = _strings(document, "response_types", default=["code"])
    if response_types != ["code"]:
        raise InvalidClientMetadata(f"response_types must be ['code']; got {response_types}.")
    redirect_uris = _strings(document, "redirect_uris", default=[])
    if not redirect_uris:
        raise InvalidRedirectUri("redirect_uris must name at least one redirect URI.")
    if len(redirect_uris) > MAX_REDIRECT_URIS:
        raise InvalidRedirectUri(f"At most {MAX_REDIRECT_URIS} redirect URIs.")
    for uri in redirect_uris:
        _check_redirect_uri(uri)
    name = document.get("client_name", "")
    if not isinstance(name, str) or len(name) > MAX_NAME_LENGTH:
        raise InvalidClientMetadata(f"client_name must be text of at most {MAX_NAME_LENGTH} "
                                    "characters.")
    name = "".join(char for char in name if char.isprintable()).strip()
    asked = document.get("scope")
    if asked is not None and not isinstance(asked, str):
        raise InvalidClientMetadata("scope must be a space-separated string.")
    scope = parse_scope(asked) or default_scopes or allowed_scopes
    refused = [item for item in scope if item not in allowed_scopes]
    if refused:
        raise InvalidClientMetadata(f"scope {' '.join(refused)!r} cannot be registered here "
                                    f"(allowed: {' '.join(allowed_scopes)}).",
                                    code="scope_not_allowed")
    return ClientMetadata(client_name=name or "Unnamed client",
                          redirect_uris=tuple(dict.fromkeys(redirect_uris)),
                          grant_types=tuple(dict.fromkeys(grant_types)), scope=scope,
                          client_uri=_https_uri(document, "client_uri"),
                          logo_uri=_https_uri(document, "logo_uri"),
                          token_endpoint_auth_method=method, **keys,
                          dpop_bound_access_tokens=_flag(document, "dpop_bound_access_tokens"),
                          require_pushed_authorization_requests=_flag(
                              document, "require_pushed_authorization_requests"))


def _client_keys(document: dict[str, Any], method: str) -> dict[str, Any]:
    """RFC 7591 §2: private_key_jwt names its keys in exactly one of ``jwks`` and
    ``jwks_uri`` (the rule every client's keys follow)."""
    try:
        keys = check_client_keys(
            uses_keys=method == PRIVATE_KEY_JWT, jwks=document.get("jwks"),
            jwks_uri=document.get("jwks_uri"),
            signing_alg=document.get("token_endpoint_auth_signing_alg"),
            fields=("jwks", "jwks_uri", "token_endpoint_auth_signing_alg"))
    except InvalidField as invalid:
        raise InvalidClientMetadata(invalid.description) from None
    return {"jwks": keys.jwks, "jwks_uri": keys.jwks_uri,
            "token_endpoint_auth_signing_alg": keys.signing_alg}


def _flag(document: dict[str, Any], name: str) -> bool:
    value = document.get(name, False)
    if not isinstance(value, bool):
        raise InvalidClientMetadata(f"{name} must be true or false.")
    return value


def _strings(document: dict[str, Any], name: str, *, default: list[str]) -> list[str]:
    value = document.get(name, default)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidClientMetadata(f"{name} must be a list of strings.")
    return value


def _check_redirect_uri(uri: str) -> None:
    problem = exact_uri_problem(uri)
    if problem:
        raise InvalidRedirectUri(f"Redirect URI {uri[:100]!r} {problem}.")
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise InvalidRedirectUri(f"Redirect URI {uri[:100]!r} is not a URI.") from None
    if parts.scheme == "https" and parts.hostname:
        return
    if is_loopback(uri):
        return
    raise InvalidRedirectUri(f"Redirect URI {uri[:100]!r} must use https, or http on a "
                             "loopback address (127.0.0.1, [::1], localhost) for an app on "
                             "the person's own machine.")


def _https_uri(document: dict[str, Any], name: str) -> str | None:
    value = document.get(name)
    if value is None:
        return None
    try:
        https = isinstance(value, str) and len(value) <= MAX_URI_LENGTH \
            and urlsplit(value).scheme == "https" and bool(urlsplit(value).hostname)
    except ValueError:
        https = False
    if not https:
        raise InvalidClientMetadata(f"{name} must be an https URL.")
    return value
