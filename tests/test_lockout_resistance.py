"""The attacks of a security review, performed over HTTP from several loopback addresses,
and what now answers them (docs/security.md, "Throttling" and "Ceremonies").

- A stranger who knows a username sent wrong passwords, or passkey steps with a made-up
  credential, and locked the user out for everybody; wrong secrets for a public client id
  locked the client's token endpoint for all its users.
- One start for a user cancelled that user's sign-in in progress (stale_session_token).
- The named passkey step told who has an account, and their credential ids.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from identityctl.services.admin import bootstrap
from identityctl.services.directory import users as directory
from tests.conftest import Service, start_service
from tests.support.authenticator import SoftAuthenticator, b64url_decode
from tests.support.flows import FlowClient, credential_inputs
from tests.support.oauth import register_client
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient, assert_error
from tests.test_flow_execution import PASSWORD, make_application, new_username, sign_up
from tests.test_oauth_throttle import session_from, token_request, works

ATTACKER, VICTIM = "127.0.0.2", "127.0.0.3"


def from_address(service: Service, address: str) -> Service:
    """The same service, reached from ``address`` (127.0.0.0/8 is all loopback)."""
    return dataclasses.replace(service, http=session_from(address),
                               base_url=service.base_url.replace("localhost", "127.0.0.1"))


def flow_from(service: Service, address: str, application_id: str,
              authenticator: SoftAuthenticator | None = None) -> FlowClient:
    return FlowClient(from_address(service, address), application_id,
                      **({"authenticator": authenticator} if authenticator else {}))


def password_attempt(client: FlowClient, username: str, password: str) -> dict[str, Any]:
    client.start()
    response = client.call({"executionId": client.execution_id, "action": "password",
                            "inputs": {"username": username, "password": password}})
    return {"status": response.status_code, **response.json()}


@pytest.fixture
def app(service: Service) -> dict[str, Any]:
    return make_application()


# --- a) and d): failures from one address refuse that address only -----------------------


def test_wrong_passwords_from_one_address_do_not_lock_the_user_out_elsewhere(
        service: Service, app: dict[str, Any]) -> None:
    username = new_username()
    directory.create_user(username=username, password=PASSWORD, origin=TEST_ORIGIN)
    attacker = flow_from(service, ATTACKER, app["id"])
    answers = [password_attempt(attacker, username.upper(), "wrong")["status"]
               for _ in range(service.config.security.max_failures_per_account + 2)]
    assert answers[-1] == 429 and 429 not in answers[:10]

    victim = flow_from(service, VICTIM, app["id"])
    assert password_attempt(victim, username, PASSWORD)["flowStatus"] == "COMPLETE"


def test_one_address_spraying_many_accounts_is_stopped(service: Service,
                                                       app: dict[str, Any]) -> None:
    attacker = flow_from(service, ATTACKER, app["id"])
    limit = service.config.security.max_failures_per_address
    answers = [password_attempt(attacker, f"user-{n}", "wrong")["status"]
               for n in range(limit + 1)]
    assert answers[:limit] == [200] * limit and answers[limit] == 429


# --- b): a passkey that is not the user's guesses nothing about the user -------------------


def test_made_up_credentials_at_a_username_count_against_the_address_only(
        service: Service, app: dict[str, Any]) -> None:
    owner = flow_from(service, VICTIM, app["id"])
    username = new_username()
    sign_up(owner, username)
    stranger_key = SoftAuthenticator()
    stranger_key.create({"rp": {"id": service.config.passkey.rp_id, "name": "x"},
                         "user": {"id": "AAAA", "name": "x", "displayName": "x"},
                         "challenge": "AAAA", "pubKeyCredParams": [{"type": "public-key",
                                                                     "alg": -7}]},
                        origin=owner.origin)
    limit = service.config.security.max_failures_per_account
    for address in ("127.0.0.4", "127.0.0.5"):  # two addresses, each past the account limit
        attacker = flow_from(service, address, app["id"], authenticator=stranger_key)
        for _ in range(limit + 1):
            attacker.start()
            attacker.act("passkey", username=username)
            step = attacker.use_passkey(credential_id=stranger_key.credentials[0].credential_id)
            assert step["flowStatus"] == "INCOMPLETE"
    owner.start()
    owner.act("passkey", username=username)
    assert owner.use_passkey()["flowStatus"] == "COMPLETE"
    owner.start()
    assert password_attempt(owner, username, PASSWORD)["flowStatus"] == "COMPLETE"


# --- a) for clients: the right secret from another address keeps working ------------------


def test_wrong_client_secrets_from_one_address_do_not_lock_the_client_out(
        service: Service) -> None:
    client = register_client("M2M")
    for _ in range(service.config.security.max_failures_per_account + 1):
        token_request(service, client.client_id, "wrong", address=ATTACKER)
    assert token_request(service, client.client_id, client.secret or "",
                         address=ATTACKER).status_code == 429
    assert works(service, client, address=VICTIM)


# --- ceremonies a stranger cannot cancel --------------------------------------------------


def test_a_strangers_start_does_not_cancel_a_sign_in_in_progress(
        service: Service, app: dict[str, Any]) -> None:
    owner = flow_from(service, VICTIM, app["id"])
    username = new_username()
    sign_up(owner, username)
    owner.start()
    owner.act("passkey", username=username)
    # A stranger starts sign-ins for the same user: another execution, the atomic API.
    stranger = flow_from(service, ATTACKER, app["id"])
    stranger.start()
    stranger.act("passkey", username=username)
    user = directory.require_user(username)
    api = PasskeyClient(from_address(service, ATTACKER))
    assert api.auth_start(user.id).status_code == 200
    assert owner.use_passkey()["flowStatus"] == "COMPLETE"


def test_the_same_callers_newer_start_still_makes_the_older_token_stale(
        service: Service) -> None:
    client = PasskeyClient(from_address(service, VICTIM))
    user, key = client.new_user(), SoftAuthenticator()
    client.enrolled(user, key)
    first_options, first_token = client.begin_sign_in(user.id)
    client.begin_sign_in(user.id)
    stale = client.auth_finish(key.get(first_options, origin=client.origin), first_token)
    assert_error(stale, 400, "stale_session_token")


@pytest.fixture
def few_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    """A service that allows 20 ceremony starts per address and failure window."""
    render = bootstrap.render_config
    monkeypatch.setattr(bootstrap, "render_config", lambda **kwargs: render(**kwargs).replace(
        "max_starts_per_address = 1000", "max_starts_per_address = 20"))
    running, stop = start_service(tmp_path)
    assert running.config.security.max_starts_per_address == 20
    yield running
    stop()


def test_starts_are_counted_by_the_throttle(few_starts: Service) -> None:
    client = PasskeyClient(from_address(few_starts, ATTACKER))
    user, key = client.new_user(), SoftAuthenticator()
    client.enrolled(user, key)  # one registration start
    answers = [client.auth_start(user.id).status_code for _ in range(20)]
    assert answers == [200] * 19 + [429]
    assert_error(client.auth_start(None), 429, "too_many_attempts")
    elsewhere = PasskeyClient(from_address(few_starts, VICTIM))
    assert elsewhere.auth_start(user.id).status_code == 200


# --- no enumeration -----------------------------------------------------------------------


def challenge_for(service: Service, app: dict[str, Any], username: str) -> dict[str, Any]:
    client = FlowClient(service, app["id"])
    client.start()
    step = client.act("passkey", username=username)
    return {"step": {key: value for key, value in step.items() if key != "executionId"},
            "options": json.loads(step["data"]["additionalData"]["passkeyChallenge"])}


def test_unknown_and_passkeyless_usernames_look_like_users_with_passkeys(
        service: Service, app: dict[str, Any]) -> None:
    with_passkey, without = new_username(), new_username()
    sign_up(FlowClient(service, app["id"]), with_passkey)
    directory.create_user(username=without, password=PASSWORD, origin=TEST_ORIGIN)
    unknown = "nobody-" + uuid.uuid4().hex[:8]
    answers = {name: challenge_for(service, app, name)
               for name in (with_passkey, without, unknown)}

    def shape(answer: dict[str, Any]) -> Any:
        """All but the values: a person may have one passkey or several, so a decoy list
        may be longer or shorter than a real one, but its entries look the same."""
        options = answer["options"]
        return (sorted(answer["step"]), answer["step"]["flowStatus"], sorted(options),
                options["userVerification"],
                {tuple(sorted(c)) for c in options["allowCredentials"]})

    assert shape(answers[with_passkey]) == shape(answers[without]) == shape(answers[unknown])
    for name in (without, unknown):  # the same decoys on every try, not fresh ones
        assert challenge_for(service, app, name)["options"]["allowCredentials"] == \
            answers[name]["options"]["allowCredentials"]
    assert answers[without]["options"]["allowCredentials"] != \
        answers[unknown]["options"]["allowCredentials"]


def test_a_decoy_challenge_cannot_be_answered_with_a_real_passkey(
        service: Service, app: dict[str, Any]) -> None:
    someone = flow_from(service, VICTIM, app["id"])
    sign_up(someone, new_username())
    someone.start()
    someone.act("passkey", username="nobody-" + uuid.uuid4().hex[:8])
    step = someone.use_passkey(credential_id=someone.authenticator.credentials[0].credential_id)
    assert step["flowStatus"] == "INCOMPLETE"


def bad_assertions(service: Service, app: dict[str, Any], username: str,
                   address: str, count: int) -> list[tuple[int, str, list[str]]]:
    """What ``count`` assertions for the first id offered for ``username``, signed with a
    stranger's own key, answer from ``address``, then a new challenge for the name:
    (status, code or failure reason, the answer's keys) each."""
    attacker = flow_from(service, address, app["id"])
    attacker.start()
    attacker.act("passkey", username=username)
    challenge = attacker.additional("passkeyChallenge")
    stranger = SoftAuthenticator()
    stranger.create({"rp": {"id": service.config.passkey.rp_id, "name": "x"},
                     "user": {"id": "AAAA", "name": "x", "displayName": "x"},
                     "challenge": "AAAA",
                     "pubKeyCredParams": [{"type": "public-key", "alg": -7}]},
                    origin=attacker.origin,
                    credential_id=b64url_decode(challenge["allowCredentials"][0]["id"]))

    def answer(action: str, inputs: dict[str, str]) -> tuple[int, str, list[str]]:
        response = attacker.call({"executionId": attacker.execution_id, "action": action,
                                  "inputs": inputs})
        body = response.json()
        return (response.status_code, body.get("code") or body.get("failureReason") or "",
                sorted(body))

    answers = [answer("passkey_verify",
                      credential_inputs(stranger.get(challenge, origin=attacker.origin,
                                                     user_handle=None)))
               for _ in range(count)]
    attacker.start()
    return [*answers, answer("passkey", {"username": username})]


def test_bad_assertions_for_a_names_offered_ids_answer_alike_whoever_has_passkeys(
        service: Service, app: dict[str, Any]) -> None:
    """WebAuthn §14.6.2: a name's real ids and a name's decoys are throttled alike, so the
    answers to a stranger's assertions signed with their own key tell nothing; the owner
    still signs in from their own address."""
    owner = flow_from(service, VICTIM, app["id"])
    with_passkey, without = new_username(), new_username()
    sign_up(owner, with_passkey)
    directory.create_user(username=without, password=PASSWORD, origin=TEST_ORIGIN)
    unknown = "nobody-" + uuid.uuid4().hex[:8]
    count = service.config.security.max_failures_per_account + 2
    answers = {name: bad_assertions(service, app, name, address, count)
               for name, address in ((with_passkey, "127.0.0.4"), (without, "127.0.0.5"),
                                     (unknown, "127.0.0.6"))}
    assert answers[with_passkey] == answers[without] == answers[unknown]
    codes = [code for _, code, _ in answers[with_passkey]]
    limit = service.config.security.max_failures_per_account
    # Brute force is still throttled, whoever has the name: then even its challenge.
    assert "invalid_signature" in codes[:limit] and codes[limit:] == ["too_many_attempts"] * 3
    owner.start()
    owner.act("passkey", username=with_passkey)
    assert owner.use_passkey()["flowStatus"] == "COMPLETE"
