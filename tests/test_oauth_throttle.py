"""Brute force on client secrets: the token endpoint's client authentication is throttled.

Failed client authentication (unknown client, wrong secret) counts against the client id at
that address and against the address, exactly like failed passwords count against a
username (``services.throttle``); a refused address gets 429 too_many_attempts with
Retry-After, even with the right secret, until the block ends. The client, from anywhere
else, is not refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from requests.adapters import HTTPAdapter

from identityctl.services import throttle
from identityctl.services.admin import bootstrap
from identityctl.services.clients.client import CLIENT_AUTH_ACTION
from identityctl.services.context import ServiceContext
from identityctl.services.origin import RequestOrigin
from identityctl.services.tokens import TokenService
from identityctl.store import audit
from tests.conftest import Service, start_service
from tests.support.oauth import (
    OAuthDriver,
    RegisteredClient,
    assert_oauth_error,
    basic_auth,
    register_client,
)

CLIENT_CREDENTIALS = {"grant_type": "client_credentials"}


class _FromAddress(HTTPAdapter):
    """Connections from one local address (127.0.0.0/8 is all loopback on Linux)."""

    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def session_from(address: str) -> requests.Session:
    session = requests.Session()
    session.mount("http://", _FromAddress(address))
    return session


@pytest.fixture
def small_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    """A service with small limits: 3 failures per client id, 5 per client address."""
    render = bootstrap.render_config

    def render_config(**kwargs: Any) -> str:
        return (render(**kwargs)
                .replace("max_failures_per_account = 10", "max_failures_per_account = 3")
                .replace("max_failures_per_address = 50", "max_failures_per_address = 5"))

    monkeypatch.setattr(bootstrap, "render_config", render_config)
    running, stop = start_service(tmp_path)
    assert running.config.security.max_failures_per_account == 3
    yield running
    stop()


def token_request(service: Service, client_id: str, secret: str, *, address: str | None = None,
                  post: bool = False, path: str = "/oauth2/token") -> requests.Response:
    """A client_credentials request (or revoke/introspect), from ``address`` if given."""
    headers = {}
    form = dict(CLIENT_CREDENTIALS) if path == "/oauth2/token" else {"token": "x"}
    if post:
        form.update(client_id=client_id, client_secret=secret)
    else:
        headers["Authorization"] = basic_auth(client_id, secret)
    http = session_from(address) if address else service.http
    try:
        return http.post(service.url(path).replace("localhost", "127.0.0.1"), data=form,
                         headers=headers, timeout=30)
    finally:
        if address:
            http.close()


def assert_throttled(response: requests.Response, service: Service) -> None:
    assert response.status_code == 429, response.text
    assert response.json()["code"] == "too_many_attempts"
    retry_after = int(response.headers["Retry-After"])
    assert 0 < retry_after <= service.config.security.lockout_seconds


def fail(service: Service, client_id: str, times: int, *, address: str | None = None,
         post: bool = False) -> None:
    for _ in range(times):
        response = token_request(service, client_id, "wrong", address=address, post=post)
        assert_oauth_error(response, 401, "invalid_client", "client_authentication_failed")


def works(service: Service, client: RegisteredClient, *, address: str | None = None,
          post: bool = False) -> bool:
    response = token_request(service, client.client_id, client.secret or "", address=address,
                             post=post)
    return response.status_code == 200


# --- the defaults ---------------------------------------------------------------------------


def test_wrong_secrets_block_the_client_id_at_the_default_limit(service: Service) -> None:
    client = register_client("M2M")
    limit = service.config.security.max_failures_per_account
    assert limit == 10
    fail(service, client.client_id, limit - 1)
    assert works(service, client)  # under the limit the right secret still works...
    fail(service, client.client_id, limit)
    # ...at the limit even the right secret is refused until the block ends.
    refused = token_request(service, client.client_id, client.secret or "")
    assert_throttled(refused, service)
    assert_throttled(token_request(service, client.client_id, "wrong"), service)
    events = [event["event"] for event in audit.events()]
    assert "throttle.block" in events and "throttle.refuse" in events
    assert CLIENT_AUTH_ACTION in events  # each wrong secret is audited


def test_a_success_clears_the_client_ids_failures(service: Service) -> None:
    client = register_client("M2M", tokenEndpointAuthMethod="client_secret_post")
    limit = service.config.security.max_failures_per_account
    fail(service, client.client_id, limit - 1, post=True)
    assert works(service, client, post=True)
    fail(service, client.client_id, limit - 1, post=True)
    assert works(service, client, post=True)


def test_an_unknown_client_id_is_counted_like_a_known_one(service: Service) -> None:
    limit = service.config.security.max_failures_per_account
    fail(service, "no-such-client", limit)
    assert_throttled(token_request(service, "no-such-client", "wrong"), service)
    # Without a secret (as a public client would) it is refused alike.
    assert_throttled(service.http.post(service.url("/oauth2/token"), data={
        "grant_type": "client_credentials", "client_id": "no-such-client"}, timeout=30),
        service)


def test_an_unlock_lifts_the_block(service: Service) -> None:
    client = register_client("M2M")
    fail(service, client.client_id, service.config.security.max_failures_per_account)
    assert not works(service, client)
    throttle.unlock_account("oauth-client:" + client.client_id)
    assert works(service, client)


def test_failed_passwords_of_a_username_equal_to_a_client_id_do_not_block_the_client(
        service: Service) -> None:
    """Client ids are public: their throttle account is namespaced apart from usernames."""
    client = register_client("M2M")
    for _ in range(service.config.security.max_failures_per_account):
        throttle.record_failure(service_context(service), action="password",
                                account=client.client_id, origin=RequestOrigin(address="127.0.0.1"))
    assert works(service, client)


def service_context(service: Service) -> ServiceContext:
    return ServiceContext(config=service.config, tokens=TokenService(service.config.issuer))


# --- client id and client address (the tests connect from several loopback addresses) ------


def test_a_client_id_is_refused_only_at_the_address_that_guessed(
        small_limits: Service) -> None:
    """Client ids are public (every authorize URL shows one): wrong secrets from one address
    must not lock the client, and all its users, out everywhere."""
    client = register_client("M2M")
    fail(small_limits, client.client_id, 3, address="127.0.0.11")
    assert_throttled(token_request(small_limits, client.client_id, client.secret or "",
                                   address="127.0.0.11"), small_limits)
    assert works(small_limits, client, address="127.0.0.19")
    assert works(small_limits, register_client("M2M"), address="127.0.0.11")


def test_a_guessing_address_is_blocked_for_every_client(small_limits: Service) -> None:
    victims = [register_client("M2M") for _ in range(5)]
    for victim in victims:
        fail(small_limits, victim.client_id, 1, address="127.0.0.66")
    innocent = register_client("M2M")
    assert_throttled(token_request(small_limits, innocent.client_id, innocent.secret or "",
                                   address="127.0.0.66"), small_limits)
    # Each client id has one failure only: from elsewhere they all still work.
    for victim in victims:
        assert works(small_limits, victim, address="127.0.0.11")


def test_revocation_and_introspection_failures_count_too(small_limits: Service) -> None:
    client = register_client("M2M")
    for path in ("/oauth2/revoke", "/oauth2/introspect", "/oauth2/introspect"):
        response = token_request(small_limits, client.client_id, "wrong", path=path,
                                 address="127.0.0.11")
        assert_oauth_error(response, 401, "invalid_client", "client_authentication_failed")
    assert_throttled(token_request(small_limits, client.client_id, client.secret or "",
                                   address="127.0.0.11"), small_limits)
    assert works(small_limits, client, address="127.0.0.12")


def test_public_clients_and_code_exchange_are_unaffected(small_limits: Service) -> None:
    """Only failed client authentication counts: a bad code is not a guessed secret."""
    rp = OAuthDriver(small_limits)
    client = register_client("SPA")
    authorization = rp.authorization(client)
    for _ in range(6):
        assert_oauth_error(rp.exchange(authorization, code="not-a-code"), 400,
                           "invalid_grant", "invalid_code")
    assert rp.tokens(authorization)["access_token"]
