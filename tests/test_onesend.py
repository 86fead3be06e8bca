"""An answer's header leaves with its body in one send, as long as the body is small; a large
body and a streamed one are framed as before; a channel's output is sent by one thread at a
time (server/onesend.py)."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import waitress

from identityctl.server.onesend import ONE_SEND_LIMIT
from identityctl.server.waitress_errors import use_json_errors
from tests.support.threads import served_in_thread

SMALL = b'{"access_token": "x"}'
LARGE = b"x" * (ONE_SEND_LIMIT + 1)


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
    path = environ["PATH_INFO"]
    if path == "/written-wrong":  # a text through the write callable, then the bytes
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        with contextlib.suppress(TypeError):
            write("hello")
        return iter([b"hello"])
    if path == "/streamed":  # no Content-Length: chunked, chunk by chunk
        start_response("200 OK", [("Content-Type", "text/plain")])
        return iter([b"first", b"second"])
    body = LARGE if path == "/large" else SMALL
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return iter([body])


@pytest.fixture
def served() -> Iterator[tuple[int, list[bytes]]]:
    """A waitress server with the service's channel, and every write that reaches waitress's
    own ``write_soon`` (each becomes a send when the socket takes it)."""
    sends: list[bytes] = []
    servers: dict[Any, Any] = {}
    server = waitress.create_server(app, host="127.0.0.1", port=0, map=servers, threads=2)
    use_json_errors(servers, max_body_bytes=1024)
    channel_class = server.channel_class

    class Recording(channel_class):  # type: ignore[misc, valid-type]
        def write_soon(self, data: bytes) -> int:
            if self.held is None:
                sends.append(bytes(data))
            return super().write_soon(data)

    server.channel_class = Recording
    server.close_app = lambda: None  # a bare app: nothing to close
    with served_in_thread(server):
        yield server.effective_port, sends


def get(port: int, path: str, *, headers: dict[str, str] | None = None,
        method: str = "GET") -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(method, path, headers=headers or {})
    answer = connection.getresponse()
    answer.read()
    connection.close()
    return answer


def test_a_small_answer_leaves_in_one_send(served: tuple[int, list[bytes]]) -> None:
    port, sends = served
    assert get(port, "/token").status == 200
    assert len(sends) == 1
    assert sends[0].startswith(b"HTTP/1.1 200 OK\r\n") and sends[0].endswith(b"\r\n\r\n" + SMALL)


def test_a_large_body_follows_its_header_as_waitress_sends_it(
        served: tuple[int, list[bytes]]) -> None:
    port, sends = served
    assert get(port, "/large").status == 200
    assert [send.startswith(b"HTTP/1.1 200 OK") for send in sends] == [True, False]
    assert sends[1] == LARGE


def test_a_streamed_answer_sends_its_first_chunk_with_the_header_and_the_rest_after(
        served: tuple[int, list[bytes]]) -> None:
    port, sends = served
    answer = get(port, "/streamed")
    assert answer.status == 200 and answer.getheader("Transfer-Encoding") == "chunked"
    assert sends[0].endswith(b"\r\n\r\n5\r\nfirst\r\n")
    assert b"".join(sends[1:]) == b"6\r\nsecond\r\n0\r\n\r\n"


def test_an_answer_whose_first_write_fails_still_leaves_with_its_header(
        served: tuple[int, list[bytes]]) -> None:
    port, sends = served
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/written-wrong")
    answer = connection.getresponse()
    assert (answer.status, answer.read()) == (200, b"hello")
    connection.close()
    assert sends[0].startswith(b"HTTP/1.1 200 OK")


def test_the_event_loop_does_not_send_a_channels_output_while_a_task_thread_sends_it() -> None:
    servers: dict[Any, Any] = {}
    server = waitress.create_server(app, host="127.0.0.1", port=0, map=servers)
    use_json_errors(servers, max_body_bytes=1024)
    ours, theirs = socket.socketpair()
    theirs.settimeout(5)
    channel = server.channel_class(server, ours, ("127.0.0.1", 0), server.adj, map={})
    channel.outbufs[-1].append(b"HTTP/1.1 100 Continue\r\n\r\n")
    channel.total_outbufs_len = 25
    sending, done = threading.Event(), threading.Event()

    def task_thread_sending() -> None:
        with channel.outbuf_lock:
            sending.set()
            done.wait(5)

    holder = threading.Thread(target=task_thread_sending)
    holder.start()
    assert sending.wait(5)
    channel.handle_write()  # the event loop, meanwhile
    assert channel.total_outbufs_len == 25
    done.set()
    holder.join(5)
    channel.handle_write()
    assert theirs.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
    channel.close()
    theirs.close()
    server.close()


def _channel() -> tuple[Any, Any, socket.socket]:
    """A service channel over a socket pair, as the event loop holds it, and the client end."""
    servers: dict[Any, Any] = {}
    server = waitress.create_server(app, host="127.0.0.1", port=0, map=servers)
    use_json_errors(servers, max_body_bytes=1024)
    ours, theirs = socket.socketpair()
    theirs.settimeout(5)
    return server, server.channel_class(server, ours, ("127.0.0.1", 0), server.adj, map={}), \
        theirs


def test_what_the_socket_does_not_take_at_once_is_buffered_and_follows_in_order() -> None:
    server, channel, theirs = _channel()
    channel.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    answer = bytes(range(256)) * 4096  # 1 MiB: far more than the socket takes at once
    assert channel.write_soon(answer) == len(answer)
    assert 0 < channel.total_outbufs_len < len(answer)  # the rest waits in waitress's buffers
    received = bytearray()
    while len(received) < len(answer):
        received += theirs.recv(65536)
        channel.handle_write()  # the event loop sends the rest as the client reads
    assert bytes(received) == answer
    channel.close()
    theirs.close()
    server.close()


def test_a_channel_the_loop_closed_meanwhile_is_not_written_to() -> None:
    """The loop may close a channel while its task is about to write (a flush error, the
    shutdown): the task then learns the client is gone, as waitress tells it."""
    from waitress.channel import ClientDisconnected

    server, channel, theirs = _channel()
    lock = channel.outbuf_lock

    class ClosedByTheLoopFirst:
        """The lock, taken by the loop to close the channel just before the task gets it."""

        closed = False

        def __enter__(self) -> None:
            if not self.closed:
                self.closed = True
                channel.outbuf_lock = lock
                channel.handle_close()
            lock.__enter__()

        def __exit__(self, *exc: object) -> None:
            lock.__exit__(*exc)

    channel.outbuf_lock = ClosedByTheLoopFirst()
    with pytest.raises(ClientDisconnected):
        channel.write_soon(SMALL)
    assert theirs.recv(100) == b""  # closed, and nothing sent
    theirs.close()
    server.close()
