"""Claims of the tokens the service issues, and of userinfo.

- Access tokens follow the JWT profile of RFC 9068: iss, sub, aud, client_id, scope, exp,
  iat, jti (iss/iat/exp/jti are added by the token service), plus auth_time and amr when a
  user signed in.
- ID tokens follow OIDC Core §2: aud is the client, azp the client, nonce echoed, auth_time
  and amr from the sign-in, ``sid`` names the grant (what RP-initiated logout ends).
- Standard claims (OIDC Core §5.4) are released per scope, from the user's attributes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: OIDC Core §5.4: the claims each scope releases (only those we can fill are listed).
SCOPE_CLAIMS: dict[str, tuple[str, ...]] = {
    "profile": ("name", "given_name", "family_name", "middle_name", "nickname",
                "preferred_username", "profile", "picture", "website", "gender", "birthdate",
                "zoneinfo", "locale", "updated_at"),
    "email": ("email", "email_verified"),
    "phone": ("phone_number", "phone_number_verified"),
    "address": ("address",),
}
OPENID = "openid"


@dataclass(slots=True)
class SignIn:
    """Who signed in, when and how (from the sign-in assertion)."""

    subject: str
    auth_time: int
    amr: tuple[str, ...]


def access_token_claims(*, subject: str, client_id: str, scope: tuple[str, ...],
                        audience: list[str], jti: str, sign_in: SignIn | None = None,
                        grant_id: str | None = None, actor: dict[str, Any] | None = None,
                        key_thumbprint: str | None = None) -> dict[str, Any]:
    """RFC 9068 claims; ``sid`` names the grant the token belongs to (a user's sign-in at
    this client), so ending the grant ends every access token of it in one check; ``act``
    the party acting for the subject (RFC 8693 §4.1); ``cnf.jkt`` the key the token is
    bound to (DPoP, RFC 9449 §6)."""
    claims: dict[str, Any] = {"sub": subject, "client_id": client_id, "scope": " ".join(scope),
                              "aud": audience[0] if len(audience) == 1 else audience,
                              "jti": jti}
    if sign_in is not None:
        claims.update(auth_time=sign_in.auth_time, amr=list(sign_in.amr))
    if grant_id is not None:
        claims["sid"] = grant_id
    if actor is not None:
        claims["act"] = actor
    if key_thumbprint is not None:
        claims["cnf"] = {"jkt": key_thumbprint}
    return claims


def id_token_claims(*, sign_in: SignIn, client_id: str, nonce: str | None, session_id: str,
                    jti: str, user_claims: dict[str, Any]) -> dict[str, Any]:
    claims: dict[str, Any] = {**user_claims, "sub": sign_in.subject, "aud": client_id,
                              "azp": client_id, "auth_time": sign_in.auth_time,
                              "amr": list(sign_in.amr), "sid": session_id, "jti": jti}
    if nonce is not None:
        claims["nonce"] = nonce
    return claims


def user_claims(*, subject: str, username: str, attributes: dict[str, Any], updated_at: float,
                scope: tuple[str, ...]) -> dict[str, Any]:
    """``sub`` and the standard claims the granted ``scope`` releases."""
    available: dict[str, Any] = {
        key: value for key, value in attributes.items()
        if any(key in names for names in SCOPE_CLAIMS.values()) and value not in (None, "")}
    available["preferred_username"] = username
    available["updated_at"] = int(updated_at)
    if "name" not in available:
        full_name = " ".join(str(attributes[part]) for part in ("given_name", "family_name")
                             if attributes.get(part))
        if full_name:
            available["name"] = full_name
    released = {"sub": subject}
    for scope_name in scope:
        for claim in SCOPE_CLAIMS.get(scope_name, ()):
            if claim in available:
                released[claim] = available[claim]
    return released


#: OpenID Connect Back-Channel Logout 1.0 §2.4: the event a logout token carries.
BACKCHANNEL_LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"


def logout_token_claims(*, client_id: str, subject: str, session_id: str,
                        jti: str) -> dict[str, Any]:
    """A logout token's claims (iss, iat and exp are added when it is signed): no nonce,
    the client as audience, the person and the session (``sid``) the client knows."""
    return {"aud": client_id, "sub": subject, "sid": session_id, "jti": jti,
            "events": {BACKCHANNEL_LOGOUT_EVENT: {}}}
