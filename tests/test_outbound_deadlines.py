"""Servers that answer slowly on purpose cannot hold identityctl's threads: every outbound
exchange (a client metadata document, an identity provider's endpoint, a webhook, SMTP)
ends within its deadline whatever the other side does, a few slots bound how many request
threads wait on other servers at all, and the outbox delivers each message on its own clock.

The slow servers are real sockets on 127.0.0.1 (TLS with the test's own CA where the
fetch needs https): one trickles its answer a byte every half second, one accepts and
never says anything. Deadlines are configured to 1 s; a client-side timeout of a few
seconds is what makes a hang fail the test.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from identityctl.services import catalog, directory, federation, mail
from identityctl.services.context import ServiceContext
from identityctl.services.outbound import DeliveryFailed
from identityctl.store import db, outbox
from identityctl.store.models import OutboxMessage
from tests.conftest import Service, start_service
from tests.support.https import _certificates
from tests.support.smtp import SmtpServer, smtp_server
from tests.test_email import queue_test_message
from tests.test_flow_execution import make_application
from tests.test_webhooks import Receiver, subscribe

#: Seconds between the bytes a trickling server sends (the deadlines are 1 s).
PAUSE = 0.5
#: Seconds a test waits for an answer before calling it a hang.
PATIENCE = 8
PASSWORD = "correct horse battery"
JSON_HEADERS = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: 4000\r\n\r\n")


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
def certificates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ssl.SSLContext]:
    """The test CA's file, and a server context with its certificate for localhost."""
    ca, cert, key = _certificates(tmp_path_factory.mktemp("ca"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return ca, context


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


def authorize(service: Service, client_id: str) -> requests.Response:
    """An authorization request naming ``client_id`` (a document to fetch), as a browser
    sends it; a hang fails the test."""
    return requests.get(service.url("/oauth2/authorize"), allow_redirects=False,
                        timeout=PATIENCE, params={
                            "response_type": "code", "client_id": client_id,
                            "redirect_uri": "http://127.0.0.1:33418/callback",
                            "code_challenge": "x" * 43, "code_challenge_method": "S256"})


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
    username = f"steady-{uuid.uuid4().hex[:6]}"
    directory.create_user(username=username, password=PASSWORD)
    application = make_application(auth="default-basic-flow")
    staller = Staller(prefix=JSON_HEADERS, drip=b" " * 4000, tls=certificates[1])
    answers: list[requests.Response] = []
    start = threading.Barrier(9)

    def fetch() -> None:
        start.wait()
        answers.append(authorize(deployment, staller.url(f"/c/{uuid.uuid4().hex}.json")))

    fetching = [threading.Thread(target=fetch) for _ in range(8)]
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


def test_a_trickling_identity_provider_cannot_hold_an_anonymous_sign_in(
        deployment: Service) -> None:
    """Anyone may start a federated sign-in and post back any code with the real state:
    the token endpoint that trickles its answer is cut off at the provider's deadline."""
    staller = Staller(prefix=JSON_HEADERS, drip=b" " * 4000)
    try:
        provider = federation.add_provider(
            ServiceContext.for_config(deployment.config), kind="github",
            client_id="gh-client", client_secret="gh-secret", handle=f"slow-{staller.port}",
            web_url=f"http://127.0.0.1:{staller.port}",
            api_url=f"http://127.0.0.1:{staller.port}/api", actor="test")
        application = catalog.create_application({
            **catalog.application_templates()["SPA"], "name": f"Slow {uuid.uuid4().hex[:6]}",
            "themeId": catalog.list_themes()[0]["id"]})[0]
        with requests.Session() as browser:
            step = browser.post(deployment.url("/flow/execute"), timeout=PATIENCE, json={
                "applicationId": application["id"], "flowType": "AUTHENTICATION"}).json()
            away = browser.post(deployment.url("/flow/execute"), timeout=PATIENCE, json={
                "executionId": step["executionId"], "action": "federated",
                "inputs": {"idpId": provider.id}}).json()
            state = parse_qs(urlsplit(away["data"]["redirectURL"]).query)["state"][0]
            back = browser.post(deployment.url("/flow/execute"), timeout=PATIENCE, json={
                "executionId": step["executionId"], "action": "callback",
                "inputs": {"code": "anything", "state": state}})
    finally:
        staller.close()
    assert staller.connections == 1
    assert back.status_code == 200, back.text
    assert back.json()["failureReason"] == "federation_unreachable"  # the page says so


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
        directory.create_user(username=f"hooked-{uuid.uuid4().hex[:6]}", actor="test")
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

