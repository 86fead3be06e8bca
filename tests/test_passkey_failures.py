"""Every named failure of a passkey ceremony: its status, its code, and that it changes nothing.

Each WebAuthn check (§7.1 registration, §7.2 authentication) is violated alone, with the
software authenticator's tamper knobs, against the real server.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any

import pytest

from identityctl.store import audit
from identityctl.store import passkeys as passkey_store
from identityctl.store.models import CeremonySession
from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator, b64url, b64url_decode
from tests.support.passkeys import PasskeyClient, assert_error, second_instance


@pytest.fixture
def client(service: Service) -> PasskeyClient:
    return PasskeyClient(service)


def _expire_every_session() -> None:
    """Move the clock of stored ceremonies past their expiry."""
    CeremonySession.update(expires_at=CeremonySession.created_at - 1).execute()


# --- start calls --------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "status", "code", "field"), [
    ({"relyingPartyId": "localhost"}, 400, "missing_field", "userId"),
    ({"userId": "   ", "relyingPartyId": "localhost"}, 400, "missing_field", "userId"),
    ({"userId": "{user}"}, 400, "missing_field", "relyingPartyId"),
    ({"userId": "{user}", "relyingPartyId": " "}, 400, "missing_field", "relyingPartyId"),
    ({"userId": "{user}", "relyingPartyId": "evil.test"}, 400, "relying_party_mismatch",
     "relyingPartyId"),
    ({"userId": 7, "relyingPartyId": "localhost"}, 400, "invalid_field", "userId"),
    ({"userId": "{user}", "relyingPartyId": "localhost", "attestation": "bogus"}, 400,
     "invalid_field", "attestation"),
    ({"userId": "{user}", "relyingPartyId": "localhost",
      "authenticatorSelection": {"userVerification": "always"}}, 400, "invalid_field",
     "authenticatorSelection.userVerification"),
    ({"userId": "{user}", "relyingPartyId": "localhost",
      "authenticatorSelection": {"authenticatorAttachment": "usb"}}, 400, "invalid_field",
     "authenticatorSelection.authenticatorAttachment"),
    ({"userId": "{user}", "relyingPartyId": "localhost",
      "authenticatorSelection": {"residentKey": True}}, 400, "invalid_field",
     "authenticatorSelection.residentKey"),
    ({"userId": "{user}", "relyingPartyId": "localhost", "authenticatorSelection": "x"}, 400,
     "invalid_field", "authenticatorSelection"),
    ({"userId": "no-such-user", "relyingPartyId": "localhost"}, 404, "user_not_found", ""),
])
def test_register_start_refuses(client: PasskeyClient, body: dict[str, Any], status: int,
                                code: str, field: str) -> None:
    user = client.new_user()
    body = {key: user.id if value == "{user}" else value for key, value in body.items()}
    started = client.service.post("/register/passkey/start", body,
                                  headers={"Authorization": f"Bearer {client.admin_token()}"})
    error = assert_error(started, status, code)
    assert field in error["description"]


def test_auth_start_refuses_unknown_users_users_without_passkeys_and_bad_rp_ids(
        client: PasskeyClient) -> None:
    assert_error(client.auth_start("no-such-user"), 404, "user_not_found")
    assert_error(client.auth_start(client.new_user().id), 404, "no_passkeys")
    assert_error(client.service.post("/auth/passkey/start", {}), 400, "missing_field")
    assert_error(client.auth_start(relyingPartyId=""), 400, "missing_field")
    assert_error(client.auth_start(relyingPartyId="example.com"), 400, "relying_party_mismatch")


# --- session tokens -----------------------------------------------------------------------

def test_unknown_and_reused_session_tokens(client: PasskeyClient) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    options, session_token = client.begin_registration(user)
    credential = authenticator.create(options, origin=client.origin)

    assert_error(client.register_finish(credential, secrets.token_urlsafe(32)), 400,
                 "unknown_session_token")
    assert client.register_finish(credential, session_token).status_code == 201
    assert_error(client.register_finish(credential, session_token), 400, "unknown_session_token")

    options, session_token = client.begin_sign_in(user.id)
    assertion = authenticator.get(options, origin=client.origin)
    assert client.auth_finish(assertion, session_token).status_code == 200
    assert_error(client.auth_finish(assertion, session_token), 400, "unknown_session_token")


def test_a_token_of_one_ceremony_does_not_finish_the_other(client: PasskeyClient) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    client.enrolled(user, authenticator)
    request_options, auth_token = client.begin_sign_in(user.id)
    creation_options, registration_token = client.begin_registration(user)

    assert_error(client.auth_finish(authenticator.get(request_options, origin=client.origin),
                                    registration_token), 400, "unknown_session_token")
    assert_error(client.register_finish(authenticator.create(creation_options,
                                                             origin=client.origin),
                                        auth_token), 400, "unknown_session_token")


def test_stale_session_tokens_after_a_newer_start(client: PasskeyClient) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    first_options, first_token = client.begin_registration(user)
    second_options, second_token = client.begin_registration(user)

    stale = client.register_finish(authenticator.create(first_options, origin=client.origin),
                                   first_token)
    assert_error(stale, 400, "stale_session_token")
    assert client.register_finish(authenticator.create(second_options, origin=client.origin),
                                  second_token).status_code == 201

    first_options, first_token = client.begin_sign_in(user.id)
    second_options, second_token = client.begin_sign_in(user.id)
    assert_error(client.auth_finish(authenticator.get(first_options, origin=client.origin),
                                    first_token), 400, "stale_session_token")
    assert client.auth_finish(authenticator.get(second_options, origin=client.origin),
                              second_token).status_code == 200


def test_expired_session_tokens(client: PasskeyClient) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    options, session_token = client.begin_registration(user)
    _expire_every_session()
    assert_error(client.register_finish(authenticator.create(options, origin=client.origin),
                                        session_token), 400, "expired_session_token")

    client.enrolled(user, authenticator)
    options, session_token = client.begin_sign_in(user.id)
    _expire_every_session()
    assert_error(client.auth_finish(authenticator.get(options, origin=client.origin),
                                    session_token), 400, "expired_session_token")


# --- each §7.1 / §7.2 check violated alone --------------------------------------------------

CLIENT_AND_AUTHENTICATOR_DATA = [
    pytest.param({"challenge": b64url(b"not the challenge")}, "challenge_mismatch",
                 id="challenge"),
    pytest.param({"cross_origin": True}, "cross_origin_refused", id="crossOrigin"),
    pytest.param({"top_origin": "https://evil.test"}, "cross_origin_refused", id="topOrigin"),
    pytest.param({"rp_id": "evil.test"}, "rp_id_mismatch", id="rpIdHash"),
    pytest.param({"up": False}, "user_presence_missing", id="UP"),
    pytest.param({"bs": True, "be": False}, "invalid_backup_flags", id="BS-without-BE"),
]


@pytest.mark.parametrize(("tamper", "code"), [
    *CLIENT_AND_AUTHENTICATOR_DATA,
    pytest.param({"type": "webauthn.get"}, "client_data_type_mismatch", id="type"),
])
def test_registration_refuses(client: PasskeyClient, tamper: dict[str, Any], code: str) -> None:
    user = client.new_user()
    assert_error(client.register(user, SoftAuthenticator(), **tamper), 400, code)
    assert passkey_store.list_credentials(user.id) == []


@pytest.mark.parametrize(("tamper", "code"), [
    *CLIENT_AND_AUTHENTICATOR_DATA,
    pytest.param({"type": "webauthn.create"}, "client_data_type_mismatch", id="type"),
    pytest.param({"bad_signature": True}, "invalid_signature", id="signature"),
    pytest.param({"be": True, "bs": True}, "backup_eligibility_changed", id="BE-changed"),
])
def test_authentication_refuses(client: PasskeyClient, tamper: dict[str, Any],
                                code: str) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    credential_id = client.enrolled(user, authenticator)["CredentialID"]
    assert_error(client.sign_in(authenticator, user.id, **tamper), 400, code)
    assert passkey_store.find_credential(credential_id).last_used_at is None


@pytest.mark.parametrize(("origin", "code"), [
    ("https://evil.test", "origin_mismatch"),
    ("http://localhost:1", "origin_mismatch"),
    ("http://login.example.com", "plain_http_origin"),
])
def test_origins_outside_the_allow_list_are_refused(client: PasskeyClient, origin: str,
                                                    code: str) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    assert_error(PasskeyClient(client.service, origin=origin).register(user, authenticator),
                 400, code)
    client.enrolled(user, authenticator)
    stranger = PasskeyClient(client.service, origin=origin)
    assert_error(stranger.sign_in(authenticator, user.id), 400, code)


def test_user_verification_when_required(client: PasskeyClient) -> None:
    user = client.new_user()
    careless = SoftAuthenticator(user_verified=False)
    options, session_token = client.begin_registration(
        user, authenticatorSelection={"userVerification": "required"})
    assert_error(client.register_finish(careless.create(options, origin=client.origin),
                                        session_token), 400, "user_verification_missing")

    # UV is optional with the default "preferred", but never for usernameless sign-in.
    client.enrolled(user, careless)
    assert client.sign_in(careless, user.id).status_code == 200
    assert_error(client.sign_in(careless), 400, "user_verification_missing")


def test_an_attachment_other_than_the_one_asked_for_is_refused(client: PasskeyClient) -> None:
    user = client.new_user()
    options, session_token = client.begin_registration(
        user, authenticatorSelection={"authenticatorAttachment": "cross-platform"})
    laptop = SoftAuthenticator(attachment="platform")
    assert_error(client.register_finish(laptop.create(options, origin=client.origin),
                                        session_token), 400, "authenticator_attachment_mismatch")
    security_key = SoftAuthenticator(attachment="cross-platform")
    assert client.register_finish(security_key.create(options, origin=client.origin),
                                  session_token).status_code == 201


def test_bad_packed_attestation_signature_is_refused(client: PasskeyClient) -> None:
    authenticator = SoftAuthenticator(attestation="packed")
    assert_error(client.register(client.new_user(), authenticator, bad_signature=True), 400,
                 "invalid_attestation")


def test_credential_ids_over_1023_bytes_are_refused(client: PasskeyClient) -> None:
    authenticator = SoftAuthenticator()
    assert_error(client.register(client.new_user(), authenticator, credential_id=bytes(1024)),
                 400, "credential_id_too_long")
    assert client.register(client.new_user(), authenticator,
                           credential_id=b"\x01" * 1023).status_code == 201


def test_a_credential_registered_to_anyone_cannot_be_registered_again(
        client: PasskeyClient) -> None:
    taken = b64url_decode(client.enrolled(client.new_user(), SoftAuthenticator())["CredentialID"])
    victim = client.new_user()
    conflict = client.register(victim, SoftAuthenticator(), credential_id=taken)
    assert_error(conflict, 409, "credential_already_registered")
    assert passkey_store.list_credentials(victim.id) == []


def test_the_sent_credential_id_must_be_the_attested_one(client: PasskeyClient) -> None:
    user = client.new_user()
    options, session_token = client.begin_registration(user)
    credential = SoftAuthenticator().create(options, origin=client.origin)
    other = b64url(secrets.token_bytes(32))
    credential.update(id=other, rawId=other)
    assert_error(client.register_finish(credential, session_token), 400,
                 "credential_id_mismatch")
    credential["rawId"] = b64url(b"something else")
    assert_error(client.register_finish(credential, session_token), 400,
                 "credential_id_mismatch")


@pytest.mark.parametrize("fmt", [b"", 7, None, "made-up"])
def test_an_attestation_format_that_is_not_one_is_refused(client: PasskeyClient,
                                                          fmt: Any) -> None:
    """Found by tests/test_input_fuzz.py: py_webauthn passes any CBOR value through as fmt."""
    import cbor2

    options, session_token = client.begin_registration(client.new_user())
    credential = SoftAuthenticator().create(options, origin=client.origin)
    attestation = cbor2.loads(b64url_decode(credential["response"]["attestationObject"]))
    attestation["fmt"] = fmt
    credential["response"]["attestationObject"] = b64url(cbor2.dumps(attestation))
    assert_error(client.register_finish(credential, session_token), 400, "invalid_attestation")


def test_unknown_credentials_are_refused(client: PasskeyClient) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    client.enrolled(user, authenticator)
    # A credential created on the authenticator but never registered here.
    options, _ = client.begin_registration(user)
    authenticator.create(options, origin=client.origin)

    assert_error(client.sign_in(authenticator), 400, "unknown_credential")


def test_a_credential_of_another_user_is_refused_as_one_not_offered(
        client: PasskeyClient) -> None:
    """Nothing says that the id is registered, to someone else: it was not offered."""
    alice, mallory = client.new_user(), client.new_user()
    alice_key, mallory_key = SoftAuthenticator(), SoftAuthenticator()
    client.enrolled(alice, alice_key)
    client.enrolled(mallory, mallory_key)

    options, session_token = client.begin_sign_in(alice.id)
    forged = mallory_key.get(options, origin=client.origin,
                             credential_id=mallory_key.credentials[0].credential_id)
    assert_error(client.auth_finish(forged, session_token), 400, "credential_not_allowed")


def test_a_credential_outside_allow_credentials_is_refused(client: PasskeyClient) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    client.enrolled(user, authenticator)
    options, session_token = client.begin_sign_in(user.id)
    client.enrolled(user, authenticator)  # registered after the options were issued

    newest = authenticator.credentials[-1].credential_id
    assert_error(client.auth_finish(
        authenticator.get(options, origin=client.origin, credential_id=newest), session_token),
        400, "credential_not_allowed")


def test_usernameless_sign_in_needs_the_owners_user_handle(client: PasskeyClient) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    client.enrolled(user, authenticator)
    other = client.new_user()

    assert_error(client.sign_in(authenticator, user_handle=None), 400, "user_handle_missing")
    # Usernameless, what is registered is the pair: under another's handle it is unknown.
    assert_error(client.sign_in(authenticator, user_handle=b64url_decode(other.user_handle)),
                 400, "unknown_credential")
    # With a user id the handle is optional, but when sent it must still name the owner.
    assert client.sign_in(authenticator, user.id, user_handle=None).status_code == 200
    assert_error(client.sign_in(authenticator, user.id,
                                user_handle=b64url_decode(other.user_handle)),
                 400, "user_handle_mismatch")


def test_a_counter_that_does_not_move_forward_is_a_possible_clone(client: PasskeyClient) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    credential_id = client.enrolled(user, authenticator)["CredentialID"]
    assert client.sign_in(authenticator, user.id).status_code == 200  # stored counter: 2

    for presented in (2, 1, 0):
        assert_error(client.sign_in(authenticator, user.id, sign_count=presented), 400,
                     "possible_clone")

    assert passkey_store.find_credential(credential_id).sign_count == 2
    clone_events = [e for e in audit.events(user_id=user.id, event="passkey.authenticate")
                    if e["details"].get("code") == "possible_clone"]
    assert len(clone_events) == 3 and clone_events[0]["outcome"] == "denied"
    assert clone_events[0]["details"]["stored_sign_count"] == 2
    assert clone_events[0]["details"]["presented_sign_count"] == 0


def test_a_failed_finish_writes_only_an_audit_event(client: PasskeyClient) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    options, session_token = client.begin_registration(user)
    before = len(audit.events(limit=10_000))

    failed = client.register_finish(authenticator.create(options, origin=client.origin, up=False),
                                    session_token)

    assert_error(failed, 400, "user_presence_missing")
    assert passkey_store.list_credentials(user.id) == []
    assert len(audit.events(limit=10_000)) == before + 1
    # The session was not burnt: the genuine response still finishes it.
    retried = client.register_finish(authenticator.create(options, origin=client.origin),
                                     session_token)
    assert retried.status_code == 201


# --- shape of the request -------------------------------------------------------------------

def test_binary_fields_may_be_padded_or_standard_base64(client: PasskeyClient) -> None:
    def standard(value: str) -> str:
        return base64.b64encode(b64url_decode(value)).decode()

    user, authenticator = client.new_user(), SoftAuthenticator()
    options, session_token = client.begin_registration(user)
    credential = authenticator.create(options, origin=client.origin)
    response = credential["response"]
    response["clientDataJSON"] = standard(response["clientDataJSON"])
    response["attestationObject"] += "=" * (-len(response["attestationObject"]) % 4)
    assert client.register_finish(credential, session_token).status_code == 201

    options, session_token = client.begin_sign_in(user.id)
    assertion = authenticator.get(options, origin=client.origin)
    assertion["response"]["signature"] = standard(assertion["response"]["signature"])
    del assertion["rawId"]  # the spec's request names only id
    assert client.auth_finish(assertion, session_token).status_code == 200


@pytest.mark.parametrize(("change", "code", "field"), [
    ({"response": {"clientDataJSON": "%%%", "attestationObject": "AA"}}, "malformed_base64url",
     "publicKeyCredential.response.clientDataJSON"),
    ({"response": {"clientDataJSON": "e30"}}, "missing_field",
     "publicKeyCredential.response.attestationObject"),
    ({"response": "text"}, "invalid_field", "publicKeyCredential.response"),
    ({"id": ""}, "missing_field", "publicKeyCredential.id"),
    ({"id": "A"}, "malformed_base64url", "publicKeyCredential.id"),
    ({"type": "password"}, "invalid_credential_type", "publicKeyCredential.type"),
    ({"type": None}, "missing_field", "publicKeyCredential.type"),
    ({"response": {"clientDataJSON": "e30", "attestationObject": "AA"}}, "invalid_client_data",
     "clientDataJSON"),
])
def test_malformed_registration_credentials_are_named(client: PasskeyClient,
                                                      change: dict[str, Any], code: str,
                                                      field: str) -> None:
    options, session_token = client.begin_registration(client.new_user())
    credential = {**SoftAuthenticator().create(options, origin=client.origin), **change}
    error = assert_error(client.register_finish(credential, session_token), 400, code)
    assert field in error["description"]


def test_finish_bodies_need_a_credential_and_a_session_token(client: PasskeyClient) -> None:
    _, session_token = client.begin_registration(client.new_user())
    assert_error(client.register_finish(None, session_token), 400, "missing_field")
    assert_error(client.register_finish({"id": "AA"}, None), 400, "missing_field")
    assert_error(client.auth_finish({"id": "AA"}, ""), 400, "missing_field")
    assert_error(client.auth_finish([], "x"), 400, "invalid_field")
    assert_error(client.service.post("/auth/passkey/finish", {
        "publicKeyCredential": {}, "sessionToken": "x", "skipAssertion": "yes"}),
        400, "invalid_field")


def test_an_algorithm_the_server_did_not_offer_is_refused(client: PasskeyClient) -> None:
    """The browser's policy is not trusted: the server checks what it offered itself."""
    def offer_es256_only(config_text: str) -> str:
        return config_text.replace('algorithms = ["ES256", "EdDSA", "RS256"]',
                                   'algorithms = ["ES256"]')

    with second_instance(client.service, offer_es256_only) as strict_instance:
        strict = PasskeyClient(strict_instance)
        user = strict.new_user()
        options, session_token = strict.begin_registration(user)
        assert [p["alg"] for p in options["pubKeyCredParams"]] == [-7]

        ed25519 = SoftAuthenticator(alg="EdDSA")
        refused = strict.register_finish(ed25519.create(options, origin=strict.origin),
                                         session_token)
        assert_error(refused, 400, "algorithm_not_offered")
        assert strict.register(user, SoftAuthenticator(alg="ES256")).status_code == 201
