"""WebAuthn Level 3 relying-party verification (§7.1 registration, §7.2 authentication).

py_webauthn does the cryptography, CBOR/COSE parsing and attestation statements. Before
calling it, this module checks each step itself so every named failure has its own error
code, and it adds what py_webauthn leaves out: clientData crossOrigin/topOrigin, the
plain-http origin case, the 1023-byte credential id limit, the credential id inside the
attestation matching the one sent, the algorithm against those offered, the attachment the
relying party asked for, userHandle binding, backup eligibility never changing, and the
sign counter (checked only after the signature, so an unsigned replay cannot pass for a
clone).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from webauthn import verify_authentication_response, verify_registration_response
from webauthn.helpers import (
    decode_credential_public_key,
    parse_attestation_object,
    parse_authenticator_data,
)
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AttestationFormat,
    AuthenticationCredential,
    AuthenticatorAssertionResponse,
    AuthenticatorData,
)

from identityctl.config import LOCAL_HOSTS
from identityctl.errors import BadRequest
from identityctl.passkey import codec
from identityctl.passkey.codec import CredentialResponse

#: WebAuthn §5.1: a credential id is at most 1023 bytes.
MAX_CREDENTIAL_ID_BYTES = 1023
REGISTRATION_TYPE = "webauthn.create"
AUTHENTICATION_TYPE = "webauthn.get"


class VerificationError(BadRequest):
    """A ceremony response failed one named check; ``details`` go to the audit log."""

    code = "passkey_verification_failed"
    message = "The passkey response did not pass verification."

    def __init__(self, code: str, description: str, **details: Any) -> None:
        super().__init__(description, code=code)
        self.details = details


@dataclass(slots=True)
class CeremonyExpectations:
    """What a ceremony's start promised and its response must match."""

    challenge: bytes
    rp_id: str
    allowed_origins: tuple[str, ...]
    user_verification_required: bool


@dataclass(slots=True)
class RegistrationExpectations(CeremonyExpectations):
    #: COSE algorithms offered in pubKeyCredParams.
    algorithms: tuple[int, ...]
    #: "" when any attachment was acceptable.
    authenticator_attachment: str = ""
    #: False for a creation the page may ask with Conditional Create (WebAuthn L3 §7.1
    #: step 14: the password manager makes it without a gesture, UP=0).
    user_presence_required: bool = True


@dataclass(slots=True)
class VerifiedCredential:
    """A new credential that passed §7.1, ready to be stored."""

    credential_id: bytes
    public_key: bytes
    algorithm: int
    sign_count: int
    aaguid: str
    attestation_format: str
    backup_eligible: bool
    backup_state: bool
    user_verified: bool
    transports: tuple[str, ...] = ()


@dataclass(slots=True)
class AuthenticationExpectations(CeremonyExpectations):
    #: allowCredentials of the options; empty for usernameless ceremonies.
    allowed_credential_ids: tuple[bytes, ...] = ()
    #: Usernameless: the response must carry a userHandle (it names the user).
    user_handle_required: bool = False


@dataclass(slots=True)
class StoredPasskey:
    """What the relying party remembers about a credential between ceremonies."""

    credential_id: bytes
    public_key: bytes
    sign_count: int
    backup_eligible: bool
    #: The owner's WebAuthn user handle.
    user_handle: bytes


@dataclass(slots=True)
class VerifiedAssertion:
    """An assertion that passed §7.2: the state to store with the credential."""

    sign_count: int
    backup_eligible: bool
    backup_state: bool
    user_verified: bool


def _check_client_data(client_data_json: bytes, *, expected_type: str,
                       expected: CeremonyExpectations) -> None:
    """§7.1 steps 5-9 / §7.2 steps 9-13, each failure with its own code."""
    try:
        client_data = json.loads(client_data_json)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        client_data = None
    if not isinstance(client_data, dict) or not all(
            isinstance(client_data.get(key), str) for key in ("type", "challenge", "origin")):
        raise VerificationError("invalid_client_data", "clientDataJSON must be a JSON object "
                                "with string type, challenge and origin.")
    if client_data["type"] != expected_type:
        raise VerificationError("client_data_type_mismatch", f"Unexpected clientData type "
                                f"{client_data['type']!r}, expected {expected_type!r}.")
    sent = codec.decode(client_data["challenge"], field="clientDataJSON.challenge")
    if not hmac.compare_digest(sent, expected.challenge):
        raise VerificationError("challenge_mismatch", "The clientData challenge is not the one "
                                "this session issued; use the options of the same start call.")
    origin = client_data["origin"]
    if origin not in expected.allowed_origins:
        try:
            parts = urlsplit(origin)
            hostname = parts.hostname
        except ValueError:  # not even a URL ("https://[::1"): simply not an allowed origin
            parts, hostname = urlsplit(""), None
        if parts.scheme == "http" and hostname not in LOCAL_HOSTS:
            raise VerificationError("plain_http_origin", f"Origin {origin!r} uses plain http; "
                                    "WebAuthn needs https outside localhost.", origin=origin)
        raise VerificationError("origin_mismatch", f"Unexpected origin {origin!r}, expected one "
                                f"of {list(expected.allowed_origins)} "
                                f"(passkey.allowed_origins or related_origins).",
                                origin=origin)
    top_origin = client_data.get("topOrigin")
    if client_data.get("crossOrigin") is True or (top_origin is not None
                                                  and top_origin != origin):
        raise VerificationError("cross_origin_refused", "The ceremony ran in a cross-origin "
                                "iframe (crossOrigin/topOrigin); only first-party pages may "
                                "use these passkeys.", top_origin=top_origin)


@functools.lru_cache(maxsize=8)
def _rp_id_hash(rp_id: str) -> bytes:
    return hashlib.sha256(rp_id.encode()).digest()


def _check_authenticator_data(auth_data: AuthenticatorData, *,
                              expected: CeremonyExpectations,
                              user_presence_required: bool = True) -> None:
    """rpIdHash, UP (unless not required), UV when required, and the BE/BS consistency of
    §6.1.3."""
    if not hmac.compare_digest(auth_data.rp_id_hash, _rp_id_hash(expected.rp_id)):
        raise VerificationError("rp_id_mismatch", f"authenticatorData rpIdHash is not the hash "
                                f"of the relying party id {expected.rp_id!r}.")
    if user_presence_required and not auth_data.flags.up:
        raise VerificationError("user_presence_missing", "The authenticator did not report "
                                "user presence (UP=0).")
    if expected.user_verification_required and not auth_data.flags.uv:
        raise VerificationError("user_verification_missing", "User verification is required "
                                "but the authenticator reported UV=0.")
    if auth_data.flags.bs and not auth_data.flags.be:
        raise VerificationError("invalid_backup_flags", "The authenticator reported a backed-up "
                                "(BS=1) credential that is not backup eligible (BE=0).")


def verify_registration(credential: CredentialResponse, *,
                        expected: RegistrationExpectations) -> VerifiedCredential:
    """§7.1: a registration response, or :class:`VerificationError` naming the failed step."""
    client_data_json = credential.fields["clientDataJSON"]
    _check_client_data(client_data_json, expected_type=REGISTRATION_TYPE, expected=expected)
    try:
        attestation = parse_attestation_object(credential.fields["attestationObject"])
    except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
        raise VerificationError("invalid_attestation", "attestationObject is not a valid CBOR "
                                "attestation object.") from exc
    try:
        attestation_format = AttestationFormat(attestation.fmt)
    except (ValueError, TypeError):  # py_webauthn passes any CBOR value through as fmt
        raise VerificationError("invalid_attestation", "attestationObject.fmt is not a "
                                "WebAuthn attestation statement format.") from None
    auth_data = attestation.auth_data
    _check_authenticator_data(auth_data, expected=expected,
                              user_presence_required=expected.user_presence_required)
    attested = auth_data.attested_credential_data
    if attested is None:
        raise VerificationError("invalid_attestation", "authenticatorData carries no attested "
                                "credential data (AT=0).")
    if len(attested.credential_id) > MAX_CREDENTIAL_ID_BYTES:
        raise VerificationError("credential_id_too_long", f"The credential id has "
                                f"{len(attested.credential_id)} bytes; at most "
                                f"{MAX_CREDENTIAL_ID_BYTES} are allowed.")
    if attested.credential_id != credential.credential_id:
        raise VerificationError("credential_id_mismatch", "publicKeyCredential.id is not the "
                                "credential id inside the attestation.")
    try:
        algorithm = int(decode_credential_public_key(attested.credential_public_key).alg)
    except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
        raise VerificationError("unsupported_public_key", "The credential public key is not a "
                                "COSE key this server can use.") from exc
    if algorithm not in expected.algorithms:
        raise VerificationError("algorithm_not_offered", f"The credential uses COSE algorithm "
                                f"{algorithm}; the server offered {list(expected.algorithms)}.",
                                algorithm=algorithm)
    reported = credential.authenticator_attachment
    if expected.authenticator_attachment and reported \
            and reported != expected.authenticator_attachment:
        raise VerificationError("authenticator_attachment_mismatch", f"A {reported} "
                                f"authenticator answered; this ceremony asked for "
                                f"{expected.authenticator_attachment}.")
    try:
        verified = verify_registration_response(
            credential=credential.to_json(), expected_challenge=expected.challenge,
            expected_rp_id=expected.rp_id, expected_origin=list(expected.allowed_origins),
            require_user_presence=expected.user_presence_required,
            require_user_verification=expected.user_verification_required,
            supported_pub_key_algs=list(expected.algorithms))
    except WebAuthnException as exc:
        raise VerificationError("invalid_attestation", f"The attestation statement did not "
                                f"verify: {exc}", fmt=attestation_format.value) from exc
    return VerifiedCredential(
        credential_id=verified.credential_id, public_key=verified.credential_public_key,
        algorithm=algorithm, sign_count=verified.sign_count, aaguid=verified.aaguid,
        attestation_format=attestation_format.value,
        backup_eligible=auth_data.flags.be, backup_state=auth_data.flags.bs,
        user_verified=auth_data.flags.uv,
        transports=credential.transports)


INVALID_SIGNATURE = "The assertion signature does not verify with the stored public key."


def _assertion(credential: CredentialResponse) -> AuthenticationCredential:
    """The already decoded response as py_webauthn's own struct (no second base64 pass)."""
    fields = credential.fields
    return AuthenticationCredential(
        id=codec.encode(credential.credential_id), raw_id=credential.credential_id,
        response=AuthenticatorAssertionResponse(
            client_data_json=fields["clientDataJSON"],
            authenticator_data=fields["authenticatorData"], signature=fields["signature"],
            user_handle=fields.get("userHandle")))


def verify_authentication(credential: CredentialResponse, *,
                          expected: AuthenticationExpectations,
                          stored: StoredPasskey | None) -> VerifiedAssertion:
    """§7.2: an assertion by ``stored``, or :class:`VerificationError` naming the failed step.

    The caller has already looked ``stored`` up by ``credential.credential_id`` and checked
    that it belongs to the user the ceremony named, if any. ``stored`` None: no passkey is
    registered under what was presented; every check runs as for a registered one and the
    signature is the step that fails (``invalid_signature``), so no answer tells a
    registered credential id from one that is not (a decoy of §14.6.2, one deleted).
    """
    if expected.allowed_credential_ids and \
            credential.credential_id not in expected.allowed_credential_ids:
        raise VerificationError("credential_not_allowed", "The credential was not in the "
                                "options' allowCredentials; start a new ceremony.")
    user_handle = credential.fields.get("userHandle")
    if user_handle is None and expected.user_handle_required:
        raise VerificationError("user_handle_missing", "Usernameless sign-in needs "
                                "response.userHandle (use a discoverable credential).")
    # A listed credential nobody holds names no owner: any handle is another's. (Without a
    # list the caller looked the credential up with the handle: there is nothing to compare.)
    owner_handle = stored.user_handle if stored is not None else (
        None if expected.user_handle_required else b"")
    if user_handle is not None and owner_handle is not None \
            and not hmac.compare_digest(user_handle, owner_handle):
        raise VerificationError("user_handle_mismatch", "response.userHandle does not name the "
                                "owner of this credential.")
    _check_client_data(credential.fields["clientDataJSON"], expected_type=AUTHENTICATION_TYPE,
                       expected=expected)
    try:
        auth_data = parse_authenticator_data(credential.fields["authenticatorData"])
    except (WebAuthnException, ValueError, KeyError, TypeError, IndexError) as exc:
        raise VerificationError("invalid_authenticator_data", "authenticatorData is "
                                "malformed.") from exc
    _check_authenticator_data(auth_data, expected=expected)
    if stored is None:
        raise VerificationError("invalid_signature", INVALID_SIGNATURE)
    try:
        # A zero stored count turns py_webauthn's own counter check off: ours below runs
        # after the signature, so only a genuine signed assertion is reported as a clone.
        verify_authentication_response(
            credential=_assertion(credential), expected_challenge=expected.challenge,
            expected_rp_id=expected.rp_id, expected_origin=list(expected.allowed_origins),
            credential_public_key=stored.public_key, credential_current_sign_count=0,
            require_user_verification=expected.user_verification_required)
    except WebAuthnException as exc:
        raise VerificationError("invalid_signature", INVALID_SIGNATURE) from exc
    if auth_data.flags.be != stored.backup_eligible:
        raise VerificationError("backup_eligibility_changed", "The credential's backup "
                                "eligibility (BE) differs from registration; a credential "
                                "cannot change it.", stored=stored.backup_eligible)
    if (auth_data.sign_count or stored.sign_count) and auth_data.sign_count <= stored.sign_count:
        raise VerificationError("possible_clone", f"Signature counter {auth_data.sign_count} "
                                f"is not above the stored {stored.sign_count}: the credential "
                                f"may have been cloned.", stored_sign_count=stored.sign_count,
                                presented_sign_count=auth_data.sign_count)
    return VerifiedAssertion(sign_count=auth_data.sign_count,
                             backup_eligible=auth_data.flags.be, backup_state=auth_data.flags.bs,
                             user_verified=auth_data.flags.uv)
