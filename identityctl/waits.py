"""A request thread saying that it is about to wait, not work.

On SQLite a serving process runs one request at a time while requests are quick
(server/dispatch.py): a queued request gets a thread of its own only when the running ones
have run for a while. Code that waits with the interpreter free (for another server, an
argon2id hash, the MCP server) says so with :func:`waiting`, and a queued request starts at
once instead of after that while. Outside a dispatcher's threads (the outbox's deliverer,
the command line, tests) it does nothing. A declaration is never held across a generator's
``yield`` to its consumer: what the consumer does meanwhile is not a wait. (A context
manager's ``yield`` is its own body, which is the wait: ``outbound.deadline``.)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Dispatcher(Protocol):
    def waiting(self, thread: int, waits: bool) -> None:
        """``thread`` (an id) starts waiting (``waits``) or working again."""


class _Declarations:
    """One dispatcher thread's: its dispatcher, its id, how deep its waits are nested."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.thread = threading.get_ident()
        self.depth = 0


_thread = threading.local()


def serve_for(dispatcher: Dispatcher) -> None:
    """(A dispatcher's thread, once.) This thread's waits are told to ``dispatcher``."""
    _thread.declarations = _Declarations(dispatcher)


@contextmanager
def waiting() -> Iterator[None]:
    """Around a wait; nested waits tell the dispatcher once."""
    declarations: _Declarations | None = getattr(_thread, "declarations", None)
    if declarations is None:
        yield
        return
    declarations.depth += 1
    if declarations.depth == 1:
        declarations.dispatcher.waiting(declarations.thread, True)
    try:
        yield
    finally:
        declarations.depth -= 1
        if declarations.depth == 0:
            declarations.dispatcher.waiting(declarations.thread, False)
