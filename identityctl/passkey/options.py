"""Creation and request options in the WebAuthn JSON form browsers parse.

py_webauthn builds the options; this module validates what the caller asked for against the
WebAuthn enums (a bad value is a 400 naming the field) and maps the configured algorithm
names to COSE identifiers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from webauthn import generate_authentication_options, generate_registration_options
from webauthn.helpers.cose import COSEAlgorithmIdentifier
from webauthn.helpers.options_to_json_dict import options_to_json_dict
from webauthn.helpers.structs import (
    AttestationConveyancePreference,
    AuthenticatorAttachment,
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from identityctl.config import (
    ATTESTATION,
    AUTHENTICATOR_ATTACHMENT,
    RESIDENT_KEY,
    USER_VERIFICATION,
)
from identityctl.errors import InvalidField

COSE_ALGORITHMS = {
    "ES256": COSEAlgorithmIdentifier.ECDSA_SHA_256,
    "EdDSA": COSEAlgorithmIdentifier.EDDSA,
    "RS256": COSEAlgorithmIdentifier.RSASSA_PKCS1_v1_5_SHA_256,
}
SELECTION_FIELD = "authenticatorSelection"


def choice(value: Any, *, field: str, allowed: Sequence[str], default: str) -> str:
    """``value`` when it is one of ``allowed``; ``default`` when absent; else 400 naming it."""
    if value is None or value == "":
        return default
    if not isinstance(value, str) or value not in allowed:
        raise InvalidField(field, f"must be one of {', '.join(allowed)}; got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class RegistrationPolicy:
    """What the relying party asks of a new credential (and later enforces)."""

    user_verification: str
    resident_key: str
    authenticator_attachment: str
    attestation: str
    algorithms: tuple[int, ...]

    @property
    def user_verification_required(self) -> bool:
        return self.user_verification == "required"


def registration_policy(*, authenticator_selection: Any, attestation: Any,
                        defaults: RegistrationPolicy) -> RegistrationPolicy:
    """The request's choices, each checked against its enum, falling back to ``defaults``."""
    if authenticator_selection is None:
        authenticator_selection = {}
    if not isinstance(authenticator_selection, dict):
        raise InvalidField(SELECTION_FIELD, "must be an object")
    prefix = SELECTION_FIELD + "."
    return RegistrationPolicy(
        user_verification=choice(authenticator_selection.get("userVerification"),
                                 field=prefix + "userVerification", allowed=USER_VERIFICATION,
                                 default=defaults.user_verification),
        resident_key=choice(authenticator_selection.get("residentKey"),
                            field=prefix + "residentKey", allowed=RESIDENT_KEY,
                            default=defaults.resident_key),
        authenticator_attachment=choice(
            authenticator_selection.get("authenticatorAttachment"),
            field=prefix + "authenticatorAttachment", allowed=AUTHENTICATOR_ATTACHMENT,
            default=defaults.authenticator_attachment),
        attestation=choice(attestation, field="attestation", allowed=ATTESTATION,
                           default=defaults.attestation),
        algorithms=defaults.algorithms,
    )


@dataclass(slots=True)
class KnownCredential:
    """A registered credential as options name it (exclude / allow lists)."""

    credential_id: bytes
    transports: tuple[str, ...] = ()


_TRANSPORTS = {transport.value: transport for transport in AuthenticatorTransport}


def _descriptors(credentials: Sequence[KnownCredential]) -> list[PublicKeyCredentialDescriptor]:
    return [PublicKeyCredentialDescriptor(
        id=credential.credential_id,
        transports=[_TRANSPORTS[t] for t in credential.transports if t in _TRANSPORTS]
        or None) for credential in credentials]


def creation_options(*, rp_id: str, rp_name: str, user_handle: bytes, user_name: str,
                     user_display_name: str, challenge: bytes, timeout_ms: int,
                     policy: RegistrationPolicy,
                     exclude_credentials: Sequence[KnownCredential]) -> dict[str, Any]:
    """`PublicKeyCredentialCreationOptionsJSON` for navigator.credentials.create()."""
    selection = AuthenticatorSelectionCriteria(
        authenticator_attachment=AuthenticatorAttachment(policy.authenticator_attachment)
        if policy.authenticator_attachment else None,
        resident_key=ResidentKeyRequirement(policy.resident_key),
        require_resident_key=policy.resident_key == "required",
        user_verification=UserVerificationRequirement(policy.user_verification),
    )
    options = generate_registration_options(
        rp_id=rp_id, rp_name=rp_name, user_id=user_handle, user_name=user_name,
        user_display_name=user_display_name, challenge=challenge, timeout=timeout_ms,
        attestation=AttestationConveyancePreference(policy.attestation),
        authenticator_selection=selection,
        exclude_credentials=_descriptors(exclude_credentials),
        supported_pub_key_algs=[COSEAlgorithmIdentifier(alg) for alg in policy.algorithms],
    )
    return options_to_json_dict(options)


def request_options(*, rp_id: str, challenge: bytes, timeout_ms: int, user_verification: str,
                    allow_credentials: Sequence[KnownCredential]) -> dict[str, Any]:
    """`PublicKeyCredentialRequestOptionsJSON` for navigator.credentials.get()."""
    options = generate_authentication_options(
        rp_id=rp_id, challenge=challenge, timeout=timeout_ms,
        allow_credentials=_descriptors(allow_credentials),
        user_verification=UserVerificationRequirement(user_verification),
    )
    return options_to_json_dict(options)
