"""panva's openid-client (npm, tests/node) as the OAuth client of the tests: each call runs one
step (tests/node/oauth_client.mjs) in Node and returns what the library returned, or
{"error": {...}} when it (or the server) refused. Keys are made here, as JWKs, so that a
client's signing key or a DPoP key lives across steps."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

NODE = shutil.which("node")
SCRIPT = Path(__file__).resolve().parent.parent / "node" / "oauth_client.mjs"
LIBRARY = SCRIPT.parent / "node_modules" / "openid-client"

needs_openid_client = pytest.mark.skipif(
    NODE is None or not LIBRARY.exists(),
    reason="node or openid-client is missing (scripts/test.sh installs tests/node)")


def ec_key() -> dict[str, Any]:
    """A new P-256 key as a private JWK (kid, alg ES256)."""
    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key))
    return {**jwk, "kid": uuid.uuid4().hex[:12], "alg": "ES256", "use": "sig"}


def rsa_key() -> dict[str, Any]:
    """A new 2048-bit RSA key as a private JWK (kid, alg RS256)."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key))
    return {**jwk, "kid": uuid.uuid4().hex[:12], "alg": "RS256", "use": "sig"}


def public(jwk: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in jwk.items()
            if name not in ("d", "p", "q", "dp", "dq", "qi")}


def signer(jwk: dict[str, Any]) -> Any:
    """The private key of a JWK, to sign with PyJWT."""
    return jwt.PyJWK(jwk).key


def step(issuer: str, client_id: str, step_name: str, *, auth: dict[str, Any] | None = None,
         dpop: dict[str, Any] | None = None, timeout: float = 120, **fields: Any
         ) -> dict[str, Any]:
    """One step of the client (see oauth_client.mjs for the steps and their fields)."""
    command = {"issuer": issuer, "clientId": client_id, "step": step_name,
               "auth": auth or {"method": "none"}, "dpop": dpop, **fields}
    done = subprocess.run([NODE or "node", str(SCRIPT)], input=json.dumps(command),
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def dpop_proof(jwk: dict[str, Any], method: str, url: str, *, access_token: str | None = None,
               **overrides: Any) -> str:
    """A DPoP proof (RFC 9449 §4.2) by ``jwk``'s key, made here to try what a library would
    never send: ``overrides`` replace claims (None drops one) or, as ``header_*``, header
    members; ``signing_key`` signs with another key than the one the header shows."""
    import base64
    import hashlib
    import time

    claims: dict[str, Any] = {"jti": uuid.uuid4().hex, "htm": method, "htu": url,
                              "iat": int(time.time())}
    if access_token is not None:
        claims["ath"] = base64.urlsafe_b64encode(
            hashlib.sha256(access_token.encode()).digest()).rstrip(b"=").decode()
    header: dict[str, Any] = {"typ": "dpop+jwt", "jwk": public(jwk)}
    signing_key = overrides.pop("signing_key", None)
    algorithm = overrides.pop("algorithm", "ES256")
    for name, value in overrides.items():
        target, member = (header, name[len("header_"):]) if name.startswith("header_") \
            else (claims, name)
        if value is None:
            target.pop(member, None)
        else:
            target[member] = value
    header = {name: value for name, value in header.items() if name != "kid"}
    return jwt.encode(claims, signing_key if signing_key is not None else signer(jwk),
                      algorithm=algorithm, headers=header)
