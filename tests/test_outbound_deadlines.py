"""Servers that answer slowly on purpose cannot hold identityctl's threads: every outbound
exchange (a client metadata document, an identity provider's endpoint, a webhook, SMTP)
ends within its deadline whatever the other side does, a few slots bound how many request
threads wait on other servers at all, a name whose DNS never answers holds only its own
look-up, and the outbox delivers each message on its own clock.

The slow servers are real sockets on 127.0.0.1 (TLS with the test's own CA where the
fetch needs https): one trickles its answer a byte every half second, one accepts and
never says anything. Deadlines are configured to 1 s; a client-side timeout of a few
seconds is what makes a hang fail the test.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from identityctl.services import catalog
from identityctl.services.accounts import federation
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import mail
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from identityctl.services.outbound import DeliveryFailed
from identityctl.store import db, outbox
from identityctl.store.models import OutboxMessage
from tests.conftest import Service, start_service
from tests.support.https import Answer, Publisher, https_publisher
from tests.support.origins import TEST_ORIGIN
from tests.support.smtp import SmtpServer, smtp_server
from tests.test_email import queue_test_message
from tests.test_flow_execution import make_application
from tests.test_oauth_throttle import session_from
from tests.test_webhooks import Receiver, subscribe

#: Seconds between the bytes a trickling server sends (the deadlines are 1 s).
PAUSE = 0.5
#: Seconds a test waits for an answer before calling it a hang.
PATIENCE = 8
PASSWORD = "correct horse battery"
JSON_HEADERS = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: 4000\r\n\r\n")
LOOPBACK = "http://127.0.0.1:33418/callback"


class Staller:
    """A server on 127.0.0.1 that is slow on purpose: on each connection it sends
    ``prefix`` at once, then ``drip`` a byte every PAUSE seconds for as long as the other
    side listens. With nothing to send it accepts the connection and never answers (not
    even a TLS handshake)."""

    def __init__(self, *, prefix: bytes = b"", drip: bytes = b"",
                 tls: ssl.SSLContext | None = None) -> None:
        self.prefix, self.drip, self.tls = prefix, drip, tls
        self.connections = 0
        self._stopping = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str) -> str:
        return f"{'https' if self.tls else 'http'}://localhost:{self.port}{path}"

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed
                return
            self.connections += 1
            threading.Thread(target=self._stall, args=(connection,), daemon=True).start()

    def _stall(self, connection: socket.socket) -> None:
        try:
            if self.tls and (self.prefix or self.drip):
                connection.settimeout(5)
                connection = self.tls.wrap_socket(connection, server_side=True)
            connection.sendall(self.prefix)
            for index in range(len(self.drip) or 10**6):
                if self._stopping.wait(PAUSE):
                    break
                if self.drip:
                    connection.sendall(self.drip[index:index + 1])
        except OSError:  # the other side gave up: what the test wants
            pass
        finally:
            connection.close()

    def close(self) -> None:
        self._stopping.set()
        self._listener.close()


@pytest.fixture(scope="module")
def publisher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Publisher]:
    """A well-behaved HTTPS server for client documents, with the test's own CA."""
    with https_publisher(tmp_path_factory.mktemp("publisher")) as running:
        yield running


@pytest.fixture(scope="module")
def certificates(publisher: Publisher) -> tuple[Path, ssl.SSLContext]:
    """The test CA's file, and a server context with the publisher's certificate for
    localhost (for the slow servers)."""
    folder = publisher.ca_file.parent
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(folder / "server.pem", folder / "server.key")
    return publisher.ca_file, context


def published(publisher: Publisher, fetched: list[str] | None = None, *,
              cache_control: str = "max-age=600") -> str:
    """A new, valid client metadata document at its own URL; ``fetched`` records each
    fetch."""
    path = f"/clients/{uuid.uuid4().hex[:12]}.json"
    url = publisher.url(path)

    def answer() -> Answer:
        if fetched is not None:
            fetched.append(path)
        return 200, {"Content-Type": "application/json", "Cache-Control": cache_control}, \
            json.dumps({"client_id": url, "client_name": "Team CLI", "redirect_uris": [LOOPBACK],
                        "token_endpoint_auth_method": "none"}).encode()
    publisher.routes[path] = answer
    return url


@pytest.fixture(scope="module")
def smtp() -> Iterator[SmtpServer]:
    with smtp_server() as server:
        yield server


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory,
               certificates: tuple[Path, ssl.SSLContext], smtp: SmtpServer
               ) -> Iterator[Service]:
    """One deployment for the module: client documents on (1 s to fetch one, the test CA
    trusted), identity providers given 1 s, mail to a healthy SMTP server."""
    running, stop = start_service(tmp_path_factory.mktemp("service"), settings={
        **smtp.settings(),
        "client_documents = false": "client_documents = true",
        "client_documents_timeout = 5.0": "client_documents_timeout = 1.0",
        "client_documents_allow_private = false": "client_documents_allow_private = true",
        'client_documents_ca_bundle = ""': f'client_documents_ca_bundle = "{certificates[0]}"',
        "provider_timeout = 10.0": "provider_timeout = 1.0"})
    yield running
    stop()


def authorize(service: Service, client_id: str, *, address: str = "") -> requests.Response:
    """An authorization request naming ``client_id`` (a document to fetch), as a browser
    sends it (from ``address``, one of 127.0.0.0/8, when given); a hang fails the test."""
    with session_from(address) if address else requests.Session() as browser:
        return browser.get(service.url("/oauth2/authorize").replace("localhost", "127.0.0.1"),
                           allow_redirects=False, timeout=PATIENCE, params={
                               "response_type": "code", "client_id": client_id,
                               "redirect_uri": LOOPBACK, "code_challenge": "x" * 43,
                               "code_challenge_method": "S256"})


@pytest.mark.parametrize(("prefix", "drip"), [
    (b"", b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 1000),
    (JSON_HEADERS, b" " * 4000),
    (b"", b""),
], ids=["trickled headers", "trickled body", "never answers"])
def test_a_slow_client_document_cannot_hold_a_request_thread(
        deployment: Service, certificates: tuple[Path, ssl.SSLContext], prefix: bytes,
        drip: bytes) -> None:
    staller = Staller(prefix=prefix, drip=drip, tls=certificates[1])
    try:
        answer = authorize(deployment, staller.url(f"/clients/{uuid.uuid4().hex}.json"))
    finally:
        staller.close()
    assert answer.status_code == 400, answer.text
    assert "did not answer within 1 s" in answer.text


def test_eight_trickling_fetches_at_once_leave_health_and_password_sign_in_answering(
        deployment: Service, certificates: tuple[Path, ssl.SSLContext]) -> None:
    """Eight visitors at once (eight addresses) each name a trickling document."""
    username = f"steady-{uuid.uuid4().hex[:6]}"
    directory.create_user(username=username, password=PASSWORD, origin=TEST_ORIGIN)
    application = make_application(auth="default-basic-flow")
    staller = Staller(prefix=JSON_HEADERS, drip=b" " * 4000, tls=certificates[1])
    answers: list[requests.Response] = []
    start = threading.Barrier(9)

    def fetch(address: str) -> None:
        start.wait()
        answers.append(authorize(deployment, staller.url(f"/c/{uuid.uuid4().hex}.json"),
                                 address=address))

    fetching = [threading.Thread(target=fetch, args=(f"127.0.0.{20 + index}",))
                for index in range(8)]
    try:
        for thread in fetching:
            thread.start()
        start.wait()
        health = requests.get(deployment.url("/health"), timeout=PATIENCE)
        signed_in = password_sign_in(deployment, application["id"], username)
        for thread in fetching:
            thread.join(PATIENCE)
    finally:
        staller.close()
    assert health.status_code == 200
    assert signed_in["flowStatus"] == "COMPLETE" and signed_in["assertion"]
    # Each fetch ended at its deadline, or was refused at once: the slots were taken.
    assert len(answers) == 8
    busy = [answer.json() for answer in answers if answer.status_code == 503]
    refused = [answer.text for answer in answers if answer.status_code == 400]
    assert len(busy) + len(refused) == 8
    assert all("did not answer within 1 s" in page for page in refused)
    assert busy and {answer["code"] for answer in busy} == {"upstream_busy"}
    assert "waiting for other servers" in busy[0]["description"]
    assert staller.connections == 8 - len(busy)  # a refused fetch never connected


def password_sign_in(service: Service, application_id: str, username: str) -> dict[str, Any]:
    with requests.Session() as browser:
        started = browser.post(service.url("/flow/execute"), timeout=PATIENCE, json={
            "applicationId": application_id, "flowType": "AUTHENTICATION"})
        assert started.status_code == 200, started.text
        done = browser.post(service.url("/flow/execute"), timeout=PATIENCE, json={
            "executionId": started.json()["executionId"], "action": "password",
            "inputs": {"username": username, "password": PASSWORD}})
        assert done.status_code == 200, done.text
        return done.json()


def federated_callback(service: Service, provider_port: int) -> requests.Response:
    """Anyone may start a federated sign-in (here through a GitHub provider at
    http://127.0.0.1:``provider_port``) and post back any code with the real state; the
    callback's answer, for which identityctl asks the provider's token endpoint."""
    provider = federation.add_provider(
        ServiceContext.for_config(service.config), kind="github", client_id="gh-client",
        client_secret="gh-secret", handle=f"gh-{uuid.uuid4().hex[:8]}",
        web_url=f"http://127.0.0.1:{provider_port}",
        api_url=f"http://127.0.0.1:{provider_port}/api", origin=RequestOrigin(actor="test"))
    application = catalog.applications.create_application({
        **catalog.applications.application_templates()["SPA"],
        "name": f"Federated {uuid.uuid4().hex[:6]}",
        "themeId": catalog.themes.list_themes()[0]["id"]}, origin=TEST_ORIGIN)[0]
    with requests.Session() as browser:
        step = browser.post(service.url("/flow/execute"), timeout=PATIENCE, json={
            "applicationId": application["id"], "flowType": "AUTHENTICATION"}).json()
        away = browser.post(service.url("/flow/execute"), timeout=PATIENCE, json={
            "executionId": step["executionId"], "action": "federated",
            "inputs": {"idpId": provider.id}}).json()
        state = parse_qs(urlsplit(away["data"]["redirectURL"]).query)["state"][0]
        return browser.post(service.url("/flow/execute"), timeout=PATIENCE, json={
            "executionId": step["executionId"], "action": "callback",
            "inputs": {"code": "anything", "state": state}})


def test_a_trickling_identity_provider_cannot_hold_an_anonymous_sign_in(
        deployment: Service) -> None:
    """The token endpoint that trickles its answer is cut off at the provider's deadline."""
    staller = Staller(prefix=JSON_HEADERS, drip=b" " * 4000)
    try:
        back = federated_callback(deployment, staller.port)
    finally:
        staller.close()
    assert staller.connections == 1
    assert back.status_code == 200, back.text
    assert back.json()["failureReason"] == "federation_unreachable"  # the page says so


def test_names_whose_dns_never_answers_cannot_get_another_clients_document_refused(
        deployment: Service, publisher: Publisher, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stranger names documents on hosts whose DNS never answers: each look-up holds its
    thread until the system resolver gives up (it cannot be cancelled), long after the
    fetch's deadline. Four such names took every thread of a shared resolver pool; the next
    name, a client's own, then waited behind them, "did not resolve within 1 s", and that
    refusal was remembered against its URL for 30 s. Each look-up has a thread of its own
    now: the client's document is fetched."""
    release, real = threading.Event(), socket.getaddrinfo

    def third_party_dns(host: Any, *args: Any, **kwargs: Any) -> Any:
        if str(host).endswith(".stuck.test"):  # a DNS server that never answers
            release.wait(PATIENCE * 2)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", third_party_dns)
    try:
        with ThreadPoolExecutor(2) as pool:  # two at a time: the slots of strangers' URLs
            for pair in (("127.0.0.40", "127.0.0.41"), ("127.0.0.42", "127.0.0.43")):
                answers = list(pool.map(lambda address: authorize(
                    deployment, f"https://n{uuid.uuid4().hex[:8]}.stuck.test/c.json",
                    address=address), pair))
                assert [answer.status_code for answer in answers] == [400, 400]
                assert all("did not resolve within 1 s" in answer.text for answer in answers)
        fetched: list[str] = []
        wanted = authorize(deployment, published(publisher, fetched), address="127.0.0.44")
    finally:
        release.set()
    assert wanted.status_code == 302, wanted.text
    assert len(fetched) == 1


def test_a_trickling_smtp_server_cannot_hold_a_delivery(deployment: Service) -> None:
    """The greeting comes a byte every half second: the hand-over ends at
    deliveries.timeout all the same."""
    staller = Staller(drip=b"220 " + b"s" * 10_000)
    config = deployment.config
    slow = replace(config, email=replace(config.email, smtp_host="127.0.0.1",
                                         smtp_port=staller.port),
                   deliveries=replace(config.deliveries, timeout=1))
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "a@example.com", "b@example.com", "x"
    outcome: list[BaseException] = []

    def hand_over() -> None:
        try:
            mail.send(slow, message)
        except DeliveryFailed as failure:
            outcome.append(failure)

    sending = threading.Thread(target=hand_over, daemon=True)
    try:
        sending.start()
        sending.join(PATIENCE)
    finally:
        staller.close()
    assert not sending.is_alive(), "the SMTP hand-over outlived its deadline"
    assert outcome and f"127.0.0.1:{staller.port}" in str(outcome[0])


def test_a_slow_webhook_endpoint_does_not_delay_a_mail(deployment: Service,
                                                       smtp: SmtpServer) -> None:
    receiver = Receiver()
    receiver.holding.set()  # the endpoint takes the event and does not answer
    try:
        subscribe(receiver, "user.create")
        directory.create_user(username=f"hooked-{uuid.uuid4().hex[:6]}",
                              origin=RequestOrigin(actor="test"))
        assert receiver.held.wait(PATIENCE), "the webhook was not delivered"
        to = f"person-{uuid.uuid4().hex[:8]}@example.com"
        queue_test_message(deployment, to)
        smtp.mailbox.wait_for(to, timeout=PATIENCE)
        assert receiver.holding.is_set()  # (still held: the mail did not wait for it)
    finally:
        receiver.holding.clear()
        receiver.server.shutdown()


def test_a_message_that_breaks_its_handler_is_retried_then_given_up_alone(
        deployment: Service, smtp: SmtpServer) -> None:
    """A message the handler fails on with an error of its own (here a payload without a
    body, as a bug or a damaged row would leave it) is that message's failure: it is
    retried with backoff and given up after the kind's retry time, and the mail queued
    after it goes out."""
    broken_to = f"broken-{uuid.uuid4().hex[:8]}@example.com"
    with db.transaction():
        broken = outbox.enqueue(kind=mail.EMAIL, target=broken_to,
                                payload={"subject": "no body"})
    to = f"person-{uuid.uuid4().hex[:8]}@example.com"
    queue_test_message(deployment, to)
    smtp.mailbox.wait_for(to, timeout=PATIENCE)
    entry = wait_for_entry(broken_to, lambda entry: entry.attempts >= 1)
    assert entry.state == "retrying" and "KeyError" in entry.last_error
    # Past the kind's retry time (give_up_hours), the next attempt gives it up.
    give_up = deployment.config.deliveries.give_up_hours * 3600
    OutboxMessage.update(created_at=time.time() - give_up - 1,
                         next_attempt_at=time.time()).where(OutboxMessage.id == broken).execute()
    entry = wait_for_entry(broken_to, lambda entry: entry.failed_at is not None)
    assert entry.state == "given up" and entry.attempts == 2
    assert smtp.mailbox.to(broken_to) == []


def wait_for_entry(to: str, done: Any) -> outbox.OutboxEntry:
    deadline = time.monotonic() + PATIENCE
    while True:
        [entry] = [entry for entry in mail.recent() if entry.target == to]
        if done(entry):
            return entry
        assert time.monotonic() < deadline, entry
        time.sleep(0.1)
