"""An application seen as an OAuth client: the settings the protocol checks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from identityctl.oauth.errors import UnauthorizedClient


@dataclass(slots=True)
class Client:
    application_id: str
    client_id: str
    redirect_uris: tuple[str, ...]
    grant_types: tuple[str, ...]
    auth_method: str
    pkce_required: bool
    public: bool
    scopes: tuple[str, ...]
    #: Per-client token lifetimes in seconds: {"accessTokenTtl", "idTokenTtl", "refreshTokenTtl"}.
    token_settings: dict[str, Any]
    #: Registered through RFC 7591 or described by a client metadata document: a third
    #: party, whose requests the person approves (oauth/consent.py).
    described_itself: bool = False
    #: RFC 9126 §6: its authorization requests must be pushed first.
    par_required: bool = False
    #: RFC 9449 §5.2 (dpop_bound_access_tokens): its token requests must carry a DPoP proof.
    dpop_required: bool = False
    #: RFC 8693: what it may exchange ({"targets", "subjectAudiences"}), grants/token_exchange.
    token_exchange: dict[str, Any] = field(default_factory=dict)
    #: The application's ``allowedUserTypes`` (names or ids; empty: every type).
    allowed_user_types: tuple[str, ...] = ()
    #: The application's ``passkeysOnly``: no password sign-in answers for it.
    passkeys_only: bool = False

    @classmethod
    def from_config(cls, application_id: str, config: dict[str, Any], *,
                    allowed_user_types: Sequence[str] = (),
                    passkeys_only: bool = False) -> Client:
        """The client described by an application's oauth2 configuration (camelCase keys),
        the user types the application allows and its "passkeys only" rule."""
        return cls(application_id=application_id, client_id=config.get("clientId", ""),
                   allowed_user_types=tuple(allowed_user_types),
                   passkeys_only=bool(passkeys_only),
                   redirect_uris=tuple(config.get("redirectUris") or ()),
                   grant_types=tuple(config.get("grantTypes") or ()),
                   auth_method=config.get("tokenEndpointAuthMethod") or "client_secret_basic",
                   pkce_required=bool(config.get("pkceRequired", True)),
                   public=bool(config.get("publicClient", False)),
                   scopes=tuple(config.get("scopes") or ()),
                   token_settings=dict(config.get("token") or {}),
                   described_itself=bool(config.get("selfRegistered")
                                         or config.get("clientDocument")),
                   par_required=bool(config.get("requirePushedAuthorizationRequests")),
                   dpop_required=bool(config.get("dpopBoundAccessTokens")),
                   token_exchange=dict(config.get("tokenExchange") or {}))

    def require_grant(self, grant_type: str) -> None:
        if grant_type not in self.grant_types:
            raise UnauthorizedClient(f"This client may not use the {grant_type} grant "
                                     f"(its grants: {', '.join(self.grant_types) or 'none'}).",
                                     code="grant_not_allowed")

    def ttl(self, setting: str, default: int) -> int:
        """A token lifetime from the client's ``token`` settings, else the deployment's."""
        value = self.token_settings.get(setting)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
            else default
