"""Requests read in batches on SQLite: the event loop reads no connection while a request
read now could not start (server/dispatch.py).

waitress's event loop reads every connection as soon as it has data, and a request thread
wakes it (a byte on its trigger pipe) after every request it serves. On SQLite one request
runs at a time while requests are quick, so meanwhile the loop could only take the
interpreter from it, at each of its SQLite calls and socket writes: one process answering
client_credentials tokens to 16 connections made 5 context switches and 12 futex calls a
token, and took 0.57 ms of CPU for one.

PERF: :class:`BatchingLoop` is waitress's loop asking the dispatcher, before each pass, when
a request read now could start (``reads_resume_at``). Until then it reads no connection: it
still accepts, writes and closes them, and it sleeps no longer than that. What clients send
meanwhile waits in the kernel and is read in one pass, when the dispatcher wakes the loop
(a thread finished a request and none runs quickly beside it, or a running request said
that it waits), when the running request has run ``spill_after``, or when the reads have
waited ``max_queue_wait`` (as long as a queued request waits at most). While the reads
wait, a request thread wakes the loop only for a connection that has something to write or
is closing; reading it again waits for the pass. The same process made about 2 context
switches and 3 futex calls a token, at 0.76x the CPU (docs/performance.md, "Threads on
SQLite").
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer

from identityctl.server.dispatch import FinishingThreadDispatcher

#: The channel each request thread is serving (None between requests).
_serving = threading.local()


class BatchingLoop:
    """waitress's loop (a server's ``asyncore.loop``), not reading while reads wait."""

    def __init__(self, dispatcher: FinishingThreadDispatcher) -> None:
        self.dispatcher = dispatcher
        self.reads_wait = False  # during one pass: BatchedReads channels are not read

    def loop(self, timeout: float = 30.0, use_poll: bool = False,
             map: dict[int, Any] | None = None, count: int | None = None) -> None:
        """wasyncore.loop: passes over ``map`` while it has channels (``count`` at most)."""
        poll = wasyncore.poll2 if use_poll else wasyncore.poll
        passes = itertools.count() if count is None else range(count)
        waiting_since: float | None = None  # when the reads began to wait, this time
        for _ in passes:
            if not map:
                return
            now, resume_at = time.monotonic(), self.dispatcher.reads_resume_at()
            if resume_at is not None:
                # As a queued request starts after max_queue_wait whatever runs, an unread
                # one is read by then: a stranger's stream of quick requests delays others
                # no longer than that.
                waiting_since = now if waiting_since is None else waiting_since
                read_by = waiting_since + self.dispatcher.max_queue_wait
                resume_at = None if now >= read_by else min(resume_at, read_by)
            if resume_at is None:
                waiting_since = None
            self.reads_wait = resume_at is not None
            poll(min(timeout, max(0.0, resume_at - now)) if resume_at is not None else timeout,
                 map)


class BatchedReads(HTTPChannel):
    """A channel read only in the loop's passes that read, which wakes the loop after a
    request only when it has something to write or is closing (mixed into a server's
    channel class by :func:`read_in_batches`)."""

    batching: BatchingLoop  # the loop it runs in

    def readable(self) -> bool:
        return not self.batching.reads_wait and super().readable()

    def service(self) -> None:
        _serving.channel = self
        try:
            super().service()
        finally:
            _serving.channel = None


def read_in_batches(server: Any) -> None:
    """Run ``server`` (waitress's, on one or several sockets, before it runs) on a
    :class:`BatchingLoop` when its dispatcher is the one that serves SQLite."""
    dispatcher = server.task_dispatcher
    if not isinstance(dispatcher, FinishingThreadDispatcher):
        return
    batching = BatchingLoop(dispatcher)
    listeners = [server] if isinstance(server, BaseWSGIServer) else [
        each for each in server.map.values() if isinstance(each, BaseWSGIServer)]
    server.asyncore = batching
    for listener in listeners:
        listener.asyncore = batching
        listener.channel_class = type(listener.channel_class.__name__,
                                      (BatchedReads, listener.channel_class),
                                      {"batching": batching})
        listener.pull_trigger = _channel_wake_up(listener.trigger)
    dispatcher.wake_loop = functools.partial(_wake_up, listeners[0].trigger)


def _wake_up(trigger: Any) -> None:
    """waitress's ``pull_trigger``, except after the trigger is closed (a request thread
    finishing as the server stops)."""
    if not trigger._closed:
        with contextlib.suppress(OSError):  # closed meanwhile
            trigger.pull_trigger()


def _channel_wake_up(trigger: Any) -> Callable[[], None]:
    """The server's ``pull_trigger`` that channels call: not for the channel this thread
    serves while the loop's reads wait and the channel has nothing to write and is not
    closing. The loop looks at every channel when the reads resume (the dispatcher wakes it,
    or its time comes); while it reads, a channel whose request was pending when it last
    looked is read only if woken, as in waitress."""
    def pull_trigger() -> None:
        channel = getattr(_serving, "channel", None)
        if channel is None or not channel.batching.reads_wait or channel.writable():
            _wake_up(trigger)
    return pull_trigger
