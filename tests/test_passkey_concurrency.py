"""Single use under concurrency, and ceremonies that cross server instances."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from identityctl.services.tokens import TokenService
from identityctl.store import passkeys as passkey_store
from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator
from tests.support.passkeys import PasskeyClient, second_instance

PARALLEL = 10


@pytest.fixture
def client(service: Service) -> PasskeyClient:
    return PasskeyClient(service)


def _all_at_once(send: Any) -> list[requests.Response]:
    """``send()`` PARALLEL times concurrently, each on its own connection."""
    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(lambda _: send(), range(PARALLEL)))


def _losers_are_refused(responses: list[requests.Response], success: int) -> None:
    assert [r.status_code for r in responses].count(success) == 1, \
        [(r.status_code, r.text) for r in responses]
    for response in responses:
        if response.status_code != success:
            # Lost the token race, or came after the winner had stored the credential.
            assert response.json()["code"] in ("unknown_session_token",
                                               "credential_already_registered"), response.text


def test_parallel_registration_finishes_store_exactly_one_credential(
        client: PasskeyClient) -> None:
    user = client.new_user()
    options, session_token = client.begin_registration(user)
    credential = SoftAuthenticator().create(options, origin=client.origin)
    body = {"publicKeyCredential": credential, "sessionToken": session_token}
    headers = {"Authorization": f"Bearer {client.admin_token()}"}
    url = client.service.url("/register/passkey/finish")

    responses = _all_at_once(lambda: requests.post(url, json=body, headers=headers, timeout=30))

    _losers_are_refused(responses, 201)
    assert len(passkey_store.list_credentials(user.id)) == 1


@pytest.mark.parametrize("counter", ["increment", "zero"])
def test_parallel_authentication_finishes_sign_in_once(client: PasskeyClient,
                                                       counter: str) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator(counter=counter)
    client.enrolled(user, authenticator)
    options, session_token = client.begin_sign_in(user.id)
    body = {"publicKeyCredential": authenticator.get(options, origin=client.origin),
            "sessionToken": session_token}
    url = client.service.url("/auth/passkey/finish")

    responses = _all_at_once(lambda: requests.post(url, json=body, timeout=30))

    _losers_are_refused(responses, 200)


def test_a_ceremony_started_on_one_instance_finishes_on_another(
        client: PasskeyClient) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    with second_instance(client.service) as other:
        on_other = PasskeyClient(other, origin=client.origin)
        options, session_token = client.begin_registration(user)
        finished = on_other.register_finish(authenticator.create(options, origin=client.origin),
                                            session_token)
        assert finished.status_code == 201, finished.text

        options, session_token = on_other.begin_sign_in(user.id)
        signed_in = client.auth_finish(authenticator.get(options, origin=client.origin),
                                       session_token)
        assert signed_in.status_code == 200, signed_in.text

        # The newest start on either instance supersedes the older one on the other.
        first_options, first_token = client.begin_sign_in(user.id)
        on_other.begin_sign_in(user.id)
        stale = on_other.auth_finish(authenticator.get(first_options, origin=client.origin),
                                     first_token)
        assert stale.json()["code"] == "stale_session_token"

    issuer = client.service.config.issuer
    claims = TokenService(issuer).verify_assertion(signed_in.json()["assertion"])
    assert claims["sub"] == user.id
