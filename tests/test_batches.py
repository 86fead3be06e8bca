"""On SQLite the event loop reads no connection while a request read then could not start,
and it is woken when one could (server/batches.py): no request is left unread for longer than
a quick one would wait, and none is left unread at all.

The servers here sleep in ``select`` for up to a minute when nobody wakes them, so a missed
wake-up shows as a client timing out, not as a slower test."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import waitress

from identityctl import waits
from identityctl.server.batches import BatchingLoop, read_in_batches
from identityctl.server.dispatch import FinishingThreadDispatcher
from identityctl.server.waitress_errors import use_json_errors
from tests.support.threads import run_at_once, served_in_thread

WAIT = 10.0  # the longest any step below may take before the test fails
NEVER = 600.0  # a spill_after no step below reaches


class App:
    """``/quick`` answers at once; ``/busy`` computes (saying nothing) until a ``/quick`` has
    been answered, and ``/waits`` computes until ``may_wait`` and then waits (saying so)
    until then; both say whether one was."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.may_wait = threading.Event()
        self.quick_answered = threading.Event()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ["PATH_INFO"]
        if path == "/quick":
            self.quick_answered.set()
            body = b"quick"
        elif path == "/busy":
            self.started.set()
            body = b"saw it" if self.compute_until(self.quick_answered) else b"did not"
        elif path == "/waits":
            self.started.set()
            self.compute_until(self.may_wait)
            with waits.waiting():
                body = b"saw it" if self.quick_answered.wait(WAIT) else b"did not"
        else:
            body = b"other"
        start_response("200 OK", [("Content-Type", "text/plain"),
                                  ("Content-Length", str(len(body)))])
        return [body]

    @staticmethod
    def compute_until(event: threading.Event) -> bool:
        deadline = threading.Event()
        timer = threading.Timer(WAIT, deadline.set)
        timer.start()
        try:
            while not event.is_set() and not deadline.is_set():
                sum(range(1000))  # holds the interpreter, as a request's own work does
            return event.is_set()
        finally:
            timer.cancel()


class Served:
    """A waitress server as `serve` makes it on SQLite (its dispatcher, its channels, reads
    in batches), asleep in select for up to a minute when not woken."""

    def __init__(self, app: App, *, spill_after: float) -> None:
        servers: dict[Any, Any] = {}
        dispatcher = FinishingThreadDispatcher(spill_after=spill_after, max_queue_wait=NEVER)
        dispatcher.set_thread_count(4)
        self.server = waitress.create_server(app, host="127.0.0.1", port=0, map=servers,
                                             _dispatcher=dispatcher, asyncore_loop_timeout=60)
        use_json_errors(servers, max_body_bytes=1024)
        read_in_batches(self.server)
        self.server.close_app = lambda: None  # a bare app: nothing to close
        self.port = self.server.effective_port

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)

    def until_reads_wait(self) -> None:
        """A new connection wakes the loop; return once a pass of it reads nothing."""
        with socket.create_connection(("127.0.0.1", self.port)):
            for _ in range(int(WAIT / 0.01)):
                if self.server.asyncore.reads_wait:
                    return
                time.sleep(0.01)
        raise AssertionError("the loop kept reading")


def served(app: App, *, spill_after: float) -> Iterator[Served]:
    made = Served(app, spill_after=spill_after)
    with served_in_thread(made.server):
        yield made


@pytest.fixture
def app() -> App:
    return App()


@pytest.fixture
def server(app: App) -> Iterator[Served]:
    yield from served(app, spill_after=0.005)


def answer(connection: http.client.HTTPConnection, path: str, *,
           headers: dict[str, str] | None = None) -> bytes:
    connection.request("GET", path, headers=headers or {})
    response = connection.getresponse()
    assert response.status == 200
    return response.read()


def test_many_connections_asking_in_turn_are_all_answered(server: Served) -> None:
    failures: list[BaseException] = []

    def ask_in_turn() -> None:
        connection = server.connection()
        try:
            for _ in range(40):
                assert answer(connection, "/quick") == b"quick"
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)
        finally:
            connection.close()

    run_at_once(ask_in_turn, 8, timeout=WAIT * 4)
    assert failures == []


def test_an_answer_that_closes_its_connection_is_sent_and_the_connection_closed(
        server: Served) -> None:
    connection = server.connection()
    assert answer(connection, "/quick", headers={"Connection": "close"}) == b"quick"
    assert connection.sock is None or connection.sock.recv(1) == b""  # closed by the server
    connection.close()


def test_a_request_is_read_and_answered_while_another_computes_without_saying_it_waits(
        app: App) -> None:
    """Once the running request has run ``spill_after``, the loop reads again and the
    dispatcher gives the new request a thread of its own."""
    for server in served(app, spill_after=0.5):  # long enough to see the loop pause
        first, other = server.connection(), server.connection()
        assert answer(other, "/other") == b"other"  # accepted, and idle in the loop
        first.request("GET", "/busy")
        assert app.started.wait(WAIT)
        server.until_reads_wait()
        assert answer(other, "/quick") == b"quick"
        assert first.getresponse().read() == b"saw it"


def test_a_connection_answered_while_another_computes_is_read_again_at_once() -> None:
    """Two requests read in one pass, the first quick, the second computing without saying it
    waits: the first's connection, whose request was pending when the loop last looked, is
    read again when its answer is sent. The order of the threads varies: ten times."""
    for _ in range(10):
        app = App()
        for server in served(app, spill_after=0.005):
            quick, busy = server.connection(), server.connection()
            for connection in (quick, busy):
                assert answer(connection, "/other") == b"other"  # accepted, idle
            quick.request("GET", "/other")
            busy.request("GET", "/busy")
            assert quick.getresponse().read() == b"other"
            assert answer(quick, "/quick") == b"quick"
            assert busy.getresponse().read() == b"saw it"


def test_reads_wait_no_longer_than_a_queued_request_waits() -> None:
    """While requests keep a thread busy (a stranger's stream of quick ones), the loop still
    reads once the reads have waited ``max_queue_wait``."""
    class AlwaysBusy:
        max_queue_wait = 0.01

        def reads_resume_at(self) -> float:
            return time.monotonic() + 60

    loop = BatchingLoop(AlwaysBusy())  # type: ignore[arg-type]
    seen: list[bool] = []

    class Channel:
        accepting = False

        def readable(self) -> bool:
            seen.append(loop.reads_wait)
            return False

        def writable(self) -> bool:
            return False

    loop.loop(timeout=0.02, map={0: Channel()}, count=4)
    assert seen == [True, False, True, False]


def test_a_request_that_says_it_waits_lets_the_loop_read_at_once(app: App) -> None:
    for server in served(app, spill_after=NEVER):  # only the declaration lets reads resume
        first, other = server.connection(), server.connection()
        assert answer(other, "/other") == b"other"
        first.request("GET", "/waits")
        assert app.started.wait(WAIT)
        server.until_reads_wait()
        other.request("GET", "/quick")
        app.may_wait.set()
        assert other.getresponse().read() == b"quick"
        assert first.getresponse().read() == b"saw it"
