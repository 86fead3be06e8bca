"""Serving a waitress server from a thread of the test process, and stopping it cleanly."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from waitress.server import BaseWSGIServer

from identityctl.server.runtime import stop_server


@contextmanager
def served_in_thread(server: BaseWSGIServer) -> Iterator[None]:
    """Run ``server``'s loop in a daemon thread; on exit stop the loop, then close the server.

    Closing the sockets from this thread while the loop sits in ``select()`` on them makes
    the loop die with EBADF. So the loop runs one poll at a time until told to stop, is woken
    through waitress's own trigger and joined, and only then is the server closed, as
    ``identityctl serve`` closes it after its loop returns.
    """
    stopping = threading.Event()

    def loop() -> None:
        while not stopping.is_set():
            server.asyncore.loop(timeout=server.adj.asyncore_loop_timeout, map=server._map,
                                 use_poll=server.adj.asyncore_use_poll, count=1)

    thread = threading.Thread(target=loop, name="waitress-test", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopping.set()
        server.trigger.pull_trigger()
        thread.join(timeout=5)
        stop_server(server)


def run_at_once(work: Callable[[], object], count: int, *, timeout: float = 60) -> None:
    """Run ``work`` on ``count`` threads at once (clients of a server under test) and wait."""
    threads = [threading.Thread(target=work) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
