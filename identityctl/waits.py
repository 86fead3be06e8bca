"""A request thread saying that it is about to wait, not work.

On SQLite a serving process runs one request at a time while requests are quick
(server/dispatch.py): a queued request gets a thread of its own only when the running ones
have run for a while. Code that waits with the interpreter free (for another server, an
argon2id hash, the MCP server's loop) says so with :func:`waiting`, and a queued request
starts at once instead of after that while. Outside a dispatcher's threads (the outbox's
deliverer, the command line, tests) it does nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Dispatcher(Protocol):
    def waiting(self, waits: bool) -> None:
        """(The waiting thread.) ``waits``: it starts waiting (True) or working again."""


_thread = threading.local()


def serve_for(dispatcher: Dispatcher) -> None:
    """(A dispatcher's thread, once.) This thread's waits are told to ``dispatcher``."""
    _thread.dispatcher = dispatcher
    _thread.depth = 0


@contextmanager
def waiting() -> Iterator[None]:
    """Around a wait; nested waits tell the dispatcher once."""
    dispatcher = getattr(_thread, "dispatcher", None)
    if dispatcher is None:
        yield
        return
    _thread.depth += 1
    if _thread.depth == 1:
        dispatcher.waiting(True)
    try:
        yield
    finally:
        _thread.depth -= 1
        if _thread.depth == 0:
            dispatcher.waiting(False)
