"""Connections handed from the `serve --workers N` supervisor to a worker's waitress.

The supervisor (server/workers.py) accepts every connection itself and sends the accepted
socket to one worker over a Unix socket pair (SCM_RIGHTS, ``socket.send_fds``): one message
per connection. In the worker, :class:`HandoffServer` is waitress's TCP server with that
socket pair where its listening socket would be: waitress's loop polls it like a listener,
and its "accept" receives the sockets and makes each the server's usual channel, with the
peer's address as ``accept()`` would have given it (REMOTE_ADDR, trusted proxies). Whenever
one of its connections closes, the worker sends the supervisor how many have closed so far,
so the supervisor knows how many each worker holds open.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import struct
from collections.abc import Callable
from typing import Any

from waitress.server import TcpWSGIServer

#: The handed-off socket's message: one byte of data (SCM_RIGHTS needs some) and its fd.
CONNECTION = b"c"
#: The worker's report: how many handed-off connections it has closed in all (a running
#: total, so a report lost to a full buffer is made good by the next one).
CLOSED = struct.Struct("!Q")
#: Connections one poll of the socket pair takes in at most, so requests keep their turn.
ADOPT_PER_POLL = 64


def handoff_pair() -> tuple[socket.socket, socket.socket]:
    """(the supervisor's end, the worker's end): SOCK_SEQPACKET keeps each message whole."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def hand_off(channel: socket.socket, connection: socket.socket) -> None:
    """(In the supervisor.) Send ``connection`` to the worker at the other end of ``channel``;
    raises OSError (BlockingIOError when the worker is not taking any) if it cannot."""
    socket.send_fds(channel, [CONNECTION], [connection.fileno()])


def closed_total(channel: socket.socket) -> int | None:
    """(In the supervisor.) The newest running total of closed connections waiting on
    ``channel``; None when none waits; raises EOFError when the worker has gone."""
    newest = None
    while True:
        try:
            report = channel.recv(CLOSED.size)
        except BlockingIOError:
            return newest
        if not report:
            raise EOFError
        newest = CLOSED.unpack(report)[0]


class OpenChannels(dict[int, Any]):
    """waitress's ``active_channels`` (fd -> channel) that calls ``on_close`` whenever a
    channel leaves it: HTTPChannel.del_channel is where every channel ends."""

    def __init__(self, on_close: Callable[[], None]) -> None:
        super().__init__()
        self.on_close = on_close

    def __delitem__(self, fd: int) -> None:
        super().__delitem__(fd)
        self.on_close()


class HandoffServer(TcpWSGIServer):
    """waitress's TCP server adopting the connections the supervisor sends on ``_sock`` (the
    worker's end of :func:`handoff_pair`) instead of accepting on a socket of its own.

    ``sockinfo`` names the supervisor's listening address (``effective_host``/``_port``).
    Everything else is waitress's: the socket map and its loop, the connection limit (a
    worker at its limit stops taking connections; the supervisor gives them to another),
    idle channels closed after ``channel_timeout``, the task threads.
    """

    def __init__(self, application: Any, **options: Any) -> None:
        super().__init__(application, bind_socket=False, **options)
        self._to_supervisor = self.socket  # waitress lets go of self.socket when it closes
        self._closed = itertools.count(1)  # next() is atomic: a channel may close on any thread
        self.active_channels = OpenChannels(self._report_closed)

    def accept_connections(self) -> None:
        self.accepting = True  # polled for reading; no listen(): the supervisor listens

    def getsockname(self) -> tuple[str, str]:
        host, port = self.sockinfo[3][:2]
        return host, str(port)

    def handle_accept(self) -> None:
        for _ in range(ADOPT_PER_POLL):
            try:
                message, fds, _flags, _address = socket.recv_fds(self.socket, 1, 1)
            except BlockingIOError:
                return
            if not message:  # the supervisor has gone: end as it did
                raise SystemExit(0)
            for fd in fds:
                self._adopt(socket.socket(fileno=fd))

    def _adopt(self, connection: socket.socket) -> None:
        try:
            peer = connection.getpeername()  # what accept() returned to the supervisor
            self.set_socket_options(connection)
        except OSError:  # the client left while the connection was on its way
            connection.close()
            self._report_closed()
            return
        self.channel_class(self, connection, self.fix_addr(peer), self.adj, map=self._map)

    def _report_closed(self) -> None:
        # Lost only when the supervisor's buffer is full (the next report carries it), or
        # when there is nobody left to tell (the supervisor gone, this server closed).
        with contextlib.suppress(OSError):
            self._to_supervisor.send(CLOSED.pack(next(self._closed)))
