"""Software WebAuthn authenticator producing real signatures and CBOR in `toJSON()` shape.

Counter semantics: with ``counter="increment"`` registration reports 1 and every ``get``
reports the previous value plus 1; with ``counter="zero"`` every report is 0 (synced passkeys).
Tamper knobs only change what is put on the wire, never the stored credential state (except
``credential_id`` on ``create``, which is the id stored).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack
from urllib.parse import urlsplit

import cbor2
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

PrivateKey = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey

COSE_ALGS = {"ES256": -7, "EdDSA": -8, "RS256": -257}

_UP, _UV, _BE, _BS, _AT = 0x01, 0x04, 0x08, 0x10, 0x40


class _CommonTamper(TypedDict, total=False):
    type: str
    challenge: str
    cross_origin: bool
    top_origin: str
    rp_id: str
    up: bool
    uv: bool
    be: bool
    bs: bool
    sign_count: int
    bad_signature: bool


class CreateTamper(_CommonTamper, total=False):
    """Violations accepted by `SoftAuthenticator.create`."""

    credential_id: bytes


class GetTamper(_CommonTamper, total=False):
    """Violations accepted by `SoftAuthenticator.get`."""

    user_handle: bytes | None


@dataclass(frozen=True)
class AttestationCertificate:
    """A make's attestation key (P-256) and its chain (DER, leaf first, root left out)."""

    private_key: ec.EllipticCurvePrivateKey
    chain: tuple[bytes, ...]


def b64url(data: bytes) -> str:
    """Encode bytes as unpadded Base64URL."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(s: str) -> bytes:
    """Decode Base64URL with or without padding."""
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


@dataclass
class StoredCredential:
    """A credential held by the authenticator."""

    credential_id: bytes
    private_key: PrivateKey
    alg: str
    rp_id: str
    user_handle: bytes
    sign_count: int


def _generate_key(alg: str) -> PrivateKey:
    if alg == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    if alg == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _sign(key: PrivateKey, data: bytes) -> bytes:
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.sign(data, ec.ECDSA(hashes.SHA256()))
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(data)
    return key.sign(data, padding.PKCS1v15(), hashes.SHA256())


def _cose_key(key: PrivateKey) -> bytes:
    pub = key.public_key()
    if isinstance(pub, ec.EllipticCurvePublicKey):
        nums = pub.public_numbers()
        cose = {1: 2, 3: -7, -1: 1, -2: nums.x.to_bytes(32, "big"), -3: nums.y.to_bytes(32, "big")}
    elif isinstance(pub, ed25519.Ed25519PublicKey):
        raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        cose = {1: 1, 3: -8, -1: 6, -2: raw}
    else:
        nums = pub.public_numbers()
        n = nums.n.to_bytes((nums.n.bit_length() + 7) // 8, "big")
        e = nums.e.to_bytes((nums.e.bit_length() + 7) // 8, "big")
        cose = {1: 3, 3: -257, -1: n, -2: e}
    return cbor2.dumps(cose, canonical=True)


def _corrupt(sig: bytes) -> bytes:
    """Flip a bit in the last byte: still well-formed (e.g. DER), but wrong."""
    return sig[:-1] + bytes([sig[-1] ^ 0x01])


def _check_tamper(tamper: dict[str, Any], allowed: frozenset[str]) -> None:
    unknown = tamper.keys() - allowed
    if unknown:
        raise TypeError(f"unknown tamper knob(s): {sorted(unknown)}")


class SoftAuthenticator:
    """In-memory authenticator for end-to-end WebAuthn tests."""

    def __init__(
        self,
        *,
        alg: str = "ES256",
        attestation: str = "none",
        aaguid: bytes = bytes(16),
        counter: str = "increment",
        backup_eligible: bool = False,
        backup_state: bool = False,
        user_verified: bool = True,
        transports: Sequence[str] = ("internal",),
        attachment: str = "platform",
        attestation_certificate: AttestationCertificate | None = None,
    ) -> None:
        if alg not in COSE_ALGS:
            raise ValueError(f"unsupported alg {alg!r}")
        if attestation not in ("none", "packed"):
            raise ValueError(f"unsupported attestation {attestation!r}")
        if counter not in ("increment", "zero"):
            raise ValueError(f"unsupported counter mode {counter!r}")
        if len(aaguid) != 16:
            raise ValueError("aaguid must be 16 bytes")
        self.alg = alg
        self.attestation = attestation
        self.aaguid = aaguid
        self.counter = counter
        self.backup_eligible = backup_eligible
        self.backup_state = backup_state
        self.user_verified = user_verified
        self.transports = list(transports)
        self.attachment = attachment
        self.attestation_certificate = attestation_certificate
        if attestation_certificate is not None and attestation != "packed":
            raise ValueError("an attestation certificate needs attestation='packed'")
        self.credentials: list[StoredCredential] = []

    def create(self, options: dict, *, origin: str, **tamper: Unpack[CreateTamper]) -> dict:
        """Answer `navigator.credentials.create()` for JSON creation options."""
        _check_tamper(dict(tamper), CreateTamper.__optional_keys__)
        rp_id = options.get("rp", {}).get("id") or urlsplit(origin).hostname or ""
        key = _generate_key(self.alg)
        cred = StoredCredential(
            credential_id=tamper.get("credential_id", secrets.token_bytes(32)),
            private_key=key,
            alg=self.alg,
            rp_id=rp_id,
            user_handle=b64url_decode(options["user"]["id"]),
            sign_count=1 if self.counter == "increment" else 0,
        )
        attested = (
            self.aaguid
            + struct.pack(">H", len(cred.credential_id))
            + cred.credential_id
            + _cose_key(key)
        )
        auth_data = self._auth_data(rp_id, cred.sign_count, tamper, _AT) + attested
        client_data = self._client_data("webauthn.create", options, origin, tamper)
        att_stmt: dict[str, Any] = {}
        signed = auth_data + hashlib.sha256(client_data).digest()
        full = self.attestation_certificate
        if full is not None:  # full attestation: the make's key signs, its chain in x5c
            att_stmt = {"alg": COSE_ALGS["ES256"], "sig": _sign(full.private_key, signed),
                        "x5c": list(full.chain)}
        elif self.attestation == "packed":  # self attestation: the credential's key signs
            att_stmt = {"alg": COSE_ALGS[self.alg], "sig": _sign(key, signed)}
        if tamper.get("bad_signature"):
            if "sig" not in att_stmt:
                raise ValueError("bad_signature on create needs attestation='packed'")
            att_stmt["sig"] = _corrupt(att_stmt["sig"])
        attestation_object = cbor2.dumps(
            {"fmt": self.attestation, "attStmt": att_stmt, "authData": auth_data}, canonical=True
        )
        spki = key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.credentials.append(cred)
        return {
            "id": b64url(cred.credential_id),
            "rawId": b64url(cred.credential_id),
            "type": "public-key",
            "authenticatorAttachment": self.attachment,
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": b64url(client_data),
                "attestationObject": b64url(attestation_object),
                "transports": list(self.transports),
                "publicKeyAlgorithm": COSE_ALGS[self.alg],
                "publicKey": b64url(spki),
                "authenticatorData": b64url(auth_data),
            },
        }

    def get(
        self,
        options: dict,
        *,
        origin: str,
        credential_id: bytes | None = None,
        **tamper: Unpack[GetTamper],
    ) -> dict:
        """Answer `navigator.credentials.get()` for JSON request options.

        An explicit ``credential_id`` is used whatever its rp id; otherwise only credentials of
        the rp id are considered. Raises LookupError when none fits (browser: NotAllowedError).
        """
        _check_tamper(dict(tamper), GetTamper.__optional_keys__)
        rp_id = options.get("rpId") or urlsplit(origin).hostname or ""
        cred = self._select(rp_id, options.get("allowCredentials") or [], credential_id)
        if self.counter == "increment":
            cred.sign_count += 1
        auth_data = self._auth_data(rp_id, cred.sign_count, tamper, 0)
        client_data = self._client_data("webauthn.get", options, origin, tamper)
        signature = _sign(cred.private_key, auth_data + hashlib.sha256(client_data).digest())
        if tamper.get("bad_signature"):
            signature = _corrupt(signature)
        user_handle = tamper.get("user_handle", cred.user_handle)
        return {
            "id": b64url(cred.credential_id),
            "rawId": b64url(cred.credential_id),
            "type": "public-key",
            "authenticatorAttachment": self.attachment,
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": b64url(client_data),
                "authenticatorData": b64url(auth_data),
                "signature": b64url(signature),
                "userHandle": None if user_handle is None else b64url(user_handle),
            },
        }

    def _select(
        self, rp_id: str, allow: list[dict], credential_id: bytes | None
    ) -> StoredCredential:
        newest_first = self.credentials[::-1]
        if credential_id is not None:
            found = [c for c in newest_first if c.credential_id == credential_id]
        elif allow:
            wanted = [b64url_decode(d["id"]) for d in allow]
            found = [
                c for w in wanted for c in newest_first if c.credential_id == w and c.rp_id == rp_id
            ]
        else:
            found = [c for c in newest_first if c.rp_id == rp_id]
        if not found:
            raise LookupError(f"no matching credential for rp id {rp_id!r}")
        return found[0]

    def _auth_data(self, rp_id: str, count: int, tamper: _CommonTamper, extra: int) -> bytes:
        flags = extra
        for bit, default, knob in (
            (_UP, True, "up"),
            (_UV, self.user_verified, "uv"),
            (_BE, self.backup_eligible, "be"),
            (_BS, self.backup_state, "bs"),
        ):
            if tamper.get(knob, default):
                flags |= bit
        rp_id_hash = hashlib.sha256(tamper.get("rp_id", rp_id).encode()).digest()
        return rp_id_hash + struct.pack(">BI", flags, tamper.get("sign_count", count))

    @staticmethod
    def _client_data(kind: str, options: dict, origin: str, tamper: _CommonTamper) -> bytes:
        data: dict[str, Any] = {
            "type": tamper.get("type", kind),
            "challenge": tamper.get("challenge", b64url(b64url_decode(options["challenge"]))),
            "origin": origin,
            "crossOrigin": tamper.get("cross_origin", False),
        }
        if "top_origin" in tamper:
            data["topOrigin"] = tamper["top_origin"]
        return json.dumps(data, separators=(",", ":")).encode()
