"""A relying party's two HTTP ends, served on 127.0.0.1 for tests: the redirect URI a
browser lands on (any GET answers a short page), and back-channel logout endpoints
(POST /logout/<name>) that keep every logout token they receive.

``hold(name)`` makes that endpoint keep its next request waiting until ``release(name)``:
the service can be killed while it delivers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs


@dataclass
class RelyingParty:
    base_url: str
    #: Logout tokens received, per endpoint name, in order.
    logout_tokens: dict[str, list[str]] = field(default_factory=dict)
    _held: dict[str, threading.Event] = field(default_factory=dict)
    _holding: dict[str, threading.Event] = field(default_factory=dict)
    _arrived: threading.Condition = field(default_factory=threading.Condition)

    def url(self, path: str) -> str:
        return self.base_url + path

    def hold(self, name: str) -> None:
        self._held[name], self._holding[name] = threading.Event(), threading.Event()

    def wait_until_holding(self, name: str, timeout: float = 30) -> None:
        """Until a request to the held endpoint has arrived and is kept waiting."""
        assert self._holding[name].wait(timeout), f"{name}: nothing arrived to hold"

    def release(self, name: str) -> None:
        self._held.pop(name).set()

    def wait_for_logouts(self, name: str, count: int, timeout: float = 30) -> list[str]:
        """The first ``count`` logout tokens of endpoint ``name`` (fails after ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while len(self.logout_tokens.get(name, [])) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"{name}: {len(self.logout_tokens.get(name, []))} logout " \
                                 f"token(s) of {count} arrived"
                self._arrived.wait(left)
            return list(self.logout_tokens[name][:count])


@contextmanager
def relying_party() -> Iterator[RelyingParty]:
    party: RelyingParty

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = b"<!doctype html><title>Client</title><h1>Back at the client</h1>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            name = self.path.removeprefix("/logout/")
            form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
            held = party._held.get(name)
            if held is not None:
                party._holding[name].set()
                held.wait(60)
            with party._arrived:
                party.logout_tokens.setdefault(name, []).extend(form.get("logout_token", []))
                party._arrived.notify_all()
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    party = RelyingParty(base_url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield party
    finally:
        for event in party._held.values():
            event.set()
        server.shutdown()
        server.server_close()
