"""DPoP at our endpoints (RFC 9449): proofs checked against the request, their ``jti`` used
once on any instance (store/replay.py), and the server's nonces when
``oauth.dpop_nonces`` asks for them (stateless: an HMAC of the time period under a secret
of the deployment, so any instance checks any other's)."""

from __future__ import annotations

import time
from collections.abc import Callable

from identityctl.oauth.dpop import (
    NONCE_HEADER,
    InvalidDpopProof,
    Proof,
    UseDpopNonce,
    check_proof,
    make_nonce,
    nonce_is_current,
)
from identityctl.services.context import ServiceContext
from identityctl.store import keys as key_store
from identityctl.store import replay

NONCE_SECRET = "dpop-nonce"


def checked_proof(ctx: ServiceContext, proof: str | None, *, method: str, url: str,
                  access_token: str | None = None) -> Proof:
    """The request's proof, checked (``access_token``: the one it must name) and used up."""
    try:
        checked = check_proof(proof, method=method, url=url, now=time.time(),
                              access_token=access_token, nonce_is_good=_nonce_check(ctx))
    except UseDpopNonce as refusal:
        refusal.headers.update(nonce_headers(ctx))
        raise
    if not replay.first_use("dpop", checked.jkt, checked.jti, expires_at=checked.expires_at):
        raise InvalidDpopProof("This DPoP proof was used before (its jti); make a new proof "
                               "for each request.", code="dpop_proof_replayed")
    return checked


def nonce_headers(ctx: ServiceContext) -> dict[str, str]:
    """A fresh nonce for the client's next proof, when the deployment asks for nonces."""
    if not ctx.config.oauth.dpop_nonces:
        return {}
    return {NONCE_HEADER: make_nonce(key_store.service_secret(NONCE_SECRET), time.time())}


def _nonce_check(ctx: ServiceContext) -> Callable[[object], bool] | None:
    if not ctx.config.oauth.dpop_nonces:
        return None
    secret, now = key_store.service_secret(NONCE_SECRET), time.time()
    return lambda nonce: nonce_is_current(nonce, secret, now)
