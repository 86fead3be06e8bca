"""POST /flow/execute over HTTP: the default flows end to end, and every execution error.

Passkey steps use the software authenticator (real keys and signatures); a completed
sign-in's assertion is checked against the service's published JWKS.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from typing import Any

import jwt
import pytest

from identityctl.services import catalog
from identityctl.services.directory import users as directory
from identityctl.store import audit
from identityctl.store.models import FlowExecution
from tests.conftest import Service
from tests.support.authenticator import b64url
from tests.support.flows import FlowClient
from tests.support.origins import TEST_ORIGIN

PASSWORD = "correct horse battery"


def make_application(*, auth: str = "default-basic-passkey-flow",
                     registration: str = "default-basic-passkey-flow",
                     sign_up: bool = True, **fields: Any) -> dict[str, Any]:
    document = catalog.applications.application_templates()["SPA"]
    document.pop("themeId", None)
    document["inboundAuthConfig"][0]["config"]["redirectUris"] = ["https://app.example/cb"]
    document.update(name=f"app-{uuid.uuid4().hex[:8]}", authFlowId=auth,
                    registrationFlowId=registration, isRegistrationFlowEnabled=sign_up, **fields)
    return catalog.applications.create_application(document, origin=TEST_ORIGIN)[0]


@pytest.fixture
def app(service: Service) -> dict[str, Any]:
    return make_application()


@pytest.fixture
def flow(service: Service, app: dict[str, Any]) -> FlowClient:
    return FlowClient(service, app["id"])


def new_username() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


def verified_assertion(service: Service, assertion: str) -> dict[str, Any]:
    """The assertion's claims, verified with a key the service publishes at /oauth2/jwks."""
    kid = jwt.get_unverified_header(assertion)["kid"]
    keys = {key["kid"]: key for key in service.get("/oauth2/jwks").json()["keys"]}
    key = jwt.PyJWK(keys[kid])
    return jwt.decode(assertion, key.key, algorithms=[key.algorithm_name],
                      audience=service.config.issuer)


def sign_up(flow: FlowClient, username: str, *, with_passkey: bool = True) -> dict[str, Any]:
    flow.start("REGISTRATION")
    step = flow.act("signup", username=username, password=PASSWORD, email=f"{username}@x.io")
    assert "passkeyCreationOptions" in step["data"]["additionalData"]
    return flow.create_passkey() if with_passkey else flow.act("skip")


# --- the default flows end to end -----------------------------------------------------------


def test_the_first_step_is_a_view_with_inputs_and_actions(flow: FlowClient) -> None:
    step = flow.start()
    assert step["flowStatus"] == "INCOMPLETE" and step["type"] == "VIEW"
    assert step["data"]["inputs"] == [
        {"ref": "username", "identifier": "username", "type": "TEXT_INPUT", "required": False},
        {"ref": "password", "identifier": "password", "type": "PASSWORD_INPUT",
         "required": False},
        {"ref": "idpId", "identifier": "idpId", "type": "HIDDEN", "required": False}]
    assert [action["ref"] for action in step["data"]["actions"]] == ["passkey", "password",
                                                                     "federated"]
    assert [action["inputs"] for action in step["data"]["actions"]] == [
        ["username"], ["username", "password"], ["idpId"]]
    # "Continue with …" lists the identity providers (none here).
    assert step["data"]["additionalData"] == {"identityProviders": "[]"}


def test_sign_up_with_password_then_passkey_then_sign_in_with_it(
        service: Service, flow: FlowClient) -> None:
    username = new_username()
    done = sign_up(flow, username)
    assert done["flowStatus"] == "COMPLETE"
    registered = done["data"]["additionalData"]
    assert registered["passkeyCredentialID"] == \
        b64url(flow.authenticator.credentials[0].credential_id)
    assert set(registered) == {"passkeyCredentialID", "passkeyCredentialName",
                               "credentialCreatedAt"}
    user = directory.require_user(username)
    assert verified_assertion(service, done["assertion"])["sub"] == user.id
    assert user.attributes["email"] == f"{username}@x.io"

    signing_in = FlowClient(service, flow.application_id, authenticator=flow.authenticator)
    signing_in.start()
    challenge = signing_in.act("passkey", username=username)
    allowed = signing_in.additional("passkeyChallenge")["allowCredentials"]
    assert [item["id"] for item in allowed] == [registered["passkeyCredentialID"]]
    assert "passkeyChallenge" in challenge["data"]["additionalData"]
    completed = signing_in.use_passkey()
    claims = verified_assertion(service, completed["assertion"])
    assert claims["sub"] == user.id and "passkey" in claims["amr"]


def test_usernameless_passkey_sign_in(service: Service, flow: FlowClient) -> None:
    username = new_username()
    sign_up(flow, username)
    signing_in = FlowClient(service, flow.application_id, authenticator=flow.authenticator)
    signing_in.start()
    signing_in.act("passkey")
    assert signing_in.additional("passkeyChallenge")["allowCredentials"] == []
    assert signing_in.additional("passkeyChallenge")["userVerification"] == "required"
    done = signing_in.use_passkey()
    assert verified_assertion(service, done["assertion"])["sub"] == \
        directory.require_user(username).id


def test_password_sign_in_and_the_passkey_only_flow(service: Service, flow: FlowClient) -> None:
    username = new_username()
    sign_up(flow, username, with_passkey=False)
    flow.start()
    done = flow.act("password", username=username, password=PASSWORD)
    assert done["flowStatus"] == "COMPLETE"
    assert verified_assertion(service, done["assertion"])["amr"] == ["pwd"]

    passkey_app = make_application(auth="default-passkey-flow",
                                   registration="default-passkey-flow")
    only_passkeys = FlowClient(service, passkey_app["id"])
    only_passkeys.start("REGISTRATION")
    step = only_passkeys.act("signup", username=new_username())
    assert [a["ref"] for a in step["data"]["actions"]] == ["passkey_register"]
    assert only_passkeys.create_passkey()["flowStatus"] == "COMPLETE"
    only_passkeys.start()
    only_passkeys.act("passkey")
    assert only_passkeys.use_passkey()["flowStatus"] == "COMPLETE"


def test_the_password_only_flow(service: Service) -> None:
    username = new_username()
    directory.create_user(username=username, password=PASSWORD, origin=TEST_ORIGIN)
    client = FlowClient(service, make_application(auth="default-basic-flow")["id"])
    assert [i["identifier"] for i in client.start()["data"]["inputs"]] == ["username",
                                                                          "password"]
    assert client.act("password", username=username, password=PASSWORD)["assertion"]


def test_a_name_without_passkeys_gets_a_challenge_like_any_other_and_may_use_a_password(
        flow: FlowClient) -> None:
    """WebAuthn §14.6.2: whether the name exists, or has a passkey, does not show (the decoy
    challenges are tested in test_lockout_resistance.py); the person's browser finds no
    passkey, and the step offers the password instead."""
    known = new_username()
    directory.create_user(username=known, password=PASSWORD, origin=TEST_ORIGIN)
    answers = []
    for username in (known, "nobody-" + uuid.uuid4().hex[:6]):
        flow.start()
        step = flow.act("passkey", username=username)
        assert "failureReason" not in step and flow.additional("passkeyChallenge")
        answers.append(step["data"]["actions"])
    assert answers[0] == answers[1]
    assert "use_password" in [action["ref"] for action in answers[0]]


def test_a_failed_passkey_gets_a_fresh_challenge_and_can_be_retried(
        service: Service, flow: FlowClient) -> None:
    sign_up(flow, new_username())
    flow.start()
    flow.act("passkey")
    first = flow.additional("passkeyChallenge")["challenge"]
    again = flow.use_passkey(bad_signature=True)
    assert again["flowStatus"] == "INCOMPLETE"
    assert again["failureReason"] == "invalid_signature"
    assert flow.additional("passkeyChallenge")["challenge"] != first
    takes = {action["ref"]: action["inputs"] for action in again["data"]["actions"]}
    assert "credentialId" in takes["passkey_verify"] and takes["use_password"] == []
    assert flow.use_passkey()["flowStatus"] == "COMPLETE"


def test_a_ceremony_from_an_origin_not_allowed_is_refused(flow: FlowClient) -> None:
    sign_up(flow, new_username())
    flow.start()
    flow.act("passkey")
    step = flow.use_passkey(origin="https://evil.example")
    assert step["failureReason"] == "origin_mismatch"


# --- passwords: same answer for unknown users, throttled ------------------------------------


def test_wrong_password_and_unknown_user_answer_alike(flow: FlowClient) -> None:
    username = new_username()
    directory.create_user(username=username, password=PASSWORD, origin=TEST_ORIGIN)

    def attempt(name: str) -> tuple[dict[str, Any], float]:
        flow.start()
        began = time.perf_counter()
        step = flow.act("password", username=name, password="not the password")
        return step, time.perf_counter() - began

    wrong, unknown = [], []
    for _ in range(3):
        wrong.append(attempt(username))
        unknown.append(attempt("ghost-" + uuid.uuid4().hex[:6]))
    strip = [{k: v for k, v in step.items() if k != "executionId"} for step, _ in wrong + unknown]
    assert all(step == strip[0] for step in strip)
    assert strip[0]["failureReason"] == "invalid_credentials"
    assert strip[0]["data"]["actions"][1]["ref"] == "password"  # the prompt again
    # Both pay one argon2 verification: the medians stay within a factor of 3.
    ratio = statistics.median(t for _, t in wrong) / statistics.median(t for _, t in unknown)
    assert 1 / 3 < ratio < 3


def test_repeated_wrong_passwords_are_throttled_per_account(service: Service,
                                                          flow: FlowClient) -> None:
    username = new_username()
    directory.create_user(username=username, password=PASSWORD, origin=TEST_ORIGIN)
    for _ in range(service.config.security.max_failures_per_account):
        flow.start()
        assert flow.act("password", username=username, password="nope-nope")[
            "failureReason"] == "invalid_credentials"
    flow.start()
    refused = flow.call({"executionId": flow.execution_id, "action": "password",
                         "inputs": {"username": username, "password": PASSWORD}})
    assert refused.status_code == 429
    assert refused.json()["code"] == "too_many_attempts"
    assert int(refused.headers["Retry-After"]) > 0
    assert audit.events(event="throttle.block")
    # The execution itself is still usable once the block ends.
    assert flow.act("passkey")["flowStatus"] == "INCOMPLETE"


# --- execution errors -------------------------------------------------------------------------


def test_a_completed_execution_cannot_be_replayed(flow: FlowClient) -> None:
    username = new_username()
    directory.create_user(username=username, password=PASSWORD, origin=TEST_ORIGIN)
    flow.start()
    flow.act("password", username=username, password=PASSWORD)
    replay = flow.call({"executionId": flow.execution_id, "action": "password",
                        "inputs": {"username": username, "password": PASSWORD}})
    assert replay.status_code == 400
    assert replay.json()["code"] == "execution_completed"


def test_an_expired_execution_is_refused(flow: FlowClient) -> None:
    flow.start()
    FlowExecution.update(expires_at=time.time() - 1).where(
        FlowExecution.id == flow.execution_id).execute()
    expired = flow.call({"executionId": flow.execution_id, "action": "passkey", "inputs": {}})
    assert (expired.status_code, expired.json()["code"]) == (400, "execution_expired")


@pytest.mark.parametrize(("body", "status", "code", "named"), [
    ({"action": "fly"}, 400, "unknown_action", "fly"),
    ({"action": "password", "inputs": {"username": "a"}}, 400, "missing_field",
     "inputs.password"),
    ({"action": "password", "inputs": {"username": 7}}, 400, "invalid_field", "inputs.username"),
    ({"inputs": {}}, 400, "missing_field", "action"),
    ({"executionId": "no-such-execution", "action": "password"}, 404, "execution_not_found",
     ""),
])
def test_bad_continuations_are_named(flow: FlowClient, body: dict, status: int, code: str,
                                     named: str) -> None:
    flow.start()
    response = flow.call({"executionId": flow.execution_id, **body})
    assert response.status_code == status
    assert response.json()["code"] == code
    assert named in response.json()["description"]


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"applicationId": "nope", "flowType": "AUTHENTICATION"}, 404, "application_not_found"),
    ({"flowType": "AUTHENTICATION"}, 400, "missing_field"),
    ({"applicationId": "x", "flowType": "NOT_A_FLOW_TYPE"}, 400, "invalid_field"),
])
def test_bad_starts_are_named(flow: FlowClient, body: dict, status: int, code: str) -> None:
    response = flow.call(body)
    assert (response.status_code, response.json()["code"]) == (status, code)


def test_sign_up_is_refused_when_the_application_does_not_allow_it(service: Service) -> None:
    client = FlowClient(service, make_application(sign_up=False)["id"])
    response = client.call({"applicationId": client.application_id, "flowType": "REGISTRATION"})
    assert (response.status_code, response.json()["code"]) == (403, "registration_disabled")


def test_sign_up_problems_show_the_form_again(flow: FlowClient) -> None:
    taken = new_username()
    directory.create_user(username=taken, origin=TEST_ORIGIN)
    flow.start("REGISTRATION")
    assert flow.act("signup", username=taken, password=PASSWORD)["failureReason"] == \
        "username_taken"
    assert flow.act("signup", username=new_username(), password="password")[
        "failureReason"] == "weak_password"
    assert flow.act("signup", username=new_username(), password=PASSWORD)["data"][
        "additionalData"]["passkeyCreationOptions"]


def test_concurrent_continuations_advance_the_execution_once(flow: FlowClient,
                                                             service: Service) -> None:
    username = new_username()
    directory.create_user(username=username, password=PASSWORD, origin=TEST_ORIGIN)
    flow.start()
    body = {"executionId": flow.execution_id, "action": "password",
            "inputs": {"username": username, "password": PASSWORD}}
    results: list[tuple[int, str]] = []
    barrier = threading.Barrier(4)

    def continue_once() -> None:
        barrier.wait()
        response = service.http.post(service.url("/flow/execute"), json=body, timeout=30)
        payload = response.json()
        results.append((response.status_code, payload.get("flowStatus") or payload["code"]))

    threads = [threading.Thread(target=continue_once) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results).count((200, "COMPLETE")) == 1
    assert all(code in ("execution_conflict", "execution_completed")
               for status, code in results if status != 200)


def test_the_client_never_sees_the_passkey_session_token(flow: FlowClient) -> None:
    sign_up(flow, new_username())
    flow.start()
    step = flow.act("passkey")
    stored = FlowExecution.get_by_id(flow.execution_id).context["passkeySession"]
    assert stored not in str(step)
