"""What a sign-in answers about a credential it does not know (the answer the page turns into
the Signal API's signalUnknownCredential): only "this pair is not registered here", and
never anything that tells a registered credential, or an account with passkeys, apart."""

from __future__ import annotations

from typing import Any

import pytest

from identityctl.services.accounts.passkeys import admin as passkey_admin
from identityctl.store.directory import UserRecord
from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator, b64url, b64url_decode
from tests.support.flows import FlowClient, credential_inputs
from tests.support.oauth import register_client
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient


@pytest.fixture
def client(service: Service) -> PasskeyClient:
    return PasskeyClient(service)


def forged(flows: FlowClient, stranger: SoftAuthenticator, credential_id: bytes,
           user_handle: bytes | None) -> dict[str, str]:
    """A stranger's assertion presented under ``credential_id``: a key they do not hold."""
    credential = stranger.get(flows.additional("passkeyChallenge"), origin=flows.origin,
                              credential_id=stranger.credentials[0].credential_id,
                              user_handle=user_handle)
    credential["id"] = credential["rawId"] = b64url(credential_id)
    return credential_inputs(credential)


def answers(service: Service, stranger: SoftAuthenticator, user: UserRecord) -> list[str]:
    """What presenting the ids a sign-in by ``user``'s name offers answers: by name without
    and with a user handle, then usernameless."""
    flows = FlowClient(service, register_client("SPA").application_id)
    flows.start()
    flows.act("passkey", username=user.username)
    offered = b64url_decode(flows.additional("passkeyChallenge")["allowCredentials"][0]["id"])
    reasons = []
    for handle in (None, b"\x07" * 32):
        reasons.append(flows.act("passkey_verify",
                                 **forged(flows, stranger, offered, handle))["failureReason"])
    flows.act("use_password")
    flows.act("passkey", username="")
    reasons.append(flows.act("passkey_verify", **forged(
        flows, stranger, offered, b"\x07" * 32))["failureReason"])
    return reasons


def test_the_ids_offered_for_a_name_answer_alike_whoever_has_passkeys(
        client: PasskeyClient) -> None:
    """WebAuthn §14.6.2: a stranger gets a person's real ids, or decoys for a name without
    passkeys; presenting either with a forged assertion answers the same."""
    holder, nobody = client.new_user(), client.new_user()
    client.enrolled(holder, SoftAuthenticator())
    stranger = SoftAuthenticator()
    stranger.create(client.begin_registration(nobody)[0], origin=client.origin)
    expected = ["invalid_signature", "user_handle_mismatch", "unknown_credential"]
    assert answers(client.service, stranger, holder) == expected
    assert answers(client.service, stranger, nobody) == expected


def test_a_deleted_passkey_and_one_never_seen_get_the_same_answer(client: PasskeyClient) -> None:
    person, device = client.new_user(), SoftAuthenticator()
    credential_id = client.enrolled(person, device)["CredentialID"]
    never_registered = SoftAuthenticator()
    never_registered.create(client.begin_registration(person)[0], origin=client.origin)
    passkey_admin.delete_credential(person.id, credential_id, origin=TEST_ORIGIN)

    def refused(authenticator: SoftAuthenticator) -> dict[str, Any]:
        answer = client.sign_in(authenticator)
        assert answer.status_code == 400
        return answer.json()

    deleted, unknown = refused(device), refused(never_registered)
    assert deleted == unknown
    assert deleted["code"] == "unknown_credential"
    assert person.username not in str(deleted) and person.id not in str(deleted)
