"""Where OAuth's features meet, attacked over HTTP as an outsider would.

- Client metadata documents that make a new application are registrations: they share the
  address's ``registrations_per_address`` with ``/oauth2/register``. Fetches that fail use
  up the address's ``document_fetches_per_address`` only, and a fetch refused for want of a
  slot uses up nothing.
- Fetches of strangers' URLs cannot keep everybody else waiting: one address holds one slot
  at a time, a document is reused for a minute at least whatever its caching headers say,
  and identity providers have slots of their own.
- A resource server cannot declare identityctl's own scopes, and no token is for one of
  identityctl's own resources (its issuer, ``/mcp``) together with a resource server.
- The consent page writes an internationalized host in its ``xn--`` form, the Unicode beside.
- A decoy's ``allowCredentials`` entries have the shape of a real passkey's, transports too.

One deployment serves the module; each attack comes from its own loopback address.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from identityctl.oauth.consent import shown_host
from identityctl.services import catalog
from identityctl.store import catalog as catalog_store
from tests.conftest import Service, start_service
from tests.support.flows import FlowClient
from tests.support.https import Answer, Publisher, https_publisher
from tests.support.oauth import (
    OAuthDriver,
    RegisteredClient,
    assert_oauth_error,
    query_of,
    register_client,
)
from tests.support.origins import TEST_ORIGIN
from tests.test_consent import Person
from tests.test_flow_execution import make_application, new_username, sign_up
from tests.test_oauth_throttle import session_from
from tests.test_outbound_deadlines import PATIENCE, Staller, federated_callback, published

LOOPBACK = "http://127.0.0.1:33418/callback"
NOTES = "https://notes.example/mcp"
ALLOWANCE = 3
#: Client metadata documents one address may have fetched per failure window.
FETCHES = 8


@pytest.fixture(scope="module")
def publisher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Publisher]:
    with https_publisher(tmp_path_factory.mktemp("publisher")) as running:
        yield running


@pytest.fixture(scope="module")
def seams(tmp_path_factory: pytest.TempPathFactory, publisher: Publisher) -> Iterator[Service]:
    """Open registration, client documents from the test's publisher (5 s to fetch one,
    longer than any test holds one), small allowances, and a registered resource server
    (the team's notes)."""
    running, stop = start_service(tmp_path_factory.mktemp("seams"), settings={
        'dynamic_registration = "off"': 'dynamic_registration = "open"',
        "registrations_per_address = 20": f"registrations_per_address = {ALLOWANCE}",
        "document_fetches_per_address = 60": f"document_fetches_per_address = {FETCHES}",
        "client_documents = false": "client_documents = true",
        "client_documents_allow_private = false": "client_documents_allow_private = true",
        'client_documents_ca_bundle = ""': f'client_documents_ca_bundle = "{publisher.ca_file}"'})
    assert cli(running, "resource-server", "add", NOTES, "--scope", "notes:read").exit_code == 0
    yield running
    stop()


def cli(service: Service, *args: str) -> Any:
    return CliRunner().invoke(cli_app, ["--config", str(service.config_path), *args])


def from_address(service: Service, address: str) -> Service:
    """The same service, reached from ``address`` (127.0.0.0/8 is all loopback)."""
    return dataclasses.replace(service, http=session_from(address),
                               base_url=service.base_url.replace("localhost", "127.0.0.1"))


# --- registration: one allowance for registrations and client documents --------------------


def authorize(service: Service, client_id: str) -> Any:
    return service.get("/oauth2/authorize", allow_redirects=False, params={
        "response_type": "code", "client_id": client_id, "redirect_uri": LOOPBACK,
        "scope": "openid", "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        "code_challenge_method": "S256"})


def test_client_documents_cannot_fill_the_catalog_from_one_address(
        seams: Service, publisher: Publisher) -> None:
    """Sixty document URLs from one address made sixty applications; now new documents and
    registrations from one address share one allowance."""
    attacker, fetched = from_address(seams, "127.0.0.71"), []
    registered = attacker.post("/oauth2/register", {
        "client_name": "Notes assistant", "redirect_uris": [LOOPBACK]})
    assert registered.status_code == 201, registered.text
    first = published(publisher, fetched)
    documents = [first, *(published(publisher, fetched) for _ in range(ALLOWANCE - 1))]
    answers = [authorize(attacker, url).status_code for url in documents]
    assert answers == [302] * (ALLOWANCE - 1) + [429], answers
    assert catalog_store.find_application_by_client_id(documents[-1]) is None
    assert len(fetched) == ALLOWANCE - 1  # refused before it is even fetched
    refused = attacker.post("/oauth2/register", {"client_name": "More", "redirect_uris":
                                                 [LOOPBACK]})
    assert refused.status_code == 429 and refused.json()["code"] == "too_many_attempts"
    # A document already read is no new registration; another address has its own allowance.
    assert authorize(attacker, first).status_code == 302
    assert authorize(from_address(seams, "127.0.0.72"), documents[-1]).status_code == 302


def missing(publisher: Publisher) -> str:
    """A document URL that answers 404 (as any made-up URL a page sends a browser to)."""
    return publisher.url(f"/nothing-here-{uuid.uuid4().hex[:12]}.json")


def test_a_page_cannot_use_up_its_visitors_registrations_with_documents_that_fail(
        seams: Service, publisher: Publisher) -> None:
    """Any web page can send its visitors' browsers to /oauth2/authorize with made-up
    document URLs: twenty that answered 400 each counted as a registration, and so did
    requests refused 503 upstream_busy, so the visitor's address then got 429 for a client
    it meant to use and at /oauth2/register. Only a document that makes an application is a
    registration now; a refused fetch costs a document fetch; a fetch refused for want of a
    slot costs nothing."""
    visitor = from_address(seams, "127.0.0.73")
    refused = [authorize(visitor, missing(publisher)) for _ in range(ALLOWANCE + 1)]
    assert [answer.status_code for answer in refused] == [400] * (ALLOWANCE + 1)
    held = Held(publisher)
    with ThreadPoolExecutor(1) as pool:
        holding = pool.submit(authorize, from_address(seams, "127.0.0.73"), held.document())
        try:
            assert eventually(lambda: held.arrivals == 1)
            busy = [authorize(visitor, published(publisher, [])) for _ in range(ALLOWANCE + 1)]
        finally:
            held.release()
        assert holding.result().status_code == 302  # the one registration so far
    assert [answer.status_code for answer in busy] == [503] * (ALLOWANCE + 1)
    assert {answer.json()["code"] for answer in busy} == {"upstream_busy"}
    assert authorize(visitor, published(publisher, [])).status_code == 302
    registered = visitor.post("/oauth2/register", {"client_name": "Notes assistant",
                                                   "redirect_uris": [LOOPBACK]})
    assert registered.status_code == 201, registered.text


def test_document_fetches_have_an_allowance_that_never_blocks_registration(
        seams: Service, publisher: Publisher) -> None:
    visitor, fetched = from_address(seams, "127.0.0.74"), []
    refused = [authorize(visitor, missing(publisher)).status_code for _ in range(FETCHES)]
    assert refused == [400] * FETCHES
    over = authorize(visitor, published(publisher, fetched))
    assert over.status_code == 429 and fetched == []  # refused before it is fetched
    registered = visitor.post("/oauth2/register", {"client_name": "Notes assistant",
                                                   "redirect_uris": [LOOPBACK]})
    assert registered.status_code == 201, registered.text


# --- the slots of fetches: strangers' URLs cannot keep everybody else waiting ---------------


class Held:
    """Valid client documents that say ``Cache-Control: no-store`` and whose fetches wait
    until the test releases them (as a server answering just within the deadline does);
    ``arrivals`` counts the fetches that waited."""

    def __init__(self, publisher: Publisher) -> None:
        self.publisher, self.arrivals = publisher, 0
        self._released = threading.Event()

    def document(self, *, first_at_once: bool = False) -> str:
        """A new document's URL; ``first_at_once``: its first fetch is answered at once."""
        path = f"/held/{uuid.uuid4().hex[:12]}.json"
        url, served = self.publisher.url(path), []

        def answer() -> Answer:
            if served or not first_at_once:
                self.arrivals += 1
                self._released.wait(PATIENCE)
            served.append(path)
            return 200, {"Content-Type": "application/json", "Cache-Control": "no-store"}, \
                json.dumps({"client_id": url, "client_name": "Held", "redirect_uris": [LOOPBACK],
                            "token_endpoint_auth_method": "none"}).encode()
        self.publisher.routes[path] = answer
        return url

    def release(self) -> None:
        self._released.set()


def eventually(condition: Callable[[], bool]) -> bool:
    """Whether ``condition`` holds within PATIENCE seconds."""
    deadline = time.monotonic() + PATIENCE
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture(scope="module")
def provider() -> Iterator[Staller]:
    """A GitHub stand-in whose token endpoint refuses any code at once."""
    body = b'{"error": "bad_verification_code"}'
    refusing = Staller(prefix=b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                              b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
                              % (len(body), body))
    yield refusing
    refusing.close()


def reaches_the_provider(seams: Service, provider: Staller) -> bool:
    """Whether a federated sign-in's callback got to ask the provider (it refuses the code:
    federation_failed), rather than a 503 upstream_busy."""
    before = provider.connections
    back = federated_callback(seams, provider.port)
    return back.status_code == 200 and back.json()["failureReason"] == "federation_failed" \
        and provider.connections == before + 1


def test_one_party_looping_on_a_no_store_document_leaves_everybody_else_the_slots(
        seams: Service, publisher: Publisher, provider: Staller) -> None:
    """A valid document that says no-store, answered just within the deadline; after its
    first authorization request, two threads from one address loop on authorize naming it.
    It was fetched anew every time, so two connections kept every outbound slot busy: a
    federated sign-in and a person's new client document got 503 upstream_busy. It is
    reused for a minute at least now, whatever it says."""
    held, attacker = Held(publisher), "127.0.0.75"
    url = held.document(first_at_once=True)
    assert authorize(from_address(seams, attacker), url).status_code == 302
    with ThreadPoolExecutor(2) as pool:
        looping = [pool.submit(authorize, from_address(seams, attacker), url) for _ in "ab"]
        try:
            assert eventually(lambda: held.arrivals == 2 or all(
                each.done() for each in looping))
            person = authorize(from_address(seams, "127.0.0.76"), published(publisher, []))
            signed_in = reaches_the_provider(seams, provider)
        finally:
            held.release()
        assert [each.result().status_code for each in looping] == [302, 302]
    assert person.status_code == 302, person.text
    assert signed_in
    assert held.arrivals == 0  # read once


def test_one_address_holds_one_strangers_fetch_and_no_identity_providers_slot(
        seams: Service, publisher: Publisher, provider: Staller) -> None:
    """With new documents each time (nothing cached helps), one address still holds one
    slot: its second fetch at once is 503 upstream_busy. And when strangers' URLs hold every
    slot they have (two addresses here), a federated sign-in still reaches its provider."""
    held = Held(publisher)
    with ThreadPoolExecutor(2) as pool:
        try:
            first = pool.submit(authorize, from_address(seams, "127.0.0.77"), held.document())
            assert eventually(lambda: held.arrivals == 1)
            second = authorize(from_address(seams, "127.0.0.77"), held.document())
            other = pool.submit(authorize, from_address(seams, "127.0.0.78"), held.document())
            assert eventually(lambda: held.arrivals == 2)
            capped = authorize(from_address(seams, "127.0.0.79"), published(publisher, []))
            signed_in = reaches_the_provider(seams, provider)
        finally:
            held.release()
        assert second.status_code == 503 and second.json()["code"] == "upstream_busy"
        assert first.result().status_code == 302 and other.result().status_code == 302
    assert "this address" in second.json()["description"]
    assert capped.status_code == 503 and capped.json()["code"] == "upstream_busy"
    assert signed_in


# --- reserved scopes, and never identityctl's own resources with a resource server ---------


@pytest.mark.parametrize("scope", ["system", "account", "client_registration"])
def test_a_resource_server_cannot_declare_identityctls_own_scopes(
        seams: Service, scope: str) -> None:
    """Else every self-registered client could ask for ``system`` (registrable scopes are the
    resource servers' scopes) and a token for the server would carry it."""
    added = cli(seams, "resource-server", "add", f"https://{scope}.example/api", "--scope",
                "x:read", "--scope", scope)
    assert added.exit_code != 0 and "identityctl's own" in added.output, added.output
    updated = cli(seams, "resource-server", "update", NOTES, "--scope", scope)
    assert updated.exit_code != 0 and "identityctl's own" in updated.output, updated.output
    registered = seams.post("/oauth2/register", {
        "client_name": "Wants power", "redirect_uris": [LOOPBACK], "scope": f"openid {scope}"})
    assert registered.status_code == 400, registered.text


def test_apply_cannot_declare_a_reserved_scope_either(seams: Service, tmp_path: Path) -> None:
    document = tmp_path / "servers.yaml"
    document.write_text(yaml.safe_dump({
        "apiVersion": "identityctl/v1", "kind": "Configuration", "resourceServers": [
            {"identifier": NOTES, "name": NOTES, "scopes": ["notes:read"]},
            {"identifier": "https://admin.example/api", "scopes": ["system"]}]}))
    applied = cli(seams, "apply", "-f", str(document))
    assert applied.exit_code != 0 and "identityctl's own" in applied.output, applied.output


@pytest.fixture(scope="module")
def m2m(seams: Service) -> RegisteredClient:
    return register_client("M2M", scopes=["system", "notes:read"])


@pytest.mark.parametrize("own", ["mcp", "issuer"])
def test_a_client_credentials_token_is_never_for_identityctl_and_a_resource_server(
        seams: Service, m2m: RegisteredClient, own: str) -> None:
    """A token for /mcp and the notes server would let the notes server replay it at /mcp."""
    rp = OAuthDriver(seams)
    mine = seams.config.mcp_audience if own == "mcp" else seams.config.issuer
    mixed = rp.client_post("/oauth2/token", m2m, {"grant_type": "client_credentials",
                                                  "resource": [mine, NOTES]})
    assert_oauth_error(mixed, 400, "invalid_target", "resource_mix")
    for alone, scope in ((mine, "system"), (NOTES, "notes:read")):
        answer = rp.client_post("/oauth2/token", m2m, {"grant_type": "client_credentials",
                                                       "resource": alone, "scope": scope})
        assert answer.status_code == 200, answer.text
        assert rp.verified(answer.json()["access_token"], audience=alone)["aud"] in (
            alone, [alone])


def test_a_person_cannot_be_asked_for_a_token_for_mcp_and_a_resource_server(
        seams: Service) -> None:
    rp = OAuthDriver(seams)
    client = register_client("SPA", scopes=["openid", "system", "notes:read"])
    refused = rp.authorize(client, resource=[seams.config.mcp_audience, NOTES],
                           scope="openid system", state="s", code_challenge="c" * 43,
                           code_challenge_method="S256")
    assert refused.status_code == 302
    assert query_of(refused.headers["Location"])["error"] == "invalid_target"
    # Nor at the token endpoint when the authorization named no resource.
    authorization = rp.authorization(client, scope="openid")
    exchanged = rp.exchange(authorization, resource=[seams.config.mcp_audience, NOTES])
    assert_oauth_error(exchanged, 400, "invalid_target", "resource_mix")


# --- the consent page: look-alike hosts ----------------------------------------------------


@pytest.mark.parametrize(("host", "shown"), [
    ("\u0430pple.com", "xn--pple-43d.com (\u0430pple.com)"),  # Cyrillic a
    ("xn--pple-43d.com", "xn--pple-43d.com (\u0430pple.com)"),  # the same host, spelt ASCII
    ("b\u00fccher.example", "xn--bcher-kva.example (b\u00fccher.example)"),
    ("tools.example.com", "tools.example.com"),
    ("127.0.0.1", "127.0.0.1"),
    ("m\u00fcnchen.xn--zz", "m\\xfcnchen.xn--zz"),  # not a valid name: escaped, never Unicode
])
def test_a_host_is_shown_in_a_form_no_look_alike_letter_can_imitate(host: str,
                                                                     shown: str) -> None:
    assert shown_host(host) == shown


def test_the_consent_page_shows_a_look_alike_client_host_as_punycode(seams: Service) -> None:
    url = "https://\u0430pple.com/clients/app.json"
    document = catalog.applications.application_templates()["SPA"]
    document.pop("themeId", None)
    document["name"] = "Apple"
    document["inboundAuthConfig"][0]["config"].update(clientId=url, redirectUris=[LOOPBACK])
    application, _ = catalog.applications.create_application(document, marks={
        "clientDocument": True, "documentExpiresAt": time.time() + 3600}, origin=TEST_ORIGIN)
    client = RegisteredClient(application_id=application["id"], client_id=url, secret=None,
                              redirect_uri=LOOPBACK, auth_method="none")
    _, answer = Person(seams).signs_in_for(client, scope="openid")
    assert answer["consent"]["clientHost"] == "xn--pple-43d.com (\u0430pple.com)"


# --- decoy credentials look like real ones, transports included ----------------------------


def test_a_decoys_allow_credentials_have_the_shape_of_a_real_passkeys(
        seams: Service) -> None:
    """A real passkey made through the hosted page's flow keeps its transports; a decoy
    for an unknown name carries transports too, so neither their presence nor their
    absence tells a stranger whether the name has an account."""
    app = make_application()
    real = new_username()
    signing_up = FlowClient(seams, app["id"])
    signing_up.authenticator.transports = ["hybrid", "internal"]
    sign_up(signing_up, real)

    def offered(username: str) -> list[dict[str, Any]]:
        flow = FlowClient(seams, app["id"])
        flow.start()
        return json.loads(flow.act("passkey", username=username)["data"]["additionalData"]
                          ["passkeyChallenge"])["allowCredentials"]

    def shape(entry: dict[str, Any]) -> Any:
        return tuple(sorted(entry)), entry["type"]

    [credential] = offered(real)
    assert credential["transports"] == ["hybrid", "internal"]
    decoys = [entry for index in range(8) for entry in offered(f"nobody-{index}-{real}")]
    assert {shape(entry) for entry in decoys} == {shape(credential)}
    assert all(entry["transports"] for entry in decoys)
