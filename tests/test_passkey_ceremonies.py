"""Passkey registration and sign-in over HTTP with a software authenticator (real keys, CBOR)."""

from __future__ import annotations

import re
from datetime import date

import pytest

from identityctl.services.tokens import TokenService
from identityctl.store import audit
from identityctl.store import passkeys as passkey_store
from tests.conftest import Service
from tests.support.authenticator import COSE_ALGS, SoftAuthenticator, b64url
from tests.support.passkeys import PasskeyClient, assert_error

RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture
def client(service: Service) -> PasskeyClient:
    return PasskeyClient(service)


def test_creation_options_are_webauthn_json_for_the_user(client: PasskeyClient) -> None:
    user = client.new_user(given_name="Ada", family_name="Lovelace")
    options, session_token = client.begin_registration(
        user, relyingPartyName="Example Corp",
        authenticatorSelection={"userVerification": "required",
                                "authenticatorAttachment": "platform", "residentKey": "required"},
        attestation="direct")

    assert options["rp"] == {"id": client.rp_id, "name": "Example Corp"}
    # user.id is the stable WebAuthn user handle, never the username or the user id.
    assert options["user"] == {"id": user.user_handle, "name": user.username,
                               "displayName": "Ada Lovelace"}
    assert [p["alg"] for p in options["pubKeyCredParams"]] == [-7, -8, -257]
    assert options["authenticatorSelection"] == {
        "userVerification": "required", "authenticatorAttachment": "platform",
        "residentKey": "required", "requireResidentKey": True}
    assert options["attestation"] == "direct"
    assert options["excludeCredentials"] == []
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", options["challenge"])  # 32 bytes, Base64URL
    assert len(session_token) >= 43  # >= 256 bits


def test_relying_party_name_and_selection_default_to_the_configuration(
        client: PasskeyClient) -> None:
    options, _ = client.begin_registration(client.new_user())
    passkey = client.service.config.passkey
    assert options["rp"]["name"] == passkey.rp_name
    assert options["authenticatorSelection"]["userVerification"] == passkey.user_verification
    assert options["attestation"] == passkey.attestation


@pytest.mark.parametrize(("alg", "attestation"), [
    ("ES256", "none"), ("ES256", "packed"), ("EdDSA", "none"), ("EdDSA", "packed"),
    ("RS256", "packed"),
])
def test_register_then_sign_in_with_the_user_id(client: PasskeyClient, alg: str,
                                                attestation: str) -> None:
    user = client.new_user()
    authenticator = SoftAuthenticator(alg=alg, attestation=attestation,
                                      transports=("internal", "hybrid"))

    finished = client.register(user, authenticator, name="Laptop")

    assert finished.status_code == 201, finished.text
    registered = finished.json()
    assert set(registered) == {"CredentialID", "CredentialName", "CreatedAt"}
    assert registered["CredentialID"] == b64url(authenticator.credentials[0].credential_id)
    assert registered["CredentialName"] == "Laptop"
    assert RFC3339_UTC.match(registered["CreatedAt"])
    stored = passkey_store.find_credential(registered["CredentialID"])
    assert stored is not None and stored.user_id == user.id
    assert (stored.algorithm, stored.attestation_format) == (COSE_ALGS[alg], attestation)
    assert stored.transports == ("internal", "hybrid") and stored.sign_count == 1

    options, session_token = client.begin_sign_in(user.id)
    assert options["allowCredentials"] == [{"id": registered["CredentialID"], "type": "public-key",
                                            "transports": ["internal", "hybrid"]}]
    signed_in = client.auth_finish(authenticator.get(options, origin=client.origin),
                                   session_token)

    assert signed_in.status_code == 200, signed_in.text
    result = signed_in.json()
    assert (result["id"], result["type"], result["ouId"]) == (user.id, "person", user.ou_id)
    claims = TokenService(client.service.config.issuer).verify_assertion(
        result["assertion"])
    assert claims["sub"] == user.id and claims["amr"] == ["passkey", "hwk"]
    assert {"iat", "exp", "jti", "auth_time"} <= claims.keys()
    assert claims["exp"] - claims["iat"] == client.service.config.oauth.assertion_ttl
    after = passkey_store.find_credential(registered["CredentialID"])
    assert after.sign_count == 2 and after.last_used_at is not None


def test_usernameless_sign_in_finds_the_user_by_user_handle(client: PasskeyClient) -> None:
    user = client.new_user()
    authenticator = SoftAuthenticator(backup_eligible=True, backup_state=True, counter="zero")
    client.enrolled(user, authenticator)

    for blank in (None, "", "   "):
        started = client.auth_start(blank)
        assert started.status_code == 200, started.text
        options = started.json()["publicKeyCredentialRequestOptions"]
        assert options["allowCredentials"] == []
        assert options["userVerification"] == "required"

    signed_in = client.sign_in(authenticator)

    assert signed_in.status_code == 200, signed_in.text
    assert signed_in.json()["id"] == user.id
    # A synced passkey (backup eligible) is not a hardware-bound key.
    claims = TokenService(client.service.config.issuer).verify_assertion(
        signed_in.json()["assertion"])
    assert claims["amr"] == ["passkey"]


def test_always_zero_counters_of_synced_passkeys_are_accepted(client: PasskeyClient) -> None:
    user = client.new_user()
    authenticator = SoftAuthenticator(counter="zero", backup_eligible=True)
    client.enrolled(user, authenticator)
    for _ in range(3):
        assert client.sign_in(authenticator, user.id).status_code == 200


def test_backup_state_is_updated_when_the_passkey_gets_synced(client: PasskeyClient) -> None:
    user = client.new_user()
    authenticator = SoftAuthenticator(backup_eligible=True, backup_state=False)
    credential_id = client.enrolled(user, authenticator)["CredentialID"]
    assert passkey_store.find_credential(credential_id).backup_state is False

    assert client.sign_in(authenticator, user.id, bs=True).status_code == 200

    assert passkey_store.find_credential(credential_id).backup_state is True


def test_skip_assertion_returns_the_user_without_a_token(client: PasskeyClient) -> None:
    user = client.new_user()
    authenticator = SoftAuthenticator()
    client.enrolled(user, authenticator)
    options, session_token = client.begin_sign_in(user.id)

    signed_in = client.auth_finish(authenticator.get(options, origin=client.origin),
                                   session_token, skip_assertion=True)

    assert signed_in.status_code == 200
    assert signed_in.json() == {"id": user.id, "type": "person", "ouId": user.ou_id}


def test_second_passkey_and_exclude_credentials_on_re_registration(
        client: PasskeyClient) -> None:
    user = client.new_user()
    laptop, phone = SoftAuthenticator(), SoftAuthenticator(alg="EdDSA")
    first = client.enrolled(user, laptop)["CredentialID"]

    options, session_token = client.begin_registration(user)
    assert [c["id"] for c in options["excludeCredentials"]] == [first]
    second = client.register_finish(phone.create(options, origin=client.origin), session_token)
    assert second.status_code == 201, second.text

    options, _ = client.begin_sign_in(user.id)
    assert {c["id"] for c in options["allowCredentials"]} == {first,
                                                             second.json()["CredentialID"]}
    for authenticator in (laptop, phone):
        assert client.sign_in(authenticator, user.id).json()["id"] == user.id


def test_default_credential_name_carries_the_date(client: PasskeyClient) -> None:
    registered = client.enrolled(client.new_user(), SoftAuthenticator())
    day = date.fromisoformat(registered["CreatedAt"][:10])  # as English writes a day
    assert registered["CredentialName"] == f"Passkey from {day:%b} {day.day}, {day.year}"


def test_success_and_failure_are_audited(client: PasskeyClient) -> None:
    user = client.new_user()
    authenticator = SoftAuthenticator()
    client.enrolled(user, authenticator)
    assert_error(client.sign_in(authenticator, user.id, bad_signature=True), 400,
                 "invalid_signature")
    client.sign_in(authenticator, user.id)

    events = [(e["event"], e["outcome"], e["details"].get("code"))
              for e in audit.events(user_id=user.id)]
    assert events[:3] == [("passkey.authenticate", "success", None),
                          ("passkey.authenticate", "failure", "invalid_signature"),
                          ("passkey.register", "success", None)]
