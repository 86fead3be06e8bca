"""Which authenticators may register a passkey: the deployment's AAGUID lists and, for
regulated deployments, the FIDO Metadata Service (MDS3).

fido2's ``mds3`` does the cryptography: :func:`read_metadata` verifies a metadata BLOB's JWS
and certificate chain against the FIDO root (``parse_blob``), and
:func:`check_authenticator` verifies an attestation statement's chain against the
attestation roots of its authenticator's metadata entry (``MdsAttestationVerifier``). What
this module adds: a BLOB is at most ``MAX_BLOB_BYTES`` long and its signature is verified
(joserfc's JWS, fido2's chain check) before its payload is parsed, since ``parse_blob``
parses first; a BLOB past its ``nextUpdate`` is refused (:func:`ensure_current`), a
registration is refused with a reason (denied, not allowed, not in the metadata, a status
report, an attestation that does not verify), and status reports are read from every
entry, revoked ones included, so a revoked authenticator is refused for being revoked.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from datetime import date
from importlib import resources
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from fido2.attestation.base import InvalidAttestation, verify_x509_chain
from fido2.mds3 import (
    AuthenticatorStatus,
    MdsAttestationVerifier,
    MetadataBlobPayload,
    MetadataBlobPayloadEntry,
    parse_blob,
)
from fido2.webauthn import Aaguid, AttestationObject
from joserfc import jwk, jws
from joserfc.errors import (
    BadSignatureError,
    InvalidKeyTypeError,
    JoseError,
    UnsupportedAlgorithmError,
)
from joserfc.jws import JWSRegistry

from identityctl.errors import BadRequest
from identityctl.passkey.verification import VerificationError

#: Status reports that refuse an authenticator whatever came after them: its keys or its
#: user verification cannot be trusted, or FIDO withdrew it.
REFUSED_STATUSES = frozenset({
    AuthenticatorStatus.REVOKED, AuthenticatorStatus.ATTESTATION_KEY_COMPROMISE,
    AuthenticatorStatus.USER_KEY_REMOTE_COMPROMISE,
    AuthenticatorStatus.USER_KEY_PHYSICAL_COMPROMISE,
    AuthenticatorStatus.USER_VERIFICATION_BYPASS,
})
#: Why a registration was refused (``reason`` in the error's audit details).
DENIED, NOT_ALLOWED, NOT_IN_METADATA, STATUS, UNTRUSTED = (
    "denied", "not_allowed", "not_in_metadata", "status", "attestation_untrusted")


class MetadataError(BadRequest):
    """A metadata BLOB that cannot be used."""

    code = "metadata_invalid"
    message = "The FIDO metadata BLOB cannot be used."


class AuthenticatorRefused(VerificationError):
    """The deployment's policy does not let this authenticator hold a passkey."""

    status = 403
    code = "authenticator_not_allowed"
    message = "This authenticator is not allowed to register a passkey here."

    def __init__(self, reason: str, description: str, **details: Any) -> None:
        super().__init__(self.code, description, reason=reason, **details)


@dataclass(frozen=True, slots=True)
class AuthenticatorPolicy:
    """``passkey.aaguid_allow``/``aaguid_deny`` (lower-case AAGUIDs) and ``passkey.metadata``."""

    allow: frozenset[str] = frozenset()
    deny: frozenset[str] = frozenset()
    metadata_required: bool = False


def fido_root() -> bytes:
    """The FIDO Alliance's metadata root (DER), shipped as package data."""
    pem = resources.files("identityctl.passkey").joinpath("data/fido-mds-root.pem").read_bytes()
    return certificate_der(pem)


#: The largest trust root read: one certificate is a few KiB.
MAX_TRUST_ROOT_BYTES = 64 * 2**10


def certificate_der(data: bytes) -> bytes:
    """A certificate given as PEM or DER, as DER; :class:`MetadataError` when it is neither."""
    try:
        if b"-----BEGIN" in data:
            return x509.load_pem_x509_certificate(data).public_bytes(Encoding.DER)
        return x509.load_der_x509_certificate(data).public_bytes(Encoding.DER)
    except ValueError as exc:
        raise MetadataError("The trust root is not an X.509 certificate (PEM or DER).",
                            code="metadata_trust_root_invalid") from exc


#: The largest metadata BLOB read: the FIDO Metadata Service's is 5 to 10 MB (2025); a
#: larger one is refused before anything in it is decoded.
MAX_BLOB_BYTES = 32 * 2**20
#: The JWS algorithms a BLOB may be signed with: a certificate's key, never a shared secret.
BLOB_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
                   "ES512", "EdDSA")


class _BlobRules(JWSRegistry):
    """joserfc's JWS rules with a BLOB's sizes (its defaults are a token's): a header that
    carries a certificate chain, a payload of megabytes."""

    max_header_length = 64 * 2**10
    max_payload_length = MAX_BLOB_BYTES
    max_signature_length = 2**10


_RULES = _BlobRules(algorithms=BLOB_ALGORITHMS, strict_check_header=False)
_UNTRUSTED = ("The BLOB's signature or certificate chain does not verify against the trust "
              "root; download it again from the FIDO Metadata Service.")
#: A signature that does not verify, or that no certificate of the chain could have made.
_UNVERIFIED = (InvalidSignature, InvalidAttestation, BadSignatureError,
               UnsupportedAlgorithmError, InvalidKeyTypeError)
#: What reading a file that is no BLOB raises in joserfc, fido2 and json: nothing else can
#: come of its bytes, so none of it is a traceback (AssertionError: fido2's checks of key
#: types; RecursionError: JSON nested deeper than the parser goes).
_MALFORMED = (ValueError, KeyError, TypeError, IndexError, AttributeError, AssertionError,
              RecursionError, MemoryError, JoseError)


def read_metadata(blob: bytes, *, trust_root: bytes) -> MetadataBlobPayload:
    """The payload of a metadata BLOB whose signature and certificate chain verify against
    ``trust_root`` (DER); whether it is still current is :func:`ensure_current`'s.

    The signature is verified before the payload is parsed (``parse_blob`` parses first),
    so a file nobody signed costs no more than its bytes."""
    if len(blob) > MAX_BLOB_BYTES:
        raise MetadataError(f"The file is larger than {MAX_BLOB_BYTES // 2**20} MiB, the most "
                            f"a FIDO metadata BLOB may hold here.")
    blob = blob.strip()
    try:
        _verify_signature(blob, trust_root)
        return parse_blob(blob, trust_root)
    except _UNVERIFIED as exc:
        raise MetadataError(_UNTRUSTED, code="metadata_untrusted") from exc
    except _MALFORMED as exc:
        raise MetadataError("The file is not a FIDO metadata BLOB (a JWS with an MDS3 "
                            "payload).") from exc


def _verify_signature(blob: bytes, trust_root: bytes) -> None:
    """Verify the BLOB's JWS (joserfc) with the first certificate of its ``x5c`` and that
    chain up to ``trust_root`` (fido2's ``verify_x509_chain``), as ``parse_blob`` does,
    leaving its payload unparsed."""
    header = jws.extract_compact(blob, registry=_RULES).protected
    chain = [base64.b64decode(certificate) for certificate in header.get("x5c", [])]
    chain.append(trust_root)
    verify_x509_chain(chain)
    leaf = x509.load_der_x509_certificate(chain[0]).public_key().public_bytes(
        Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    # Imported as the kind of key the header's algorithm needs: a certificate of another
    # kind is InvalidKeyTypeError, an algorithm not allowed UnsupportedAlgorithmError.
    key = jwk.import_key(leaf, _RULES.get_alg(header["alg"]).key_type)
    jws.deserialize_compact(blob, key, registry=_RULES)


def ensure_current(payload: MetadataBlobPayload, *, today: date) -> None:
    """:class:`MetadataError` when the BLOB's ``nextUpdate`` has passed: FIDO may have
    revoked authenticators since, which only the next BLOB says."""
    if payload.next_update < today:
        raise MetadataError(f"The BLOB's nextUpdate ({payload.next_update.isoformat()}) has "
                            f"passed; download the current one.", code="metadata_expired")


def metadata_verifier(payload: MetadataBlobPayload) -> MdsAttestationVerifier:
    """A verifier that finds every entry, revoked ones too (:func:`check_authenticator`
    refuses them by their status); a chain with a compromised key still fails in it."""
    return MdsAttestationVerifier(payload, entry_filter=None)


def _refused_status(entry: MetadataBlobPayloadEntry) -> AuthenticatorStatus | None:
    return next((report.status for report in entry.status_reports
                 if report.status in REFUSED_STATUSES), None)


def check_authenticator(*, aaguid: str, attestation_object: bytes, client_data_json: bytes,
                        policy: AuthenticatorPolicy,
                        verifier: MdsAttestationVerifier | None) -> None:
    """Whether the authenticator ``aaguid`` (lower case, dashed) that made
    ``attestation_object`` may register under ``policy``, or :class:`AuthenticatorRefused`.

    ``verifier``: the loaded metadata, which ``policy.metadata_required`` needs."""
    if aaguid in policy.deny:
        raise AuthenticatorRefused(DENIED, f"The authenticator {aaguid} is in "
                                   f"passkey.aaguid_deny.", aaguid=aaguid)
    if policy.allow and aaguid not in policy.allow:
        raise AuthenticatorRefused(NOT_ALLOWED, f"The authenticator {aaguid} is not in "
                                   f"passkey.aaguid_allow.", aaguid=aaguid)
    if not policy.metadata_required:
        return
    if verifier is None:  # never a pass: without metadata nothing is proven
        raise AuthenticatorRefused(NOT_IN_METADATA, "No FIDO metadata is loaded.",
                                   aaguid=aaguid)
    entry = verifier.find_entry_by_aaguid(Aaguid.parse(aaguid))
    if entry is None:
        raise AuthenticatorRefused(NOT_IN_METADATA, f"The authenticator {aaguid} has no entry "
                                   f"in the FIDO metadata.", aaguid=aaguid)
    status = _refused_status(entry)
    if status is not None:
        raise AuthenticatorRefused(STATUS, f"The FIDO metadata reports the authenticator "
                                   f"{aaguid} as {status.value}.", aaguid=aaguid,
                                   status=status.value)
    try:
        verifier.verify_attestation(AttestationObject(attestation_object),
                                    hashlib.sha256(client_data_json).digest())
    except (InvalidAttestation, ValueError, KeyError, TypeError, IndexError) as exc:
        raise AuthenticatorRefused(UNTRUSTED, f"The attestation of {aaguid} does not verify "
                                   f"against the attestation roots of its FIDO metadata entry.",
                                   aaguid=aaguid) from exc
