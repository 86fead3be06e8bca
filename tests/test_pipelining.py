"""A connection's pipelined requests are bounded: a client that sends many in one write and
never reads the answers cannot hold the request threads (server/pipelining.py)."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import requests

from identityctl.server.pipelining import MAX_PIPELINED
from tests.conftest import Service


def connect(service: Service, *, receive_buffer: int | None = None) -> socket.socket:
    address = urlsplit(service.base_url)
    connection = socket.socket()
    if receive_buffer:  # before connecting, so the window the server sees stays small
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    connection.settimeout(10)
    connection.connect(("127.0.0.1", address.port))
    return connection


def requests_for(path: str, count: int) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode() * count


def read_to_end(connection: socket.socket) -> bytes:
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    return received


def test_a_write_of_many_requests_gets_the_first_few_answered_then_the_connection_closes(
        service: Service) -> None:
    with connect(service) as connection:
        connection.sendall(requests_for("/health", 50))
        answers = read_to_end(connection)  # the server closes the connection
    assert answers.count(b"HTTP/1.1 200 OK") == MAX_PIPELINED
    assert answers.rsplit(b"HTTP/1.1 200 OK", 1)[1].lower().count(b"connection: close") == 1


def test_a_few_pipelined_requests_are_all_answered_and_the_connection_stays(
        service: Service) -> None:
    with connect(service) as connection:
        connection.sendall(requests_for("/health", MAX_PIPELINED))
        received = b""
        while received.count(b"HTTP/1.1 200 OK") < MAX_PIPELINED or not received.endswith(b"}"):
            received += connection.recv(65536)
        connection.sendall(requests_for("/health", 1))
        assert connection.recv(65536).startswith(b"HTTP/1.1 200 OK")


def test_clients_that_pipeline_large_answers_and_never_read_leave_the_server_answering(
        service: Service) -> None:
    holders = [connect(service, receive_buffer=4096)
               for _ in range(service.config.server.threads + 4)]
    try:
        for connection in holders:
            connection.sendall(requests_for("/openapi.json", 180))
        time.sleep(3)  # unbounded, the threads are held well before this
        assert requests.get(service.base_url + "/health", timeout=5).status_code == 200
    finally:
        for connection in holders:
            connection.close()


def test_a_client_that_half_closes_after_its_requests_gets_every_answer(
        service: Service) -> None:
    # As `nc -N` and simple scripts do: the requests, then the end of the sending side. An end of
    # file read while a request is served would be taken for a disconnect.
    for _ in range(5):
        with connect(service) as connection:
            connection.sendall(requests_for("/health", 1) + b"GET /health HTTP/1.1\r\n"
                               b"Host: localhost\r\nConnection: close\r\n\r\n")
            connection.shutdown(socket.SHUT_WR)
            answers = read_to_end(connection)
        assert answers.count(b"HTTP/1.1 200 OK") == 2
        assert answers.endswith(b"}")
