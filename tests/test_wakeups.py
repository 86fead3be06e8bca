"""waitress's event loop is woken after a request only when the channel needs it: not after
an answer sent in full on a connection that stays open; still for a connection to close and
on servers whose channels stop reading while they serve (server/wakeups.py)."""

from __future__ import annotations

import http.client
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import waitress

from identityctl.server.waitress_errors import use_json_errors
from identityctl.server.wakeups import wake_only_when_needed
from tests.support.threads import served_in_thread

ANSWER = b'{"status": "ok"}'


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(ANSWER)))])
    return iter([ANSWER])


@pytest.fixture(params=[1, 0], ids=["reading while serving", "not reading while serving"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[int, list[None], int]]:
    """A server set up as runtime.make_server sets one up, with the given
    ``channel_request_lookahead``; the wake-ups its loop got; the lookahead."""
    servers: dict[Any, Any] = {}
    server = waitress.create_server(app, host="127.0.0.1", port=0, map=servers, threads=2,
                                    channel_request_lookahead=request.param)
    use_json_errors(servers, max_body_bytes=1024)
    wakeups: list[None] = []
    pull = server.trigger.pull_trigger
    server.trigger.pull_trigger = lambda *args: (wakeups.append(None), pull(*args))[1]
    wake_only_when_needed(servers)
    server.close_app = lambda: None  # a bare app: nothing to close
    with served_in_thread(server):
        yield server.effective_port, wakeups, request.param


def test_answers_on_a_kept_alive_connection_wake_the_loop_only_when_it_must_read_again(
        served: tuple[int, list[None], int]) -> None:
    port, wakeups, lookahead = served
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(50):
        connection.request("GET", "/")
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (200, ANSWER)
    connection.close()
    if lookahead:
        assert wakeups == []
    else:
        assert len(wakeups) >= 50


def test_an_answer_that_closes_its_connection_still_wakes_the_loop_to_close_it(
        served: tuple[int, list[None], int]) -> None:
    port, wakeups, _ = served
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/", headers={"Connection": "close"})
    answer = connection.getresponse()
    assert (answer.status, answer.read()) == (200, ANSWER)
    assert connection.sock is None or connection.sock.recv(1) == b""  # closed by the server
    connection.close()
    assert wakeups
