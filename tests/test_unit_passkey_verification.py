"""WebAuthn relying-party verification (§7.1, §7.2): each failed step is refused with its code.

No server, no store: the software authenticator in tests/support signs real credentials with
real keys, and each refusal changes one thing on the wire (a flag, a field, a byte) and
nothing else. Everything is checked on the error's ``code``, never on its wording.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import cbor2
import pytest

from identityctl.errors import BadRequest
from identityctl.passkey import codec
from identityctl.passkey.codec import CredentialResponse
from identityctl.passkey.options import (
    COSE_ALGORITHMS,
    KnownCredential,
    RegistrationPolicy,
    creation_options,
    request_options,
)
from identityctl.passkey.verification import (
    MAX_CREDENTIAL_ID_BYTES,
    AuthenticationExpectations,
    RegistrationExpectations,
    StoredPasskey,
    VerificationError,
    VerifiedAssertion,
    VerifiedCredential,
    verify_authentication,
    verify_registration,
)
from tests.support.authenticator import COSE_ALGS, SoftAuthenticator, b64url

RP_ID = "example.test"
ORIGIN = "https://example.test"
USER_HANDLE = b"user-handle-0001"
CHALLENGE = b"the-challenge-this-session-gave!"
ALL_ALGORITHMS = tuple(int(alg) for alg in COSE_ALGORITHMS.values())
POLICY = RegistrationPolicy(user_verification="preferred", resident_key="preferred",
                            authenticator_attachment="", attestation="none",
                            algorithms=ALL_ALGORITHMS)
#: rpIdHash, flags, signCount: the fixed head of authenticatorData.
AUTH_DATA_HEAD = 37
AT_FLAG = 0x40


# --- ceremonies -------------------------------------------------------------------------------

def created(authenticator: SoftAuthenticator | None = None, *, origin: str = ORIGIN,
            **tamper: Any) -> CredentialResponse:
    """A registration response to options made by identityctl, read as the server reads it."""
    options = creation_options(
        rp_id=RP_ID, rp_name="Example", user_handle=USER_HANDLE, user_name="alice",
        user_display_name="Alice", challenge=CHALLENGE, timeout_ms=60_000, policy=POLICY,
        exclude_credentials=[])
    answer = (authenticator or SoftAuthenticator()).create(options, origin=origin, **tamper)
    return codec.read_credential(answer, ceremony="registration")


def register(credential: CredentialResponse, **expected: Any) -> VerifiedCredential:
    expectations = RegistrationExpectations(**{
        "challenge": CHALLENGE, "rp_id": RP_ID, "allowed_origins": (ORIGIN,),
        "user_verification_required": False, "algorithms": ALL_ALGORITHMS, **expected})
    return verify_registration(credential, expected=expectations)


def enrolled(authenticator: SoftAuthenticator) -> StoredPasskey:
    """What the relying party stores after a successful registration by ``authenticator``."""
    verified = register(created(authenticator))
    return StoredPasskey(credential_id=verified.credential_id, public_key=verified.public_key,
                         sign_count=verified.sign_count, backup_eligible=verified.backup_eligible,
                         user_handle=USER_HANDLE)


def asserted(authenticator: SoftAuthenticator, stored: StoredPasskey, *, origin: str = ORIGIN,
             **tamper: Any) -> CredentialResponse:
    """An assertion by ``stored``'s credential to options made by identityctl."""
    options = request_options(rp_id=RP_ID, challenge=CHALLENGE, timeout_ms=60_000,
                              user_verification="preferred",
                              allow_credentials=[KnownCredential(stored.credential_id)])
    answer = authenticator.get(options, origin=origin, **tamper)
    return codec.read_credential(answer, ceremony="authentication")


def authenticate(credential: CredentialResponse, stored: StoredPasskey,
                 **expected: Any) -> VerifiedAssertion:
    expectations = AuthenticationExpectations(**{
        "challenge": CHALLENGE, "rp_id": RP_ID, "allowed_origins": (ORIGIN,),
        "user_verification_required": False, **expected})
    return verify_authentication(credential, expected=expectations, stored=stored)


def refusal(verify: Callable[[], object]) -> VerificationError:
    with pytest.raises(VerificationError) as refused:
        verify()
    return refused.value


# --- tampering bytes --------------------------------------------------------------------------

def with_field(credential: CredentialResponse, name: str, value: bytes) -> CredentialResponse:
    return dataclasses.replace(credential, fields={**credential.fields, name: value})


def with_attestation(credential: CredentialResponse, **changes: Any) -> CredentialResponse:
    attestation = cbor2.loads(credential.fields["attestationObject"])
    return with_field(credential, "attestationObject", cbor2.dumps({**attestation, **changes}))


def auth_data_of(credential: CredentialResponse) -> bytes:
    return cbor2.loads(credential.fields["attestationObject"])["authData"]


def case_id(value: object) -> str:
    """Parametrize ids: the tamper knobs (or expectations) a case sets, then its code."""
    if isinstance(value, dict):
        return "+".join(value) or "as-offered"
    return str(value)


@pytest.fixture
def authenticator() -> SoftAuthenticator:
    return SoftAuthenticator()


@pytest.fixture
def passkey(authenticator: SoftAuthenticator) -> StoredPasskey:
    return enrolled(authenticator)


# --- registration (§7.1) ----------------------------------------------------------------------

@pytest.mark.parametrize("alg", sorted(COSE_ALGS))
def test_a_genuine_registration_yields_the_credential_to_store(alg: str) -> None:
    credential = created(SoftAuthenticator(alg=alg))
    verified = register(credential)
    assert verified.credential_id == credential.credential_id
    assert verified.algorithm == COSE_ALGS[alg]
    assert (verified.sign_count, verified.attestation_format) == (1, "none")
    assert (verified.user_verified, verified.backup_eligible, verified.backup_state) == \
        (True, False, False)
    assert verified.transports == ("internal",)


def test_a_packed_self_attestation_is_verified_and_its_format_recorded() -> None:
    assert register(created(SoftAuthenticator(attestation="packed"))).attestation_format == \
        "packed"


def test_a_packed_attestation_with_a_broken_signature_is_refused_as_invalid_attestation() -> None:
    credential = created(SoftAuthenticator(attestation="packed"), bad_signature=True)
    error = refusal(lambda: register(credential))
    assert (error.code, error.details["fmt"]) == ("invalid_attestation", "packed")


def test_a_backed_up_credential_is_stored_with_its_backup_flags() -> None:
    verified = register(created(SoftAuthenticator(backup_eligible=True, backup_state=True)))
    assert (verified.backup_eligible, verified.backup_state) == (True, True)


def test_without_required_verification_an_unverified_user_may_register() -> None:
    assert register(created(SoftAuthenticator(user_verified=False))).user_verified is False


@pytest.mark.parametrize(("tamper", "expected", "code"), [
    ({"type": "webauthn.get"}, {}, "client_data_type_mismatch"),
    ({"challenge": b64url(b"a challenge of another session")}, {}, "challenge_mismatch"),
    ({"cross_origin": True}, {}, "cross_origin_refused"),
    ({"top_origin": "https://embedding.test"}, {}, "cross_origin_refused"),
    ({"rp_id": "other.test"}, {}, "rp_id_mismatch"),
    ({"up": False}, {}, "user_presence_missing"),
    ({"uv": False}, {"user_verification_required": True}, "user_verification_missing"),
    ({"be": False, "bs": True}, {}, "invalid_backup_flags"),
    ({"credential_id": bytes(MAX_CREDENTIAL_ID_BYTES + 1)}, {}, "credential_id_too_long"),
], ids=case_id)
def test_a_registration_failing_one_check_is_refused_with_that_checks_code(
        tamper: dict[str, Any], expected: dict[str, Any], code: str) -> None:
    credential = created(**tamper)
    assert refusal(lambda: register(credential, **expected)).code == code


@pytest.mark.parametrize(("origin", "code"), [
    ("https://evil.test", "origin_mismatch"),
    ("http://example.test", "plain_http_origin"),
    ("http://localhost:8000", "origin_mismatch"),  # plain http is fine there, just not allowed
])
def test_a_registration_from_an_origin_not_allowed_is_refused_naming_the_origin(
        origin: str, code: str) -> None:
    error = refusal(lambda: register(created(origin=origin)))
    assert (error.code, error.details["origin"]) == (code, origin)


def test_an_origin_that_is_not_even_a_url_is_refused_not_crashed_on() -> None:
    error = refusal(lambda: register(created(origin="https://[::1")))
    assert (error.code, error.details["origin"]) == ("origin_mismatch", "https://[::1")


def test_a_top_origin_equal_to_the_origin_is_first_party_and_accepted() -> None:
    assert register(created(top_origin=ORIGIN)).sign_count == 1


def test_a_credential_id_of_the_maximum_length_is_accepted() -> None:
    credential_id = bytes(range(256)) * 3 + bytes(MAX_CREDENTIAL_ID_BYTES - 768)
    assert register(created(credential_id=credential_id)).credential_id == credential_id


def test_an_id_other_than_the_one_inside_the_attestation_is_refused_as_mismatch() -> None:
    credential = dataclasses.replace(created(), credential_id=b"some other credential id")
    assert refusal(lambda: register(credential)).code == "credential_id_mismatch"


def test_a_key_of_an_algorithm_the_server_did_not_offer_is_refused_naming_it() -> None:
    credential = created(SoftAuthenticator(alg="EdDSA"))
    error = refusal(lambda: register(credential, algorithms=(COSE_ALGS["ES256"],)))
    assert (error.code, error.details["algorithm"]) == ("algorithm_not_offered", -8)


def test_an_authenticator_of_another_attachment_than_asked_for_is_refused() -> None:
    credential = created(SoftAuthenticator(attachment="cross-platform"))
    assert refusal(lambda: register(credential, authenticator_attachment="platform")).code == \
        "authenticator_attachment_mismatch"


def test_a_response_that_reports_no_attachment_satisfies_any_asked_for() -> None:
    credential = dataclasses.replace(created(), authenticator_attachment=None)
    assert register(credential, authenticator_attachment="cross-platform").sign_count == 1


def test_a_public_key_that_is_not_a_usable_cose_key_is_refused_as_unsupported() -> None:
    credential = created()
    key_starts = AUTH_DATA_HEAD + 16 + 2 + len(credential.credential_id)
    incomplete_ec2_key = cbor2.dumps({1: 2, 3: -7})  # no curve, no coordinates
    tampered = with_attestation(
        credential, authData=auth_data_of(credential)[:key_starts] + incomplete_ec2_key)
    assert refusal(lambda: register(tampered)).code == "unsupported_public_key"


@pytest.mark.parametrize("attestation_object", [
    b"\xff not cbor at all", cbor2.dumps(["a", "list"]), cbor2.dumps({"fmt": "none"}),
], ids=["not-cbor", "not-a-map", "no-authData"])
def test_an_attestation_object_that_is_not_one_is_refused_as_invalid_attestation(
        attestation_object: bytes) -> None:
    credential = with_field(created(), "attestationObject", attestation_object)
    assert refusal(lambda: register(credential)).code == "invalid_attestation"


@pytest.mark.parametrize("fmt", ["bogus", 7], ids=["unknown-name", "not-a-string"])
def test_an_attestation_statement_format_webauthn_does_not_define_is_refused(fmt: Any) -> None:
    assert refusal(lambda: register(with_attestation(created(), fmt=fmt))).code == \
        "invalid_attestation"


def test_authenticator_data_without_attested_credential_data_is_refused() -> None:
    credential = created()
    head = bytearray(auth_data_of(credential)[:AUTH_DATA_HEAD])
    head[32] &= ~AT_FLAG
    assert refusal(lambda: register(with_attestation(credential, authData=bytes(head)))).code \
        == "invalid_attestation"


@pytest.mark.parametrize("client_data", [
    b"not json", b"\xff\xfe", b"[]", json.dumps({"type": "webauthn.create"}).encode(),
    json.dumps({"type": "webauthn.create", "challenge": b64url(CHALLENGE),
                "origin": 443}).encode(),
], ids=["not-json", "not-utf8", "not-an-object", "no-challenge-or-origin", "origin-not-text"])
def test_client_data_that_is_not_an_object_of_strings_is_refused_as_invalid(
        client_data: bytes) -> None:
    credential = with_field(created(), "clientDataJSON", client_data)
    assert refusal(lambda: register(credential)).code == "invalid_client_data"


def test_a_challenge_that_is_not_base64url_is_refused_as_a_malformed_field() -> None:
    """codec's 400 passes through: it is not a VerificationError (see the report)."""
    credential = created(challenge="*not base64*")
    with pytest.raises(BadRequest) as refused:
        register(credential)
    assert not isinstance(refused.value, VerificationError)
    assert refused.value.code == "malformed_base64url"


# --- authentication (§7.2) --------------------------------------------------------------------

def test_a_genuine_assertion_yields_the_state_to_store(authenticator: SoftAuthenticator,
                                                       passkey: StoredPasskey) -> None:
    verified = authenticate(asserted(authenticator, passkey), passkey,
                            allowed_credential_ids=(passkey.credential_id,),
                            user_handle_required=True, user_verification_required=True)
    assert verified == VerifiedAssertion(sign_count=2, backup_eligible=False,
                                         backup_state=False, user_verified=True)


@pytest.mark.parametrize("alg", sorted(COSE_ALGS))
def test_an_assertion_verifies_with_the_key_stored_at_registration(alg: str) -> None:
    authenticator = SoftAuthenticator(alg=alg)
    passkey = enrolled(authenticator)
    assert authenticate(asserted(authenticator, passkey), passkey).sign_count == 2


def test_a_synced_passkey_that_always_reports_zero_is_accepted_every_time() -> None:
    authenticator = SoftAuthenticator(counter="zero", backup_eligible=True, backup_state=True)
    passkey = enrolled(authenticator)
    for _ in range(2):
        verified = authenticate(asserted(authenticator, passkey), passkey)
        assert (verified.sign_count, verified.backup_state) == (0, True)


@pytest.mark.parametrize(("tamper", "expected", "code"), [
    ({"type": "webauthn.create"}, {}, "client_data_type_mismatch"),
    ({"challenge": b64url(b"a challenge of another session")}, {}, "challenge_mismatch"),
    ({"cross_origin": True}, {}, "cross_origin_refused"),
    ({"up": False}, {}, "user_presence_missing"),
    ({"uv": False}, {"user_verification_required": True}, "user_verification_missing"),
    ({"be": False, "bs": True}, {}, "invalid_backup_flags"),
    ({"bad_signature": True}, {}, "invalid_signature"),
    ({"user_handle": b"somebody else"}, {}, "user_handle_mismatch"),
    ({"user_handle": None}, {"user_handle_required": True}, "user_handle_missing"),
], ids=case_id)
def test_an_assertion_failing_one_check_is_refused_with_that_checks_code(
        authenticator: SoftAuthenticator, passkey: StoredPasskey, tamper: dict[str, Any],
        expected: dict[str, Any], code: str) -> None:
    credential = asserted(authenticator, passkey, **tamper)
    assert refusal(lambda: authenticate(credential, passkey, **expected)).code == code


def test_an_assertion_signed_for_another_rp_id_is_refused_with_rp_id_mismatch() -> None:
    authenticator = SoftAuthenticator()
    passkey = enrolled(authenticator)
    options = request_options(rp_id="other.test", challenge=CHALLENGE, timeout_ms=60_000,
                              user_verification="preferred", allow_credentials=[])
    answer = authenticator.get(options, origin=ORIGIN, credential_id=passkey.credential_id)
    credential = codec.read_credential(answer, ceremony="authentication")
    assert refusal(lambda: authenticate(credential, passkey)).code == "rp_id_mismatch"


def test_an_assertion_from_an_origin_not_allowed_is_refused(
        authenticator: SoftAuthenticator, passkey: StoredPasskey) -> None:
    credential = asserted(authenticator, passkey, origin="https://evil.test")
    assert refusal(lambda: authenticate(credential, passkey)).code == "origin_mismatch"


def test_without_a_required_user_handle_a_missing_one_is_fine(
        authenticator: SoftAuthenticator, passkey: StoredPasskey) -> None:
    credential = asserted(authenticator, passkey, user_handle=None)
    assert authenticate(credential, passkey).sign_count == 2


def test_a_credential_outside_allow_credentials_is_refused(
        authenticator: SoftAuthenticator, passkey: StoredPasskey) -> None:
    credential = asserted(authenticator, passkey)
    assert refusal(lambda: authenticate(credential, passkey,
                                        allowed_credential_ids=(b"another credential",))
                   ).code == "credential_not_allowed"


def test_an_assertion_signed_by_another_credentials_key_is_refused_as_invalid_signature(
        authenticator: SoftAuthenticator, passkey: StoredPasskey) -> None:
    impostor = enrolled(SoftAuthenticator())
    credential = asserted(authenticator, passkey)
    claimed = dataclasses.replace(passkey, public_key=impostor.public_key)
    assert refusal(lambda: authenticate(credential, claimed)).code == "invalid_signature"


@pytest.mark.parametrize("authenticator_data", [b"", bytes(AUTH_DATA_HEAD - 1)],
                         ids=["empty", "one-byte-short"])
def test_authenticator_data_too_short_to_parse_is_refused_as_malformed(
        authenticator: SoftAuthenticator, passkey: StoredPasskey,
        authenticator_data: bytes) -> None:
    credential = with_field(asserted(authenticator, passkey), "authenticatorData",
                            authenticator_data)
    assert refusal(lambda: authenticate(credential, passkey)).code == \
        "invalid_authenticator_data"


@pytest.mark.parametrize("stored_be", [True, False])
def test_a_credential_whose_backup_eligibility_changed_is_refused(stored_be: bool) -> None:
    authenticator = SoftAuthenticator(backup_eligible=stored_be)
    passkey = enrolled(authenticator)
    credential = asserted(authenticator, passkey, be=not stored_be, bs=False)
    error = refusal(lambda: authenticate(credential, passkey))
    assert (error.code, error.details["stored"]) == ("backup_eligibility_changed", stored_be)


@pytest.mark.parametrize(("stored_count", "presented_count"), [(5, 3), (5, 5), (5, 0)],
                         ids=["lower", "equal", "zero-after-nonzero"])
def test_a_signed_counter_not_above_the_stored_one_is_refused_as_possible_clone(
        authenticator: SoftAuthenticator, passkey: StoredPasskey, stored_count: int,
        presented_count: int) -> None:
    credential = asserted(authenticator, passkey, sign_count=presented_count)
    stored = dataclasses.replace(passkey, sign_count=stored_count)
    error = refusal(lambda: authenticate(credential, stored))
    assert error.code == "possible_clone"
    assert error.details == {"stored_sign_count": stored_count,
                             "presented_sign_count": presented_count}


def test_the_same_assertion_presented_twice_is_refused_the_second_time(
        authenticator: SoftAuthenticator, passkey: StoredPasskey) -> None:
    credential = asserted(authenticator, passkey)
    verified = authenticate(credential, passkey)
    updated = dataclasses.replace(passkey, sign_count=verified.sign_count)
    assert refusal(lambda: authenticate(credential, updated)).code == "possible_clone"


def test_an_unsigned_replay_with_a_low_counter_is_a_bad_signature_not_a_clone(
        authenticator: SoftAuthenticator, passkey: StoredPasskey) -> None:
    credential = asserted(authenticator, passkey, sign_count=0, bad_signature=True)
    stored = dataclasses.replace(passkey, sign_count=5)
    assert refusal(lambda: authenticate(credential, stored)).code == "invalid_signature"


def test_a_verification_error_is_a_400_with_the_checks_code() -> None:
    error = VerificationError("challenge_mismatch", "described", origin="x")
    assert isinstance(error, BadRequest)
    assert (error.status, error.code, error.details) == (400, "challenge_mismatch",
                                                         {"origin": "x"})


# --- the two wire shapes of a credential --------------------------------------------------------


def test_a_flow_steps_flat_inputs_read_as_the_same_credential_as_the_json_form() -> None:
    authenticator = SoftAuthenticator()
    stored = enrolled(authenticator)
    options = request_options(rp_id=RP_ID, challenge=CHALLENGE, timeout_ms=60_000,
                              user_verification="preferred",
                              allow_credentials=[KnownCredential(stored.credential_id)])
    answer = authenticator.get(options, origin=ORIGIN)
    flat = {"credentialId": answer["id"], **answer["response"]}
    from_json = codec.json_credential(answer)("authentication")
    from_flow = codec.flow_credential(flat)("authentication")
    assert (from_flow.credential_id, from_flow.fields) == (from_json.credential_id,
                                                           from_json.fields)
    assert authenticate(from_flow, stored).sign_count == authenticate(from_json, stored).sign_count


def test_a_flow_input_missing_is_named_as_the_flow_names_it() -> None:
    with pytest.raises(BadRequest) as missing:
        codec.flow_credential({"credentialId": "AAAA"})("registration")
    assert missing.value.code == "missing_field"
    assert "clientDataJSON" in missing.value.description
    assert "credential.response" not in missing.value.description
