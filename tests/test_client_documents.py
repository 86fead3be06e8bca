"""Client ID Metadata Documents: a client_id that is an https URL names the client's own
description, fetched by identityctl from a real local HTTPS server with a CA of the test's.

The fetch is hardened (services/outbound.py): a private address, a redirect, an oversized
or slow document, a document whose client_id is not its URL, or one with redirect URIs a
self-registered client may not have is each refused with a page saying why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from identityctl.oauth.client_assertion import ASSERTION_TYPE
from identityctl.services import catalog
from tests.conftest import Service, added_applications, start_service
from tests.support.https import Answer, Publisher, https_publisher
from tests.support.oauth import OAuthDriver, RegisteredClient, assert_oauth_error
from tests.support.openid_client import ec_key, public
from tests.support.origins import TEST_ORIGIN
from tests.test_private_key_jwt import assertion

PATH = "/clients/cli.json"
LOOPBACK = "http://127.0.0.1:33418/callback"


def document(publisher: Publisher, **fields: Any) -> dict[str, Any]:
    return {"client_id": publisher.url(PATH), "client_name": "Team CLI",
            "redirect_uris": [LOOPBACK], "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none", **fields}


def serving(body: Any, *, status: int = 200, **headers: str) -> Any:
    def answer() -> Answer:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return status, {"Content-Type": "application/json", **headers}, raw
    return answer


@pytest.fixture
def publisher(tmp_path: Path) -> Iterator[Publisher]:
    with https_publisher(tmp_path) as running:
        yield running


def deployment(tmp_path: Path, publisher: Publisher, *, allow_private: bool = True
               ) -> tuple[Service, Any]:
    return start_service(tmp_path / "service", settings={
        "client_documents = false": "client_documents = true",
        "client_documents_timeout = 5.0": "client_documents_timeout = 1.0",
        "client_documents_allow_private = false":
            f"client_documents_allow_private = {str(allow_private).lower()}",
        'client_documents_ca_bundle = ""':
            f'client_documents_ca_bundle = "{publisher.ca_file}"'})


@pytest.fixture
def service_with_documents(tmp_path: Path, publisher: Publisher) -> Iterator[Service]:
    (tmp_path / "service").mkdir()
    running, stop = deployment(tmp_path, publisher)
    yield running
    stop()


def test_a_client_described_by_its_document_signs_a_person_in(
        service_with_documents: Service, publisher: Publisher) -> None:
    service = service_with_documents
    metadata = service.get("/.well-known/oauth-authorization-server").json()
    assert metadata["client_id_metadata_document_supported"] is True
    publisher.routes[PATH] = serving(document(publisher), **{"Cache-Control": "max-age=600"})
    client = RegisteredClient(application_id="", client_id=publisher.url(PATH), secret=None,
                              redirect_uri="http://127.0.0.1:50001/callback",
                              auth_method="none")
    rp = OAuthDriver(service)
    tokens = rp.tokens(rp.authorization(client, scope="openid profile"))
    assert tokens["refresh_token"]
    application = catalog.applications.require_application_by_client_id(publisher.url(PATH))
    settings = catalog.applications.oauth_config(application)
    assert settings["clientDocument"] is True and settings["publicClient"] is True
    assert application["name"].startswith("Team CLI (localhost) [")
    # Cached as its Cache-Control allows: the document may go away meanwhile.
    del publisher.routes[PATH]
    assert rp.authorize(client).status_code == 302


def test_a_document_may_name_the_clients_keys_and_its_code_needs_its_signature(
        service_with_documents: Service, publisher: Publisher) -> None:
    """The same rules as registration: a described client may sign with keys it publishes
    (private_key_jwt at jwks_uri) instead of being public."""
    service, key = service_with_documents, ec_key()
    publisher.routes["/jwks.json"] = serving({"keys": [public(key)]})
    publisher.routes[PATH] = serving(document(
        publisher, token_endpoint_auth_method="private_key_jwt",
        jwks_uri=publisher.url("/jwks.json")), **{"Cache-Control": "no-store"})
    client = RegisteredClient(application_id="", client_id=publisher.url(PATH), secret=None,
                              redirect_uri=LOOPBACK, auth_method="private_key_jwt")
    rp = OAuthDriver(service)
    authorization = rp.authorization(client, scope="openid")
    unsigned = rp.exchange(authorization, client_id=client.client_id)
    assert_oauth_error(unsigned, 401, "invalid_client")
    signed = rp.exchange(authorization, client_assertion_type=ASSERTION_TYPE,
                         client_assertion=assertion(service, client.client_id, key))
    assert signed.status_code == 200, signed.text
    settings = catalog.applications.oauth_config(
        catalog.applications.require_application_by_client_id(client.client_id))
    assert settings["publicClient"] is False
    assert settings["jwksUri"] == publisher.url("/jwks.json")
    # The document turning the client public again (read anew once its caching is over:
    # a minute at least, no-store too) is refused plainly; the grants were made to a client
    # that proved itself with a key.
    publisher.routes[PATH] = serving(document(publisher), **{"Cache-Control": "no-store"})
    described = catalog.applications.require_application_by_client_id(client.client_id)
    catalog.applications.update_application(described, marks={"clientDocument": True,
                                                 "documentExpiresAt": 0},
                                            origin=TEST_ORIGIN)  # a minute later
    assert "how the client authenticates" in _refusal(service, client.client_id)
    assert catalog.applications.oauth_config(catalog.applications.require_application_by_client_id(
        client.client_id))["publicClient"] is False


def _refusal(service: Service, client_id: str) -> str:
    answer = service.get("/oauth2/authorize", allow_redirects=False, params={
        "response_type": "code", "client_id": client_id, "redirect_uri": LOOPBACK,
        "code_challenge": "x" * 43, "code_challenge_method": "S256"})
    assert answer.status_code == 400, answer.text
    assert "client_document_refused" in answer.text or "metadata document" in answer.text
    return answer.text


@pytest.mark.parametrize(("route", "reason"), [
    ("redirect", "redirect"), ("large", "over 5120 bytes"), ("slow", "did not answer"),
    ("mismatch", "is not its URL"), ("plain_http_redirect", "must use https"),
    ("not_json", "not a JSON document"), ("missing", "HTTP 404"),
])
def test_each_unsafe_or_invalid_document_is_refused_saying_why(
        service_with_documents: Service, publisher: Publisher, route: str,
        reason: str) -> None:
    path = f"/clients/{route}.json"
    url = publisher.url(path)
    answers = {
        "redirect": serving(b"", status=302, Location=publisher.url(PATH)),
        "large": serving({**document(publisher), "client_id": url, "padding": "x" * 6000}),
        "slow": serving({**document(publisher), "client_id": url}),
        "mismatch": serving(document(publisher)),  # names another URL
        "plain_http_redirect": serving({**document(publisher), "client_id": url,
                                        "redirect_uris": ["http://evil.example/cb"]}),
        "not_json": serving(b"<html>hello</html>"),
    }
    if route in answers:
        publisher.routes[path] = answers[route]
    if route == "slow":
        publisher.trickle[path] = 0.2
    assert reason in _refusal(service_with_documents, url)
    assert added_applications() == []


def test_a_document_on_a_private_address_is_refused_unless_configured(
        tmp_path: Path, publisher: Publisher) -> None:
    (tmp_path / "service").mkdir()
    publisher.routes[PATH] = serving(document(publisher))
    service, stop = deployment(tmp_path, publisher, allow_private=False)
    try:
        assert "not a public address" in _refusal(service, publisher.url(PATH))
    finally:
        stop()


def test_a_document_served_with_a_certificate_nobody_trusts_is_refused(
        tmp_path: Path, publisher: Publisher) -> None:
    (tmp_path / "service").mkdir()
    publisher.routes[PATH] = serving(document(publisher))
    service, stop = start_service(tmp_path / "service", settings={
        "client_documents = false": "client_documents = true",
        "client_documents_allow_private = false": "client_documents_allow_private = true"})
    try:
        assert "TLS failed" in _refusal(service, publisher.url(PATH))
    finally:
        stop()
