"""The one check of an access token a request presents as its credential (userinfo, /mcp,
the account API, passkey enrolment by an admin, client registration): signature, issuer,
audience, expiry and revocation (``SignedTokens.verify_access_token``), then its binding to
a key (DPoP, RFC 9449 §7): a bound token only with the DPoP scheme and a fresh proof by that
key naming it, an unbound one only as a Bearer token.

(Tokens that are a request's parameters, not its credential, are checked where they are
read: introspection, revocation, token exchange.)
"""

from __future__ import annotations

from typing import Any

from identityctl.oauth.dpop import (
    InvalidDpopProof,
    PresentedToken,
    UseDpopNonce,
    check_binding,
)
from identityctl.security.jwks import ASYMMETRIC_ALGORITHMS
from identityctl.services.clients import dpop
from identityctl.services.context import ServiceContext

#: RFC 9449 §7.1: the DPoP challenge names the algorithms a proof may use.
_ALGORITHMS = " ".join(ASYMMETRIC_ALGORITHMS)


def scheme_of(presented: PresentedToken | None) -> str:
    """The scheme of a challenge to a request: DPoP when it presented its token so (RFC 9449
    §7.1), else Bearer (RFC 6750 §3)."""
    return "DPoP" if presented is not None and presented.dpop else "Bearer"


def verify_presented(ctx: ServiceContext, presented: PresentedToken, *,
                     audience: str | list[str] | None) -> dict[str, Any]:
    """The claims of the presented access token, when it is live and presented as its
    binding requires; else 401 (``invalid_token``, or ``invalid_dpop_proof`` /
    ``use_dpop_nonce`` with a DPoP challenge)."""
    claims = ctx.tokens.verify_access_token(presented.token, audience=audience)
    try:
        proof = dpop.checked_proof(ctx, presented.proof, method=presented.method,
                                   url=presented.url, access_token=presented.token) \
            if presented.dpop else None
        check_binding(claims, presented, proof)
    except (InvalidDpopProof, UseDpopNonce) as refusal:
        refusal.status = 401
        refusal.headers["WWW-Authenticate"] = dpop_challenge(refusal.error)
        raise
    return claims


def dpop_challenge(error: str, *extra: str) -> str:
    """A ``WWW-Authenticate: DPoP`` value naming the error and the proof algorithms."""
    return ", ".join([f'DPoP error="{error}"', *extra, f'algs="{_ALGORITHMS}"'])
