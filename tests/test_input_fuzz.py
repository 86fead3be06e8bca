"""Hypothesis against the live server: hostile WebAuthn and flow inputs over HTTP.

Each example starts from a body that would succeed (a real ceremony of the software
authenticator, a live flow execution), breaks it in one or a few places (random types in
any field, truncated or bit-flipped Base64URL, broken CBOR and clientDataJSON, huge numbers,
nested junk, deep nesting) and checks that bad input loses nothing:

- never a 5xx, every error is the JSON error shape without a traceback;
- no partial rows: a refused registration stores no credential, a refused sign-in changes
  no counter;
- the ceremony session / flow execution is not consumed by a refused request: the valid
  body still succeeds afterwards.

Bounded for CI (EXAMPLES per test, no database, no shrinking); the throttle limits are
raised so that the failures this suite causes on purpose are not answered with 429.
"""

from __future__ import annotations

import base64
import copy
import json
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import cbor2
import pytest
import requests
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from identityctl.config import load_config
from identityctl.server.runtime import make_server
from identityctl.services.admin import bootstrap
from identityctl.services.admin.bootstrap import open_store
from identityctl.services.directory import users as directory
from identityctl.store import db
from identityctl.store.models import CeremonySession, PasskeyCredential
from tests.conftest import Service, free_port
from tests.support.authenticator import SoftAuthenticator, b64url, b64url_decode
from tests.support.flows import FlowClient, credential_inputs
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient
from tests.support.threads import served_in_thread
from tests.test_flow_execution import make_application

EXAMPLES = 60
ERROR_FIELDS = {"code", "message", "description"}
PASSWORD = "correct horse battery"
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One server for the module, with throttling out of the way of deliberate failures."""
    directory_path = tmp_path_factory.mktemp("fuzz")
    port = free_port()
    text = bootstrap.render_config(base_url=f"http://localhost:{port}")
    for name, value, out_of_reach in (("max_failures_per_account", 10, 1000000),
                                      ("max_failures_per_address", 50, 1000000),
                                      ("max_password_guesses_per_account", 100, 1000000000),
                                      ("max_starts_per_address", 1000, 1000000000)):
        assert f"{name} = {value}" in text, name
        text = text.replace(f"{name} = {value}", f"{name} = {out_of_reach}")
    config_path = directory_path / "config.toml"
    config_path.write_text(text)
    config = load_config(config_path)
    open_store(config, create=True)
    bootstrap.seed(config)
    running = Service(config=config, config_path=config_path,
                      base_url=f"http://localhost:{port}", http=requests.Session())
    with served_in_thread(make_server(config, host="127.0.0.1", port=port, threads=4)):
        yield running
    running.http.close()
    db.close()


@pytest.fixture(scope="module")
def client(service: Service) -> PasskeyClient:
    return PasskeyClient(service)


def post_json(service: Service, path: str, body: Any,
              headers: dict[str, str] | None = None) -> requests.Response:
    """POST ``body`` as JSON text, NaN and Infinity included (Python's json writes them;
    they are not JSON, so the server must refuse them cleanly). The encoder's recursion
    limit is lifted for the deeply nested bodies: only the server's parser is under test."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 50_000))
    try:
        text = json.dumps(body)
    finally:
        sys.setrecursionlimit(limit)
    return service.http.post(service.url(path), data=text.encode(), timeout=30,
                             headers={"Content-Type": "application/json", **(headers or {})})


def check_answer(response: requests.Response) -> None:
    """No 5xx; an error is the JSON error shape, with nothing about the internals."""
    event(f"HTTP {response.status_code}")
    assert response.status_code < 500, (response.status_code, response.text[:500])
    assert "Traceback" not in response.text and 'File "' not in response.text
    if response.status_code < 400:
        return
    assert response.headers.get("Content-Type", "").startswith("application/json"), \
        (response.status_code, response.headers.get("Content-Type"), response.text[:300])
    body = response.json()
    assert isinstance(body, dict) and set(body) >= ERROR_FIELDS, body
    event(f"code {body.get('code')}")
    assert all(isinstance(body[name], str) for name in ERROR_FIELDS), body
    assert body["code"], body


# --- hostile values ---------------------------------------------------------------------------

HUGE = st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**30, -(10**30), 2**1000])
SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | HUGE
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40)
           | st.sampled_from([float("nan"), float("inf")])
           | st.sampled_from(["", " ", "\x00", "A" * 5000, "é\u202e☃", "null", "[]", "{}",
                              "==", "AAAA====", "+/+/", "%00", "../../etc/passwd"]))
JUNK = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)


#: Positions are drawn independently of the data they index (signatures vary in length from
#: one run to the next, and Hypothesis needs the same draws to mean the same thing).
INDEX = st.integers(0, 2**16)


def deep(depth: int) -> Any:
    value: Any = "x"
    for index in range(depth):
        value = [value] if index % 2 else {"a": value}
    return value


def b64url_mutations(data: st.DataObject, value: str) -> str:
    """A Base64URL string with its bytes truncated, extended, bit-flipped or its text broken."""
    try:
        raw = b64url_decode(value)
    except (ValueError, TypeError):
        raw = value.encode()
    kind = data.draw(st.sampled_from(["truncate", "flip", "append", "empty", "padding",
                                      "standard", "garbage", "random"]), label="b64 mutation")
    if kind == "truncate" and raw:
        return b64url(raw[:data.draw(INDEX, label="keep") % len(raw)])
    if kind == "flip" and raw:
        at = data.draw(INDEX, label="at") % len(raw)
        bit = data.draw(st.integers(0, 7), label="bit")
        return b64url(raw[:at] + bytes([raw[at] ^ (1 << bit)]) + raw[at + 1:])
    if kind == "append":
        return b64url(raw + data.draw(st.binary(min_size=1, max_size=64), label="tail"))
    if kind == "empty":
        return ""
    if kind == "padding":
        return base64.urlsafe_b64encode(raw).decode() + "=="
    if kind == "standard":
        return base64.b64encode(raw).decode()
    if kind == "garbage":
        return data.draw(st.text(max_size=60), label="text")
    return b64url(data.draw(st.binary(max_size=300), label="random bytes"))


def cbor_mutation(data: st.DataObject, value: str) -> str:
    """A CBOR map (attestationObject) with one entry replaced by junk, or CBOR junk."""
    try:
        decoded = cbor2.loads(b64url_decode(value))
    except Exception:  # not CBOR, or junk CBOR cannot encode
        decoded = None
    if isinstance(decoded, dict) and decoded and data.draw(st.booleans(), label="in map"):
        key = data.draw(st.sampled_from(sorted(decoded, key=str)), label="cbor key")
        junk = data.draw(JUNK | st.binary(max_size=80), label="cbor value")
        decoded[key] = junk
        try:
            return b64url(cbor2.dumps(decoded))
        except Exception:  # not CBOR, or junk CBOR cannot encode
            pass
    junk = data.draw(JUNK | st.binary(max_size=120), label="cbor junk")
    try:
        return b64url(cbor2.dumps(junk))
    except Exception:  # not CBOR, or junk CBOR cannot encode
        return b64url(b"\xff\x00\x9f")


def client_data_mutation(data: st.DataObject, value: str) -> str:
    """clientDataJSON with one member replaced by junk, or not JSON at all."""
    try:
        decoded = json.loads(b64url_decode(value))
    except ValueError:
        decoded = {}
    if isinstance(decoded, dict) and decoded and data.draw(st.booleans(), label="in json"):
        key = data.draw(st.sampled_from(sorted(decoded)), label="client data key")
        decoded[key] = data.draw(JUNK, label="client data value")
        return b64url(json.dumps(decoded).encode())
    return b64url(data.draw(st.binary(max_size=200) | st.just(b'{"type":'), label="raw"))


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into nested dicts/lists (the root excluded), at most 8 levels deep (an
    earlier mutation may have planted a structure thousands of levels deep)."""
    found: list[tuple[Any, ...]] = []
    if len(prefix) >= 8:
        return found
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return found
    for key, item in items:
        found.append((*prefix, key))
        found.extend(paths(item, (*prefix, key)))
    return found


def mutate(data: st.DataObject, body: dict[str, Any]) -> Any:
    """``body`` broken in 1-3 places (or replaced by something that is not an object)."""
    if data.draw(st.integers(0, 19), label="whole body?") == 0:
        return data.draw(JUNK | st.builds(deep, st.integers(50, 3000)), label="whole body")
    body = copy.deepcopy(body)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        candidates = paths(body)
        if not candidates:
            break
        path = data.draw(st.sampled_from(candidates), label="path")
        parent = body
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        current = parent[key]
        name = str(key)
        kind = data.draw(st.sampled_from(["value", "delete", "extra", "special", "special",
                                          "special"]), label="kind")
        if kind == "delete":
            del parent[key]
        elif kind == "extra" and isinstance(current, dict):
            current[data.draw(st.text(max_size=12), label="extra key")] = data.draw(JUNK)
        elif kind == "special" and isinstance(current, str):
            if name == "attestationObject":
                parent[key] = cbor_mutation(data, current)
            elif name == "clientDataJSON":
                parent[key] = client_data_mutation(data, current)
            else:
                parent[key] = b64url_mutations(data, current)
        elif kind == "special":
            parent[key] = data.draw(st.builds(deep, st.integers(10, 2000)), label="deep")
        else:
            parent[key] = data.draw(JUNK, label="junk")
    return body


def credential_count() -> int:
    return PasskeyCredential.select().count()


# --- WebAuthn over the atomic passkey API --------------------------------------------------


@FUZZ
@given(data=st.data())
def test_fuzzed_registration_finish_never_fails_the_server_nor_leaves_partial_rows(
        client: PasskeyClient, data: st.DataObject) -> None:
    user = client.new_user()
    authenticator = SoftAuthenticator(attestation=data.draw(st.sampled_from(["none", "packed"]),
                                                            label="attestation"))
    options, session_token = client.begin_registration(user)
    credential = authenticator.create(options, origin=client.origin)
    valid = {"publicKeyCredential": credential, "sessionToken": session_token,
             "credentialName": "Laptop"}
    before = credential_count()

    body = mutate(data, valid)
    answer = post_json(client.service, "/register/passkey/finish", body, headers={
        "Authorization": f"Bearer {client.admin_token()}"})

    check_answer(answer)
    if 200 <= answer.status_code < 300:
        assert credential_count() == before + 1
        return
    assert credential_count() == before, answer.text
    # The ceremony session was not consumed: the untouched body still registers.
    again = client.service.post("/register/passkey/finish", valid, headers={
        "Authorization": f"Bearer {client.admin_token()}"})
    assert again.status_code == 201, (answer.text, again.text)
    assert credential_count() == before + 1


@pytest.fixture(scope="module")
def enrolled(client: PasskeyClient) -> tuple[str, SoftAuthenticator]:
    user = client.new_user()
    authenticator = SoftAuthenticator()
    client.enrolled(user, authenticator)
    return user.id, authenticator


@FUZZ
@given(data=st.data())
def test_fuzzed_sign_in_finish_never_fails_the_server_nor_changes_the_credential(
        client: PasskeyClient, enrolled: tuple[str, SoftAuthenticator],
        data: st.DataObject) -> None:
    user_id, authenticator = enrolled
    usernameless = data.draw(st.booleans(), label="usernameless")
    options, session_token = client.begin_sign_in(None if usernameless else user_id)
    credential = authenticator.get(options, origin=client.origin)
    valid = {"publicKeyCredential": credential, "sessionToken": session_token}
    stored = PasskeyCredential.get(PasskeyCredential.credential_id == credential["id"])
    before = (credential_count(), stored.sign_count)

    answer = post_json(client.service, "/auth/passkey/finish", mutate(data, valid))

    check_answer(answer)
    after = PasskeyCredential.get(PasskeyCredential.credential_id == credential["id"])
    if 200 <= answer.status_code < 300:
        assert answer.json()["id"] == user_id
        return
    assert (credential_count(), after.sign_count) == before, answer.text
    again = client.service.post("/auth/passkey/finish", valid)
    assert again.status_code == 200, (answer.text, again.text)
    assert again.json()["id"] == user_id


# --- the flow engine --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def flow_app(service: Service) -> tuple[str, str]:
    """An application on the default flow and a user who signs in with a password."""
    username = f"fuzz-{uuid.uuid4().hex[:8]}"
    directory.create_user(username=username, password=PASSWORD, origin=TEST_ORIGIN)
    return make_application()["id"], username


ACTIONS = ["password", "passkey", "passkey_verify", "passkey_register", "signup", "skip",
           "signin", "", "PASSWORD", "password\x00"]


def flow_body(data: st.DataObject, execution_id: str, username: str) -> Any:
    """A random continuation: real or junk execution ids, actions and inputs."""
    execution = data.draw(st.sampled_from([execution_id, execution_id + "x", execution_id[:-1],
                                           "", uuid.uuid4().hex]) | JUNK, label="executionId")
    action = data.draw(st.sampled_from(ACTIONS) | JUNK, label="action")
    inputs = data.draw(
        st.dictionaries(st.sampled_from(["username", "password", "email", "credentialId",
                                         "clientDataJSON", "authenticatorData", "signature",
                                         "userHandle", "attestationObject"])
                        | st.text(max_size=10),
                        st.sampled_from([username, PASSWORD, "", "A" * 3000])
                        | st.text(max_size=40) | JUNK, max_size=5)
        | JUNK, label="inputs")
    body: dict[str, Any] = {"executionId": execution, "action": action, "inputs": inputs}
    if data.draw(st.booleans(), label="extras"):
        body.update(data.draw(st.dictionaries(
            st.sampled_from(["verbose", "applicationId", "flowType", "x"]), JUNK, max_size=3),
            label="extra fields"))
    for name in data.draw(st.sets(st.sampled_from(sorted(body))), label="dropped"):
        body.pop(name, None)
    if data.draw(st.integers(0, 14), label="whole?") == 0:
        return data.draw(JUNK | st.builds(deep, st.integers(50, 3000)), label="whole body")
    return body


@FUZZ
@given(data=st.data())
def test_fuzzed_flow_requests_never_fail_the_server_and_leave_the_execution_usable(
        service: Service, flow_app: tuple[str, str], data: st.DataObject) -> None:
    application_id, username = flow_app
    flow = FlowClient(service, application_id)
    flow.start()
    execution_id = flow.execution_id

    answer = post_json(service, "/flow/execute", flow_body(data, execution_id, username))

    check_answer(answer)
    if 200 <= answer.status_code < 300:
        assert answer.json()["flowStatus"] in ("INCOMPLETE", "COMPLETE", "ERROR")
        return
    flow.execution_id = execution_id
    done = flow.act("password", username=username, password=PASSWORD)
    assert done["flowStatus"] == "COMPLETE", (answer.text, done)


@FUZZ
@given(data=st.data())
def test_fuzzed_passkey_inputs_of_a_flow_never_fail_the_server(
        service: Service, flow_app: tuple[str, str], enrolled: tuple[str, SoftAuthenticator],
        client: PasskeyClient, data: st.DataObject) -> None:
    """The flat WebAuthn inputs of a flow's passkey step, broken like the atomic API's."""
    application_id, _ = flow_app
    _, authenticator = enrolled
    flow = FlowClient(service, application_id, authenticator=authenticator)
    flow.start()
    flow.act("passkey")
    execution_id = flow.execution_id
    credential = authenticator.get(flow.additional("passkeyChallenge"), origin=flow.origin)
    inputs = credential_inputs(credential)
    sessions = CeremonySession.select().count()
    stored = PasskeyCredential.get(PasskeyCredential.credential_id == credential["id"])
    broken: dict[str, Any] = dict(inputs)
    for name in data.draw(st.sets(st.sampled_from(sorted(inputs)), min_size=1), label="fields"):
        how = data.draw(st.sampled_from(["b64", "special", "text", "drop"]), label="how")
        if how == "drop":
            broken.pop(name)
        elif how == "text":
            broken[name] = data.draw(st.text(max_size=80), label="text")
        elif how == "special" and name == "clientDataJSON":
            broken[name] = client_data_mutation(data, inputs[name])
        else:
            broken[name] = b64url_mutations(data, inputs[name])

    answer = post_json(service, "/flow/execute", {"executionId": execution_id,
                                            "action": "passkey_verify", "inputs": broken})

    check_answer(answer)
    after = PasskeyCredential.get(PasskeyCredential.credential_id == credential["id"])
    step = answer.json()
    if answer.status_code == 200 and step["flowStatus"] == "COMPLETE":
        return
    assert after.sign_count == stored.sign_count, step
    assert CeremonySession.select().count() <= sessions + 1
    if answer.status_code == 200 and step["flowStatus"] == "INCOMPLETE":
        # A refused passkey gets a fresh challenge on the same execution: use it.
        flow.step = step
        assert flow.use_passkey()["flowStatus"] == "COMPLETE", step
    elif answer.status_code >= 400:
        flow.execution_id = execution_id
        assert flow.act("passkey_verify", **inputs)["flowStatus"] == "COMPLETE", step
