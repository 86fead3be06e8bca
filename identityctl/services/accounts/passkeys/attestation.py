"""Which authenticators may register passkeys here: the policy of ``passkey.aaguid_allow``,
``passkey.aaguid_deny`` and ``passkey.metadata``, and the FIDO metadata (MDS3) it checks
against, which an administrator loads (`identityctl passkey metadata load`).

The metadata lives in the store, so every instance checks against the same BLOB; each
process keeps the BLOB parsed under the store's version of it and reads that version (one
small row) at each registration that needs it. With none of the three settings a
registration does not come here at all.
"""

from __future__ import annotations

import base64
import threading
from datetime import UTC, date, datetime
from functools import cache

from fido2.mds3 import MdsAttestationVerifier, MetadataBlobPayload

from identityctl.config import PasskeyConfig
from identityctl.errors import ServiceUnavailable
from identityctl.passkey.attestation import (
    AuthenticatorPolicy,
    MetadataError,
    certificate_der,
    check_authenticator,
    ensure_current,
    fido_root,
    metadata_verifier,
    read_metadata,
)
from identityctl.passkey.codec import CredentialResponse
from identityctl.services import audit
from identityctl.services.origin import RequestOrigin
from identityctl.store import attestation as store
from identityctl.store.attestation import MetadataRecord

LOAD_EVENT = "passkey.metadata.load"

_lock = threading.Lock()
#: This process's parsed copy of the stored metadata, under the store's version of it.
_parsed: tuple[int, MetadataBlobPayload, MdsAttestationVerifier] | None = None


def _today() -> date:
    return datetime.now(UTC).date()


@cache
def policy_of(config: PasskeyConfig) -> AuthenticatorPolicy:
    return AuthenticatorPolicy(allow=frozenset(a.lower() for a in config.aaguid_allow),
                               deny=frozenset(a.lower() for a in config.aaguid_deny),
                               metadata_required=config.metadata)


def load_metadata(blob: bytes, *, trust_root: bytes | None,
                  origin: RequestOrigin) -> MetadataRecord:
    """Verify a metadata BLOB against ``trust_root`` (PEM or DER; None: the FIDO Alliance's
    root shipped with identityctl) and make it the one registrations are checked against."""
    root = certificate_der(trust_root) if trust_root is not None else fido_root()
    payload = read_metadata(blob, trust_root=root)
    ensure_current(payload, today=_today())
    record = store.save_metadata(
        blob=blob.strip().decode("ascii"), trust_root=base64.b64encode(root).decode(),
        number=payload.no, next_update=payload.next_update.isoformat(),
        entries=len(payload.entries), legal_header=payload.legal_header)
    audit.record(LOAD_EVENT, "success", origin=origin,
                 details={"number": payload.no, "entries": len(payload.entries),
                          "nextUpdate": payload.next_update.isoformat(),
                          "version": record.version})
    return record


def loaded_metadata() -> MetadataRecord | None:
    return store.find_metadata()


def _verifier() -> MdsAttestationVerifier:
    """The verifier of the stored metadata, parsed once per process and version."""
    global _parsed
    version = store.metadata_version()
    if version is None:
        raise ServiceUnavailable("passkey.metadata is on but no FIDO metadata was loaded; "
                                 "an administrator runs `identityctl passkey metadata load`.",
                                 code="attestation_metadata_missing")
    with _lock:
        if _parsed is None or _parsed[0] != version:
            record = store.find_metadata()
            assert record is not None  # versions are never removed
            # Verified when loaded; read again against the same root (its date: below).
            payload = read_metadata(record.blob.encode(),
                                    trust_root=base64.b64decode(record.trust_root))
            _parsed = (record.version, payload, metadata_verifier(payload))
        _version, payload, verifier = _parsed
    try:
        ensure_current(payload, today=_today())
    except MetadataError as error:
        raise ServiceUnavailable(f"The FIDO metadata has expired: {error.description} An "
                                 f"administrator loads the current BLOB.",
                                 code="attestation_metadata_expired") from error
    return verifier


def check_registration(config: PasskeyConfig, *, aaguid: str,
                       response: CredentialResponse) -> None:
    """Refuse the authenticator ``aaguid`` that answered ``response`` when the deployment's
    policy does not let it register (:class:`AuthenticatorRefused`)."""
    policy = policy_of(config)
    check_authenticator(aaguid=aaguid.lower(),
                        attestation_object=response.fields["attestationObject"],
                        client_data_json=response.fields["clientDataJSON"], policy=policy,
                        verifier=_verifier() if policy.metadata_required else None)
