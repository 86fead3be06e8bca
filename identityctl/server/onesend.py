"""An answer's header and its body in one send, straight to the socket, and a channel's
output sent by one thread at a time.

waitress sends an answer's status line and headers as soon as the app's first chunk is
written, then that chunk: two sends per answer, two TCP segments (it sets TCP_NODELAY), and
two wake-ups of the client reading them. PERF: :class:`OneSendTask` hands the channel the
header and the first chunk together, so a typical answer (a token, a ceremony's options, an
error) leaves in one send. A first chunk over ``ONE_SEND_LIMIT`` bytes, an empty one (a file
answer writes its header alone) and every later chunk are sent as waitress sends them.

PERF: what a task writes while nothing waits in the channel's output goes to the socket at
once, from the task's thread; only what the socket does not take goes through waitress's
output buffers (an append, a copy out and a skip per answer otherwise).
"""

from __future__ import annotations

import time

from waitress.channel import HTTPChannel
from waitress.task import WSGITask

#: The largest first chunk copied into one send with its header (larger ones follow it).
ONE_SEND_LIMIT = 64 * 1024


class OneSendChannel(HTTPChannel):
    """A channel that keeps what its task writes while the task assembles one send, and
    whose output is sent by one thread at a time.

    Only the task serving the channel writes to it meanwhile: waitress's loop writes to a
    channel (a 100 Continue) only while none of its requests is being served.
    """

    #: The writes kept for one send, while a task assembles it (None otherwise).
    held: list[bytes] | None = None

    def write_soon(self, data: bytes) -> int:
        if self.held is not None:
            self.held.append(data)
            return len(data)
        if type(data) is bytes and data and not self.total_outbufs_len and self.connected:
            with self.outbuf_lock:
                # Nothing must go first, and the loop did not close it meanwhile.
                if not self.total_outbufs_len and self.connected:
                    try:
                        sent = self.send(data, do_close=False)
                    except OSError:
                        sent = 0  # waitress's write below meets the error and handles it
                    if sent:
                        self.last_activity = time.time()
                        if sent == len(data):
                            return sent
                        return sent + super().write_soon(data[sent:])
        return super().write_soon(data)

    def handle_write(self) -> None:
        # waitress's loop sends a channel's output without its lock once no request is
        # queued, while the task thread that has just taken its request off may still be
        # sending under the lock (a pipelined request's 100 Continue): both sent the same
        # bytes, and the connection broke. The loop comes back while the channel is
        # writable.
        if not self.outbuf_lock.acquire(blocking=False):
            return
        try:
            super().handle_write()
        finally:
            self.outbuf_lock.release()


class OneSendTask(WSGITask):
    """waitress's WSGI task, sending an answer's header with its first chunk."""

    channel: OneSendChannel

    def write(self, data: bytes) -> None:
        if self.wrote_header or not isinstance(data, bytes) or not data \
                or len(data) > ONE_SEND_LIMIT:
            super().write(data)
            return
        channel = self.channel
        channel.held = held = []
        try:
            super().write(data)  # the header, then the chunk as waitress frames it
        finally:
            # Also when the write failed after the header was made: the header is sent, as
            # waitress would have sent it, and not lost.
            channel.held = None
            if held:
                channel.write_soon(b"".join(held))
