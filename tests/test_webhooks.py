"""Event webhooks: audit events reach a subscribed endpoint once each, signed as Standard
Webhooks say (verified here with the `standardwebhooks` library from PyPI), also when the
server is killed in the middle of a delivery and started again."""

from __future__ import annotations

import base64
import json
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from identityctl.errors import InvalidField
from identityctl.services.delivery import webhooks
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from tests.conftest import (
    QUICK_DELIVERIES,
    Service,
    deployment_with,
    free_port,
    shared_deployment,
)
from tests.support.processes import stop, wait_for_health
from tests.test_scale_out import _serve


class Receiver:
    """An endpoint that checks every delivery's signature and keeps what it verified; it
    can hold its answers (a sender that dies before hearing back)."""

    def __init__(self) -> None:
        self.secret = ""
        self.received: list[tuple[str, dict[str, Any]]] = []  # (webhook-id, payload)
        self.refused = 0
        self.holding = threading.Event()
        self.held = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                try:
                    payload = Webhook(receiver.secret).verify(body, dict(self.headers))
                except Exception:  # the library's verification error: not from us
                    receiver.refused += 1
                    self.send_response(400)
                    self.end_headers()
                    return
                receiver.received.append((self.headers["webhook-id"], payload))
                while receiver.holding.is_set():
                    receiver.held.set()
                    time.sleep(0.05)
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def ids(self) -> set[str]:
        return {webhook_id for webhook_id, _ in self.received}

    def settled(self, *, quiet: float = 0.5, timeout: float = 30) -> None:
        """Until nothing new has arrived for ``quiet`` seconds: what a killed sender had
        already written still reaches the endpoint after its death."""
        deadline = time.monotonic() + timeout
        seen, since = len(self.received), time.monotonic()
        while time.monotonic() - since < quiet:
            assert time.monotonic() < deadline, "deliveries kept arriving"
            time.sleep(0.05)
            if len(self.received) != seen:
                seen, since = len(self.received), time.monotonic()

    def wait_for(self, count: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.ids()) < count:
            assert time.monotonic() < deadline, f"{len(self.ids())} of {count} delivered"
            time.sleep(0.05)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.server.shutdown()


@pytest.fixture
def quick(tmp_path: Path) -> Iterator[Service]:
    yield from deployment_with(tmp_path, QUICK_DELIVERIES)


def subscribe(receiver: Receiver, *events: str) -> str:
    made, secret = webhooks.add_subscription(url=receiver.url, events=list(events),
                                             origin=RequestOrigin(actor="test"))
    receiver.secret = secret
    return made.id


def test_each_event_arrives_once_signed_and_the_log_says_so(quick: Service,
                                                            receiver: Receiver) -> None:
    subscribe(receiver, "user.*")
    names = [f"hook-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    for name in names:
        directory.create_user(username=name, origin=RequestOrigin(actor="test"))
    directory.require_user(names[0])  # (no event: reading is not audited)
    receiver.wait_for(3)
    time.sleep(1.5)  # more rounds of the deliveries thread: nothing more is sent
    assert len(receiver.received) == 3 and receiver.refused == 0
    assert [payload["type"] for _, payload in receiver.received] == ["user.create"] * 3
    assert {payload["data"]["actor"] for _, payload in receiver.received} == {"test"}
    log = CliRunner().invoke(cli_app, ["--config", str(quick.config_path), "webhook",
                                       "deliveries", "--json"])
    assert log.exit_code == 0, log.output
    assert [entry["state"] for entry in json.loads(log.output)] == ["sent"] * 3
    listed = CliRunner().invoke(cli_app, ["--config", str(quick.config_path), "webhook",
                                          "list", "--json"])
    assert receiver.secret not in listed.output  # the secret was shown once, when made


def test_an_endpoint_that_refuses_is_tried_again_until_it_takes_the_event(
        quick: Service, receiver: Receiver) -> None:
    subscribe(receiver, "user.create")
    right, receiver.secret = receiver.secret, "whsec_" + base64.b64encode(b"x" * 32).decode()
    directory.create_user(username=f"retry-{uuid.uuid4().hex[:6]}",
                          origin=RequestOrigin(actor="test"))
    deadline = time.monotonic() + 20
    while not (webhooks.deliveries() and webhooks.deliveries()[0]["state"] == "retrying"):
        assert time.monotonic() < deadline, webhooks.deliveries()
        time.sleep(0.1)
    assert "HTTP 400" in webhooks.deliveries()[0]["lastError"]
    receiver.secret = right  # the endpoint is fixed: the retry after the backoff lands
    receiver.wait_for(1, timeout=30)
    assert webhooks.deliveries()[0]["state"] == "sent"


@pytest.mark.parametrize(("url", "events", "field"), [
    ("ftp://example.com/hooks", ["*"], "url"),
    ("http://example.com/hooks", ["*"], "url"),  # plain http only to this machine
    ("https://user:secret@example.com/hooks", ["*"], "url"),  # lists would show it
    ("https://example.com/hooks", [], "events"),
    ("https://example.com/hooks", ["User created"], "events[0]"),
])
def test_a_subscription_needs_an_https_url_and_event_names(
        quick: Service, url: str, events: list[str], field: str) -> None:
    with pytest.raises(InvalidField) as refused:
        webhooks.add_subscription(url=url, events=events, origin=RequestOrigin(actor="test"))
    assert field in refused.value.description


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    yield from shared_deployment(tmp_path, QUICK_DELIVERIES)


def test_events_survive_the_server_being_killed_mid_delivery(
        served: tuple[Path, int], receiver: Receiver, tmp_path: Path) -> None:
    config_path, port = served
    subscribe(receiver, "user.create")
    receiver.holding.set()
    names = [f"kill-{uuid.uuid4().hex[:6]}" for _ in range(4)]
    for name in names:  # recorded with their deliveries; no server runs yet
        directory.create_user(username=name, origin=RequestOrigin(actor="test"))
    server = _serve(config_path, port, tmp_path / "serve.log")
    try:
        wait_for_health(f"http://127.0.0.1:{port}/health", server, tmp_path / "serve.log")
        assert receiver.held.wait(30)  # a delivery reached the endpoint, unanswered
        server.send_signal(signal.SIGKILL)
        server.wait()
        # Every serving process delivers: each may have had one delivery at the endpoint,
        # and one may still be on its way there.
        receiver.settled()
        in_flight = receiver.ids()
        receiver.holding.clear()
        server = _serve(config_path, port, tmp_path / "restarted.log")
        wait_for_health(f"http://127.0.0.1:{port}/health", server,
                        tmp_path / "restarted.log")
        receiver.wait_for(4)
        deadline = time.monotonic() + 20
        while any(entry["state"] != "sent" for entry in webhooks.deliveries()):
            assert time.monotonic() < deadline, webhooks.deliveries()
            time.sleep(0.1)
    finally:
        stop(server)
    # Every event arrived; those in flight at the kill came again with the same webhook-id
    # (a receiver that remembers ids acts on each once), and nothing else was repeated.
    created = {payload["data"]["details"].get("username") or payload["data"]["userId"]
               for _, payload in receiver.received}
    assert len(receiver.ids()) == 4 and len(created) == 4
    arrivals = Counter(webhook_id for webhook_id, _ in receiver.received)
    assert {webhook_id for webhook_id, times in arrivals.items() if times > 1} <= in_flight
    assert max(arrivals.values()) <= 2
    assert receiver.refused == 0
