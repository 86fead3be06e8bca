"""PKCE (RFC 7636) with S256 only, as RFC 9700 §2.1.1 recommends.

``plain`` is refused: it protects nothing once the authorization request leaks. A verifier
presented for a code that was issued without a challenge is refused too, so an attacker
cannot strip the challenge from the request and still look like a PKCE client (the
"PKCE downgrade" of RFC 9700 §4.8.2).
"""

from __future__ import annotations

import hashlib
import re

from identityctl.oauth.errors import InvalidGrant, InvalidRequest
from identityctl.security.secrets import b64url_encode, constant_time_equal

S256 = "S256"
METHODS = (S256,)
#: RFC 7636 §4.1: 43-128 characters of [A-Z] / [a-z] / [0-9] / "-" / "." / "_" / "~".
_VERIFIER = re.compile(r"^[A-Za-z0-9\-._~]{43,128}$")
#: An S256 challenge is the unpadded Base64URL of a SHA-256 digest: exactly 43 characters.
_S256_CHALLENGE = re.compile(r"^[A-Za-z0-9\-_]{43}$")


def s256_challenge(code_verifier: str) -> str:
    """BASE64URL(SHA256(ASCII(code_verifier))), RFC 7636 §4.2."""
    return b64url_encode(hashlib.sha256(code_verifier.encode("ascii")).digest())


def check_challenge(*, code_challenge: str | None, code_challenge_method: str | None,
                    required: bool) -> str | None:
    """The challenge of an authorization request, or None when there is none (and none needed).

    RFC 7636 §4.3 makes ``plain`` the default method when none is named; we do not offer
    ``plain``, so a challenge without ``code_challenge_method=S256`` is refused.
    """
    if not code_challenge:
        if code_challenge_method:
            raise InvalidRequest("code_challenge_method was sent without a code_challenge.",
                                 code="pkce_challenge_missing")
        if required:
            raise InvalidRequest("This client must use PKCE: send code_challenge and "
                                 "code_challenge_method=S256.", code="pkce_required")
        return None
    if code_challenge_method != S256:
        raise InvalidRequest(f"code_challenge_method must be S256, got "
                             f"{code_challenge_method or 'none (which means plain)'!r}.",
                             code="pkce_method_unsupported")
    if not _S256_CHALLENGE.match(code_challenge):
        raise InvalidRequest("code_challenge must be 43 characters of Base64URL "
                             "(the SHA-256 of the verifier).", code="pkce_challenge_malformed")
    return code_challenge


def verify_code_verifier(*, code_verifier: str | None, expected_challenge: str | None) -> None:
    """Check the token request's verifier against the challenge the code was issued for."""
    if expected_challenge is None:
        if code_verifier:
            raise InvalidGrant("A code_verifier was sent but the authorization request had no "
                               "code_challenge.", code="pkce_downgrade")
        return
    if not code_verifier:
        raise InvalidGrant("code_verifier is required: the authorization request used PKCE.",
                           code="pkce_verifier_missing")
    if not _VERIFIER.match(code_verifier):
        raise InvalidGrant("code_verifier must be 43-128 characters of A-Z a-z 0-9 - . _ ~.",
                           code="pkce_verifier_malformed")
    if not constant_time_equal(s256_challenge(code_verifier), expected_challenge):
        raise InvalidGrant("code_verifier does not match the code_challenge.",
                           code="pkce_mismatch")
