"""A connection's pipelined requests, bounded.

waitress parses every request a client sends in one write and answers them in turn on one
request thread. A client that sends a few hundred (`GET /openapi.json`, 177 KB each) and never
reads the answers holds that thread once the connection's unsent output passes waitress's
16 MB watermark, for as long as the connection stays open; eight such connections held
every thread. :class:`BoundedPipelining` keeps the first ``MAX_PIPELINED`` requests of such a
write, answers them, the last with ``Connection: close``, and forgets the rest: their answers
(at most ``MAX_PIPELINED`` x the largest answer) fit under the watermark, so the thread
goes back to the pool, and the connection ends once it is flushed or idle
(``channel_timeout``). A client that pipelines fewer is served as before.
"""

from __future__ import annotations

from waitress.channel import HTTPChannel

#: Requests a connection may have waiting for their answers.
MAX_PIPELINED = 4


class BoundedPipelining(HTTPChannel):
    def received(self, data: bytes) -> bool:
        taken = super().received(data)
        with self.requests_lock:
            if len(self.requests) > MAX_PIPELINED:
                for dropped in self.requests[MAX_PIPELINED:]:
                    dropped.close()
                del self.requests[MAX_PIPELINED:]
                # Not yet served (a thread serves requests[0] first): its answer closes.
                self.requests[-1].headers["CONNECTION"] = "close"
                self.request = None  # and a request begun after them is not read on
        return taken
