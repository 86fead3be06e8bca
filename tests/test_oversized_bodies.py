"""Oversized and malformed requests get the JSON error shape and the security headers.

Bodies up to 4x `server.max_body_bytes` are read and refused by the app (BodyRules on Falcon
routes, the dispatcher on /mcp); larger ones waitress refuses itself, before it reads them
(announced Content-Length) or as soon as they pass that size (chunked), and so does it with
headers too large and messages it cannot parse (server/waitress_errors.py). The caller cannot
tell which refused: the answer is the same. Requests are written on raw sockets, because an
HTTP client library sends the whole body before it reads the answer.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from waitress.utilities import InternalServerError

from identityctl.server.errors import error_answer
from identityctl.server.middleware import SECURITY_HEADERS
from identityctl.server.waitress_errors import identity_error
from tests.conftest import Service, free_port
from tests.support.mcp_clients import admin_token

GIB = 1024 ** 3
ROUTES = ["/flow/execute", "/mcp"]


@dataclass
class Answer:
    status: int
    #: header names in lower case
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def _read_answer(conn: socket.socket) -> Answer:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        assert chunk, f"the connection closed before an answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = conn.recv(65536)
        assert chunk, "the connection closed in the middle of the answer"
        body += chunk
    return Answer(int(status_line.split()[1]), headers, body[:length])


def _port(service: Service) -> int:
    port = urlsplit(service.base_url).port
    assert port is not None
    return port


def exchange(service: Service, head: bytes, *body: bytes) -> Answer:
    """Send ``head`` and the ``body`` pieces on a new connection, then read one answer.

    The server may answer and close before it has read all of a body it refuses: sending
    stops there, as a client that watches for an early answer stops.
    """
    with socket.create_connection(("127.0.0.1", _port(service)), timeout=30) as conn:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.sendall(head)
            for piece in body:
                conn.sendall(piece)
        return _read_answer(conn)


def request_head(service: Service, path: str, *headers: str) -> bytes:
    """A JSON POST to ``path`` (with an admin token, so /mcp would accept it otherwise)."""
    lines = [f"POST {path} HTTP/1.1", f"Host: localhost:{_port(service)}",
             "Content-Type: application/json", "Accept: application/json, text/event-stream",
             f"Authorization: Bearer {admin_token(service)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunked(body: bytes, size: int = 4096) -> Iterator[bytes]:
    """``body`` in chunks of ``size`` bytes (Transfer-Encoding: chunked), without the end."""
    for start in range(0, len(body), size):
        piece = body[start:start + size]
        yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"


def assert_json_error(answer: Answer, status: int, code: str) -> dict[str, str]:
    """The answer is the service's JSON error shape with the security headers."""
    assert answer.status == status, (answer.status, answer.body[:300])
    assert answer.headers["content-type"] == "application/json"
    for name, value in SECURITY_HEADERS.items():
        assert answer.headers.get(name) == value, (name, answer.headers)
    body = answer.json()
    assert set(body) == {"code", "message", "description"}, body
    assert body["code"] == code, body
    return body


def assert_payload_too_large(service: Service, answer: Answer) -> None:
    body = assert_json_error(answer, 413, "payload_too_large")
    assert str(service.config.server.max_body_bytes) in body["description"]


# --- bodies the app refuses (up to 4x the limit) -----------------------------------------------

@pytest.mark.parametrize("path", ROUTES)
def test_a_body_one_byte_over_the_limit_is_refused(service: Service, path: str) -> None:
    limit = service.config.server.max_body_bytes
    answer = exchange(service, request_head(service, path, f"Content-Length: {limit + 1}"),
                      b"x" * (limit + 1))
    assert_payload_too_large(service, answer)


@pytest.mark.parametrize("path", ROUTES)
def test_a_complete_chunked_body_over_the_limit_is_refused(service: Service,
                                                           path: str) -> None:
    limit = service.config.server.max_body_bytes
    answer = exchange(service, request_head(service, path, "Transfer-Encoding: chunked"),
                      *chunked(b"x" * (limit + 1)), b"0\r\n\r\n")
    assert_payload_too_large(service, answer)


# --- bodies waitress refuses (past 4x the limit) ----------------------------------------------

@pytest.mark.parametrize("path", ROUTES)
def test_a_body_past_four_times_the_limit_is_refused_in_the_same_shape(
        service: Service, path: str) -> None:
    limit = service.config.server.max_body_bytes
    size = 4 * limit + 1
    answer = exchange(service, request_head(service, path, f"Content-Length: {size}"),
                      b"x" * size)
    assert_payload_too_large(service, answer)
    assert answer.headers["connection"] == "close"


@pytest.mark.parametrize("path", ROUTES)
def test_a_huge_announced_body_is_refused_before_it_is_sent(service: Service,
                                                            path: str) -> None:
    answer = exchange(service, request_head(service, path, f"Content-Length: {GIB}"),
                      b"x" * 1024)
    assert_payload_too_large(service, answer)
    assert answer.headers["connection"] == "close"


@pytest.mark.parametrize("path", ROUTES)
def test_a_client_waiting_for_100_continue_gets_the_refusal_instead(service: Service,
                                                                    path: str) -> None:
    """No "100 Continue" invites a body that is refused already: the first answer is 413."""
    answer = exchange(service, request_head(service, path, f"Content-Length: {GIB}",
                                            "Expect: 100-continue"))
    assert_payload_too_large(service, answer)


@pytest.mark.parametrize("path", ROUTES)
def test_a_chunked_body_that_grows_past_four_times_the_limit_is_refused(
        service: Service, path: str) -> None:
    """Without an announced length the body is read until it passes the limit, not to its
    end (none is sent here)."""
    limit = service.config.server.max_body_bytes
    answer = exchange(service, request_head(service, path, "Transfer-Encoding: chunked"),
                      *chunked(b"x" * (4 * limit + 1)))
    assert_payload_too_large(service, answer)
    assert answer.headers["connection"] == "close"


# --- other refusals of waitress ----------------------------------------------------------------

def test_request_headers_too_large_are_refused_with_their_own_code(service: Service) -> None:
    header = "X-Padding: " + "a" * 300 * 1024
    answer = exchange(service, request_head(service, "/flow/execute", header,
                                            "Content-Length: 2"), b"{}")
    body = assert_json_error(answer, 431, "request_header_too_large")
    assert "bytes" in body["description"]
    assert answer.headers["connection"] == "close"


@pytest.mark.parametrize("path", ROUTES)
def test_malformed_chunk_framing_is_a_json_400(service: Service, path: str) -> None:
    answer = exchange(service, request_head(service, path, "Transfer-Encoding: chunked"),
                      b"zz\r\n{}\r\n0\r\n\r\n")
    body = assert_json_error(answer, 400, "malformed_request")
    assert "chunk" in body["description"].lower()


def test_an_invalid_content_length_is_a_json_400(service: Service) -> None:
    answer = exchange(service, request_head(service, "/flow/execute", "Content-Length: -1"))
    body = assert_json_error(answer, 400, "malformed_request")
    assert "Content-Length" in body["description"]


def test_an_unsupported_transfer_encoding_is_a_json_501(service: Service) -> None:
    answer = exchange(service, request_head(service, "/flow/execute",
                                            "Transfer-Encoding: gzip, chunked"))
    assert_json_error(answer, 501, "transfer_encoding_unsupported")


def test_an_exception_escaping_the_app_is_a_500_saying_nothing_of_it() -> None:
    """waitress's own 500 (an exception outside Falcon's handlers) carries no traceback."""
    escaped = InternalServerError("Traceback (most recent call last): secret internals")
    error = identity_error(escaped, max_body_bytes=1, max_header_bytes=1)
    status, headers, body = error_answer(error)
    assert status == "500 Internal Server Error"
    assert json.loads(body) == {"code": "internal_error", "message": "Internal server error.",
                                "description": "The error was logged; nothing was changed."}
    assert {name.lower(): value for name, value in headers}.items() >= SECURITY_HEADERS.items()


def test_the_mcp_token_refusal_carries_the_security_headers_too(service: Service) -> None:
    """/mcp's refusals and waitress's are written by one function (server/errors.py)."""
    head = (f"POST /mcp HTTP/1.1\r\nHost: localhost:{_port(service)}\r\n"
            "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n").encode()
    answer = exchange(service, head, b"{}")
    assert_json_error(answer, 401, "missing_token")
    assert answer.headers["www-authenticate"].startswith("Bearer ")


# --- serve --workers N -------------------------------------------------------------------------

@contextlib.contextmanager
def served_by_workers(service: Service, workers: int) -> Iterator[Service]:
    """`identityctl serve --workers N` on ``service``'s config and database, another port."""
    port = free_port()
    log_path = service.config_path.with_name(f"workers-{port}.log")
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "identityctl", "--config", str(service.config_path),
             "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)],
            stdout=log, stderr=log)
    served = Service(config=service.config, config_path=service.config_path,
                     base_url=f"http://localhost:{port}", http=service.http)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"serve --workers did not start:\n{log_path.read_text()}")
                time.sleep(0.1)
        yield served
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_workers_refuse_oversized_bodies_in_the_same_shape(service: Service) -> None:
    with served_by_workers(service, 2) as workers:
        for _ in range(4):  # connections land on either worker
            answer = exchange(workers, request_head(workers, "/flow/execute",
                                                    f"Content-Length: {GIB}"), b"x" * 1024)
            assert_payload_too_large(workers, answer)
        limit = workers.config.server.max_body_bytes
        answer = exchange(workers, request_head(workers, "/mcp", "Transfer-Encoding: chunked"),
                          *chunked(b"x" * (4 * limit + 1)))
        assert_payload_too_large(workers, answer)
