"""waitress's event loop woken after a request only when the channel needs it.

At the end of every request it serves, a waitress channel wakes the event loop (a byte down
its trigger pipe), so that the loop looks at the channel again; the loop then walks every
open connection. The servers here keep a channel readable while it serves its request
(``channel_request_lookahead=1``, runtime.py) and usually send the whole answer from the
request thread (server/onesend.py), so after most requests the loop has nothing to look at.
PERF: :func:`wake_only_when_needed` skips a wake-up asked for by a channel's request thread
while the channel has no request left, nothing left to send and is not closing: a sixth of
a small request's CPU (docs/performance.md).

Every other wake-up stays: one asked for while output is pending (waitress's own flushing
and back-pressure), while requests remain, for a closing channel, and any wake-up asked for
outside a channel's service (the outbox, shutdown).
"""

from __future__ import annotations

import threading
from typing import Any

from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer

#: The channel this request thread is serving (one at a time per thread).
_serving = threading.local()


class QuietChannel(HTTPChannel):
    """A channel that says when its event loop has something to do for it."""

    def service(self) -> None:
        _serving.channel = self
        try:
            super().service()
        finally:
            _serving.channel = None

    def needs_the_loop(self) -> bool:
        """Whether the loop must look at this channel again: a request left (to read on,
        or queued), output to send, or the connection to close."""
        return bool(self.requests or self.total_outbufs_len or self.will_close
                    or self.close_when_flushed)


def wake_only_when_needed(servers: dict[Any, Any]) -> None:
    """Make every waitress server in ``servers`` (the socket map given to
    ``waitress.create_server``) skip the wake-ups its channels do not need (above).

    Only servers whose channels stay readable while serving (``channel_request_lookahead``
    1 or more): without that, the end of a request is when the loop must start reading the
    connection again.
    """
    for server in servers.values():
        if isinstance(server, BaseWSGIServer) and server.adj.channel_request_lookahead >= 1:
            server.pull_trigger = _quiet(server.pull_trigger)


def _quiet(pull_trigger: Any) -> Any:
    def pull_trigger_when_needed() -> None:
        channel: QuietChannel | None = getattr(_serving, "channel", None)
        if channel is None or channel.needs_the_loop():
            pull_trigger()

    return pull_trigger_when_needed
