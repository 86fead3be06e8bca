"""The authorization code grant at the token endpoint: RFC 6749 §4.1.3, with PKCE (RFC 7636
§4.6) and the replay rule of RFC 9700 §4.4.1."""

from __future__ import annotations

from typing import Protocol, TypeVar

from identityctl.oauth import pkce
from identityctl.oauth.client import Client
from identityctl.oauth.errors import InvalidGrant

GRANT_TYPE = "authorization_code"


class IssuedCode(Protocol):
    """What the grant reads of a stored authorization code."""

    application_id: str
    consumed_at: float | None
    expires_at: float
    redirect_uri: str
    code_challenge: str | None


Code = TypeVar("Code", bound=IssuedCode)


class CodeReplayed(InvalidGrant):
    """The code was redeemed before: whoever holds it now may have stolen it. The caller
    revokes what the first redemption issued, then lets this refusal through."""

    def __init__(self) -> None:
        super().__init__("The code was already used; the tokens it issued are now revoked.",
                         code="code_reused")


def validate_code_redemption(code: Code | None, *, client: Client,
                             redirect_uri: str | None, code_verifier: str | None,
                             now: float) -> Code:
    """The code, when ``client`` may redeem it with these parameters; else :class:`CodeReplayed`
    (before any other check, whichever client presents it) or InvalidGrant saying why."""
    if code is not None and code.consumed_at is not None:
        raise CodeReplayed
    if code is None or code.application_id != client.application_id:
        raise InvalidGrant("The code is unknown or was issued to another client.",
                           code="invalid_code")
    if code.expires_at <= now:
        raise InvalidGrant("The code has expired; authorize again.", code="code_expired")
    if redirect_uri != code.redirect_uri:
        raise InvalidGrant("redirect_uri must equal the one of the authorization request.",
                           code="redirect_uri_mismatch")
    pkce.verify_code_verifier(code_verifier=code_verifier,
                              expected_challenge=code.code_challenge)
    return code
