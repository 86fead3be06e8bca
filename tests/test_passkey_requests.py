"""Malformed requests to the passkey endpoints: always the JSON error shape, never a 500."""

from __future__ import annotations

import json
import string
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator, b64url, b64url_decode
from tests.support.passkeys import PasskeyClient, assert_error

ENDPOINTS = ["/register/passkey/start", "/register/passkey/finish", "/auth/passkey/start",
             "/auth/passkey/finish"]
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20)
base64ish = st.text(alphabet=string.ascii_letters + string.digits + "-_+/=", max_size=80)
binary_values = st.binary(max_size=300).map(b64url) | base64ish | json_values


@pytest.fixture
def client(service: Service) -> PasskeyClient:
    return PasskeyClient(service)


def _post(client: PasskeyClient, path: str, data: bytes | str,
          content_type: str = "application/json") -> requests.Response:
    return client.service.http.post(client.service.url(path), data=data, timeout=30, headers={
        "Content-Type": content_type, "Authorization": f"Bearer {client.admin_token()}"})


def _is_clean_refusal(response: requests.Response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"code", "message", "description"}, body
        assert all(isinstance(value, str) and value for value in body.values()), body


@pytest.mark.parametrize("path", ENDPOINTS)
def test_malformed_json_wrong_type_and_oversized_bodies(client: PasskeyClient,
                                                        path: str) -> None:
    assert_error(_post(client, path, b'{"userId": '), 400, "malformed_json")
    assert_error(_post(client, path, b"[1, 2]"), 400, "malformed_json")
    assert_error(_post(client, path, b"\xff\xfe"), 400, "malformed_json")
    assert_error(_post(client, path, "[" * 50_000), 400, "malformed_json")
    assert_error(_post(client, path, b"{}", content_type="text/plain"), 415,
                 "unsupported_media_type")
    assert_error(_post(client, path, b"userId=1", "application/x-www-form-urlencoded"), 415,
                 "unsupported_media_type")
    oversized = json.dumps({"userId": "x" * (client.service.config.server.max_body_bytes + 1)})
    assert_error(_post(client, path, oversized), 413, "payload_too_large")


@FUZZ
@given(path=st.sampled_from(ENDPOINTS), body=json_values)
def test_any_json_body_is_refused_cleanly(client: PasskeyClient, path: str, body: Any) -> None:
    _is_clean_refusal(_post(client, path, json.dumps(body)))


@FUZZ
@given(body=st.binary(max_size=200))
def test_any_bytes_are_refused_cleanly(client: PasskeyClient, body: bytes) -> None:
    _is_clean_refusal(_post(client, "/auth/passkey/finish", body))


def _mutated(value: str, position: int, flip: int) -> str:
    """``value`` (Base64URL) with one byte changed."""
    raw = bytearray(b64url_decode(value))
    if raw:
        raw[position % len(raw)] ^= flip
    return b64url(bytes(raw))


response_changes = st.fixed_dictionaries({}, optional={
    "clientDataJSON": binary_values | st.dictionaries(st.sampled_from(
        ["type", "challenge", "origin", "crossOrigin", "topOrigin"]), json_values).map(
        lambda data: b64url(json.dumps(data).encode())),
    "attestationObject": binary_values,
    "authenticatorData": binary_values,
    "signature": binary_values,
    "userHandle": binary_values,
    "transports": json_values,
})
byte_flips = st.tuples(st.sampled_from(["clientDataJSON", "attestationObject",
                                        "authenticatorData", "signature"]),
                       st.integers(0, 2000), st.integers(1, 255))


@FUZZ
@given(changes=response_changes, flip=byte_flips | st.none(),
       top=st.fixed_dictionaries({}, optional={"id": binary_values, "rawId": binary_values,
                                               "type": json_values,
                                               "authenticatorAttachment": json_values}))
def test_corrupted_credentials_on_live_sessions_are_refused_cleanly(
        client: PasskeyClient, changes: dict[str, Any], flip: tuple[str, int, int] | None,
        top: dict[str, Any]) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator(attestation="packed")
    options, registration_token = client.begin_registration(user)
    created = authenticator.create(options, origin=client.origin)
    client.enrolled(user, authenticator)
    options, auth_token = client.begin_sign_in(user.id)
    asserted = authenticator.get(options, origin=client.origin)

    for credential, finish, token in ((created, client.register_finish, registration_token),
                                      (asserted, client.auth_finish, auth_token)):
        response = credential["response"]
        if flip is not None and flip[0] in response:
            response[flip[0]] = _mutated(response[flip[0]], flip[1], flip[2])
        response.update({k: v for k, v in changes.items() if k in response})
        credential.update(top)
        _is_clean_refusal(finish(credential, token))
