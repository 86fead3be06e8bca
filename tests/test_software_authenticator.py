"""The software authenticator's output is accepted by py_webauthn, and each tamper knob bites."""

from __future__ import annotations

import hashlib
import json

import cbor2
import pytest
from cryptography.hazmat.primitives.serialization import load_der_public_key
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.authentication.verify_authentication_response import VerifiedAuthentication
from webauthn.helpers.cose import COSEAlgorithmIdentifier
from webauthn.helpers.exceptions import (
    InvalidAuthenticationResponse,
    InvalidBackupFlags,
    InvalidRegistrationResponse,
)
from webauthn.helpers.structs import (
    CredentialDeviceType,
    PublicKeyCredentialDescriptor,
    UserVerificationRequirement,
)
from webauthn.registration.verify_registration_response import VerifiedRegistration

from tests.support.authenticator import COSE_ALGS, SoftAuthenticator, b64url, b64url_decode

RP_ID = "example.test"
ORIGIN = "https://example.test"
USER_ID = b"user-handle-0001"
CREDENTIAL_KEYS = {
    "id",
    "rawId",
    "type",
    "authenticatorAttachment",
    "clientExtensionResults",
    "response",
}
ATTESTATION_KEYS = {
    "clientDataJSON",
    "attestationObject",
    "transports",
    "publicKeyAlgorithm",
    "publicKey",
    "authenticatorData",
}
ASSERTION_KEYS = {"clientDataJSON", "authenticatorData", "signature", "userHandle"}


def reg_options(**kwargs: object) -> dict:
    opts = generate_registration_options(
        rp_id=RP_ID, rp_name="Example", user_name="alice", user_id=USER_ID, **kwargs
    )
    return json.loads(options_to_json(opts))


def auth_options(allow: list[bytes] | None = None) -> dict:
    opts = generate_authentication_options(
        rp_id=RP_ID,
        allow_credentials=[PublicKeyCredentialDescriptor(id=i) for i in allow or []],
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    return json.loads(options_to_json(opts))


def verify_reg(credential: dict | str, options: dict, **kwargs: object) -> VerifiedRegistration:
    return verify_registration_response(
        credential=credential,
        expected_challenge=b64url_decode(options["challenge"]),
        expected_origin=ORIGIN,
        expected_rp_id=RP_ID,
        require_user_verification=True,
        **kwargs,
    )


def verify_auth(
    credential: dict, options: dict, public_key: bytes, count: int
) -> VerifiedAuthentication:
    return verify_authentication_response(
        credential=credential,
        expected_challenge=b64url_decode(options["challenge"]),
        expected_origin=ORIGIN,
        expected_rp_id=RP_ID,
        credential_public_key=public_key,
        credential_current_sign_count=count,
        require_user_verification=True,
    )


def register(auth: SoftAuthenticator) -> VerifiedRegistration:
    options = reg_options()
    return verify_reg(auth.create(options, origin=ORIGIN), options)


@pytest.mark.parametrize("attestation", ["none", "packed"])
@pytest.mark.parametrize("alg", ["ES256", "EdDSA", "RS256"])
def test_register_and_authenticate_round_trip(alg: str, attestation: str) -> None:
    auth = SoftAuthenticator(alg=alg, attestation=attestation, aaguid=bytes(range(16)))
    options = reg_options()
    credential = auth.create(options, origin=ORIGIN)
    reg = verify_reg(json.dumps(credential), options)  # survives a JSON round trip

    assert reg.fmt == attestation
    assert reg.credential_id == auth.credentials[0].credential_id
    assert reg.sign_count == 1
    assert reg.user_verified
    assert reg.aaguid == "00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert reg.credential_device_type == CredentialDeviceType.SINGLE_DEVICE
    assert cbor2.loads(reg.credential_public_key)[3] == COSE_ALGS[alg]

    count = reg.sign_count
    for expected in (2, 3):
        options = auth_options([reg.credential_id])
        assertion = auth.get(options, origin=ORIGIN)
        result = verify_auth(assertion, options, reg.credential_public_key, count)
        assert result.new_sign_count == expected
        assert result.credential_id == reg.credential_id
        assert b64url_decode(assertion["response"]["userHandle"]) == USER_ID
        count = result.new_sign_count


def test_registration_json_shape() -> None:
    auth = SoftAuthenticator(alg="ES256", transports=["internal", "hybrid"])
    credential = auth.create(reg_options(), origin=ORIGIN)
    response = credential["response"]

    assert set(credential) == CREDENTIAL_KEYS
    assert set(response) == ATTESTATION_KEYS
    assert credential["type"] == "public-key"
    assert credential["authenticatorAttachment"] == "platform"
    assert credential["clientExtensionResults"] == {}
    assert response["transports"] == ["internal", "hybrid"]
    assert response["publicKeyAlgorithm"] == -7
    for value in (credential["id"], response["clientDataJSON"], response["attestationObject"]):
        assert "=" not in value and "+" not in value and "/" not in value

    att = cbor2.loads(b64url_decode(response["attestationObject"]))
    assert att["fmt"] == "none" and att["attStmt"] == {}
    assert att["authData"] == b64url_decode(response["authenticatorData"])
    assert att["authData"][:32] == hashlib.sha256(RP_ID.encode()).digest()

    client_data = json.loads(b64url_decode(response["clientDataJSON"]))
    assert client_data["type"] == "webauthn.create"
    assert client_data["origin"] == ORIGIN
    assert client_data["crossOrigin"] is False

    spki = load_der_public_key(b64url_decode(response["publicKey"]))
    assert spki == auth.credentials[0].private_key.public_key()


def test_assertion_json_shape() -> None:
    auth = SoftAuthenticator()
    register(auth)
    assertion = auth.get(auth_options(), origin=ORIGIN)
    assert set(assertion) == CREDENTIAL_KEYS
    assert set(assertion["response"]) == ASSERTION_KEYS
    assert json.loads(b64url_decode(assertion["response"]["clientDataJSON"]))["type"] == (
        "webauthn.get"
    )


def test_rp_id_defaults_to_origin_hostname() -> None:
    auth = SoftAuthenticator()
    options = reg_options()
    del options["rp"]["id"]
    verify_reg(auth.create(options, origin=ORIGIN), options)
    assert auth.credentials[0].rp_id == RP_ID


def test_counter_zero_always_reports_zero() -> None:
    auth = SoftAuthenticator(counter="zero", backup_eligible=True, backup_state=True)
    reg = register(auth)
    assert reg.sign_count == 0
    assert reg.credential_device_type == CredentialDeviceType.MULTI_DEVICE
    assert reg.credential_backed_up
    for _ in range(2):
        options = auth_options()
        assertion = auth.get(options, origin=ORIGIN)
        result = verify_auth(assertion, options, reg.credential_public_key, 0)
        assert result.new_sign_count == 0
        assert result.credential_backed_up


def test_backup_state_without_eligibility_raises_invalid_backup_flags() -> None:
    auth = SoftAuthenticator()
    options = reg_options()
    with pytest.raises(InvalidBackupFlags):
        verify_reg(auth.create(options, origin=ORIGIN, bs=True), options)


def test_be_bs_knobs_on_get() -> None:
    auth = SoftAuthenticator()
    reg = register(auth)
    options = auth_options()
    result = verify_auth(
        auth.get(options, origin=ORIGIN, be=True, bs=True), options, reg.credential_public_key, 1
    )
    assert result.credential_device_type == CredentialDeviceType.MULTI_DEVICE
    assert result.credential_backed_up


def test_unoffered_algorithm_is_still_produced() -> None:
    auth = SoftAuthenticator(alg="EdDSA")
    options = reg_options(supported_pub_key_algs=[COSEAlgorithmIdentifier.ECDSA_SHA_256])
    assert [p["alg"] for p in options["pubKeyCredParams"]] == [-7]
    credential = auth.create(options, origin=ORIGIN)
    assert credential["response"]["publicKeyAlgorithm"] == -8
    # py_webauthn does not read the options: only supported_pub_key_algs restricts it.
    verify_reg(credential, options)
    with pytest.raises(InvalidRegistrationResponse, match="Unsupported credential public key"):
        verify_reg(
            credential, options, supported_pub_key_algs=[COSEAlgorithmIdentifier.ECDSA_SHA_256]
        )


REG_TAMPERS = [
    pytest.param({"type": "webauthn.get"}, "client data type", id="type"),
    pytest.param({"challenge": b64url(b"not the challenge")}, "challenge", id="challenge"),
    pytest.param({"rp_id": "evil.test"}, "RP ID hash", id="rp_id"),
    pytest.param({"up": False}, "User presence", id="up"),
    pytest.param({"uv": False}, "User verification", id="uv"),
    pytest.param({"bad_signature": True}, "signature", id="bad_signature"),
]


@pytest.mark.parametrize(("tamper", "message"), REG_TAMPERS)
def test_registration_tamper_is_rejected(tamper: dict, message: str) -> None:
    auth = SoftAuthenticator(attestation="packed")
    options = reg_options()
    credential = auth.create(options, origin=ORIGIN, **tamper)
    with pytest.raises(InvalidRegistrationResponse, match=message):
        verify_reg(credential, options)


def test_registration_wrong_origin_is_rejected() -> None:
    auth = SoftAuthenticator()
    options = reg_options()
    with pytest.raises(InvalidRegistrationResponse, match="origin"):
        verify_reg(auth.create(options, origin="https://evil.test"), options)


AUTH_TAMPERS = [
    pytest.param({"type": "webauthn.create"}, "client data type", id="type"),
    pytest.param({"challenge": b64url(b"not the challenge")}, "challenge", id="challenge"),
    pytest.param({"rp_id": "evil.test"}, "RP ID hash", id="rp_id"),
    pytest.param({"up": False}, "not present", id="up"),
    pytest.param({"uv": False}, "User verification", id="uv"),
    pytest.param({"bad_signature": True}, "signature", id="bad_signature"),
    pytest.param({"sign_count": 1}, "sign count", id="sign_count_replay"),
]


@pytest.mark.parametrize("alg", ["ES256", "EdDSA", "RS256"])
@pytest.mark.parametrize(("tamper", "message"), AUTH_TAMPERS)
def test_authentication_tamper_is_rejected(alg: str, tamper: dict, message: str) -> None:
    auth = SoftAuthenticator(alg=alg)
    reg = register(auth)
    options = auth_options()
    assertion = auth.get(options, origin=ORIGIN, **tamper)
    with pytest.raises(InvalidAuthenticationResponse, match=message):
        verify_auth(assertion, options, reg.credential_public_key, 1)


def test_authentication_wrong_origin_is_rejected() -> None:
    auth = SoftAuthenticator()
    reg = register(auth)
    options = auth_options()
    assertion = auth.get(options, origin="https://evil.test")
    with pytest.raises(InvalidAuthenticationResponse, match="origin"):
        verify_auth(assertion, options, reg.credential_public_key, 1)


def test_tampers_do_not_advance_or_rewind_state() -> None:
    auth = SoftAuthenticator()
    reg = register(auth)
    options = auth_options()
    replayed = auth.get(options, origin=ORIGIN, sign_count=99)
    assert verify_auth(replayed, options, reg.credential_public_key, 1).new_sign_count == 99
    assert auth.credentials[0].sign_count == 2
    options = auth_options()
    result = verify_auth(auth.get(options, origin=ORIGIN), options, reg.credential_public_key, 2)
    assert result.new_sign_count == 3


def test_knobs_py_webauthn_does_not_check_reach_the_wire() -> None:
    """crossOrigin, topOrigin and userHandle are the server's job: py_webauthn accepts them."""
    auth = SoftAuthenticator()
    reg = register(auth)
    options = auth_options()
    assertion = auth.get(
        options, origin=ORIGIN, cross_origin=True, top_origin="https://top.test", user_handle=b"x"
    )
    client_data = json.loads(b64url_decode(assertion["response"]["clientDataJSON"]))
    assert client_data["crossOrigin"] is True
    assert client_data["topOrigin"] == "https://top.test"
    assert assertion["response"]["userHandle"] == b64url(b"x")
    verify_auth(assertion, options, reg.credential_public_key, 1)

    omitted = auth.get(auth_options(), origin=ORIGIN, user_handle=None)
    assert omitted["response"]["userHandle"] is None


def test_forced_credential_id_including_oversized() -> None:
    auth = SoftAuthenticator()
    options = reg_options()
    huge = b"\x07" * 1024
    credential = auth.create(options, origin=ORIGIN, credential_id=huge)
    assert credential["rawId"] == b64url(huge)
    # py_webauthn does not enforce the 1023-byte limit; the server must.
    assert verify_reg(credential, options).credential_id == huge

    duplicate = auth.create(reg_options(), origin=ORIGIN, credential_id=huge)
    assert duplicate["id"] == credential["id"]
    assert auth.get(auth_options([huge]), origin=ORIGIN)["id"] == credential["id"]


def test_get_credential_selection() -> None:
    auth = SoftAuthenticator()
    first = register(auth).credential_id
    second = register(auth).credential_id
    other_rp = reg_options()
    other_rp["rp"]["id"] = "other.test"
    auth.create(other_rp, origin="https://other.test")

    assert auth.get(auth_options(), origin=ORIGIN)["rawId"] == b64url(second)
    assert auth.get(auth_options([b"unknown", first]), origin=ORIGIN)["rawId"] == b64url(first)
    assert auth.get(auth_options(), origin=ORIGIN, credential_id=first)["rawId"] == b64url(first)
    with pytest.raises(LookupError):
        auth.get(auth_options([b"unknown"]), origin=ORIGIN)
    with pytest.raises(LookupError):
        SoftAuthenticator().get(auth_options(), origin=ORIGIN)


def test_unknown_tamper_and_bad_config_are_refused() -> None:
    auth = SoftAuthenticator()
    with pytest.raises(TypeError, match="user_handle"):
        auth.create(reg_options(), origin=ORIGIN, user_handle=b"x")
    with pytest.raises(ValueError, match="packed"):
        auth.create(reg_options(), origin=ORIGIN, bad_signature=True)
    with pytest.raises(ValueError):
        SoftAuthenticator(alg="ES512")


def test_b64url_round_trip() -> None:
    for data in (b"", b"\xff", b"\xfb\xff", b"abc", bytes(range(256))):
        encoded = b64url(data)
        assert "=" not in encoded
        assert b64url_decode(encoded) == data
    assert b64url_decode("_-8=") == b"\xff\xef"
