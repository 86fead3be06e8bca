"""Which authenticators may register a passkey: the deployment's AAGUID lists and, for
regulated deployments, the FIDO Metadata Service (MDS3).

fido2's ``mds3`` does the cryptography: :func:`read_metadata` verifies a metadata BLOB's JWS
and certificate chain against the FIDO root (``parse_blob``), and
:func:`check_authenticator` verifies an attestation statement's chain against the
attestation roots of its authenticator's metadata entry (``MdsAttestationVerifier``). What
this module adds: a BLOB past its ``nextUpdate`` is refused (:func:`ensure_current`), a
registration is refused with a reason (denied, not allowed, not in the metadata, a status
report, an attestation that does not verify), and status reports are read from every
entry, revoked ones included, so a revoked authenticator is refused for being revoked.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date
from importlib import resources
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import Encoding
from fido2.attestation.base import InvalidAttestation
from fido2.mds3 import (
    AuthenticatorStatus,
    MdsAttestationVerifier,
    MetadataBlobPayload,
    MetadataBlobPayloadEntry,
    parse_blob,
)
from fido2.webauthn import Aaguid, AttestationObject

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


def certificate_der(data: bytes) -> bytes:
    """A certificate given as PEM or DER, as DER; :class:`MetadataError` when it is neither."""
    try:
        if b"-----BEGIN" in data:
            return x509.load_pem_x509_certificate(data).public_bytes(Encoding.DER)
        return x509.load_der_x509_certificate(data).public_bytes(Encoding.DER)
    except ValueError as exc:
        raise MetadataError("The trust root is not an X.509 certificate (PEM or DER).",
                            code="metadata_trust_root_invalid") from exc


def read_metadata(blob: bytes, *, trust_root: bytes) -> MetadataBlobPayload:
    """The payload of a metadata BLOB whose signature and certificate chain verify against
    ``trust_root`` (DER); whether it is still current is :func:`ensure_current`'s."""
    try:
        return parse_blob(blob.strip(), trust_root)
    except (InvalidSignature, InvalidAttestation) as exc:
        raise MetadataError("The BLOB's signature or certificate chain does not verify "
                            "against the trust root; download it again from the FIDO "
                            "Metadata Service.", code="metadata_untrusted") from exc
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise MetadataError("The file is not a FIDO metadata BLOB (a JWS with an MDS3 "
                            "payload).") from exc


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
