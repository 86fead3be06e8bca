"""Signing key generation (cryptography) and their public JWKs (PyJWT's algorithms)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm


@dataclass(frozen=True, slots=True)
class GeneratedKey:
    kid: str
    algorithm: str
    private_pem: str
    public_jwk: dict[str, Any]


def generate_signing_key(algorithm: str) -> GeneratedKey:
    """A fresh private key for ``algorithm`` (ES256, RS256 or EdDSA) with its public JWK."""
    if algorithm == "ES256":
        private_key = ec.generate_private_key(ec.SECP256R1())
        jwk = json.loads(ECAlgorithm.to_jwk(private_key.public_key()))
    elif algorithm == "RS256":
        private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(RSAAlgorithm.to_jwk(private_key.public_key()))
    elif algorithm == "EdDSA":
        private_key = ed25519.Ed25519PrivateKey.generate()
        jwk = json.loads(OKPAlgorithm.to_jwk(private_key.public_key()))
    else:
        raise ValueError(f"unsupported signing algorithm {algorithm!r}")
    # RFC 7638 thumbprint of the required members: stable, derived from the key itself.
    required = {k: jwk[k] for k in sorted(jwk) if k in ("crv", "e", "kty", "n", "x", "y")}
    kid = hashlib.sha256(json.dumps(required, separators=(",", ":")).encode()).hexdigest()[:16]
    jwk.update({"kid": kid, "alg": algorithm, "use": "sig"})
    pem = private_key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
    return GeneratedKey(kid=kid, algorithm=algorithm, private_pem=pem, public_jwk=jwk)
