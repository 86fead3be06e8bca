"""The cost of delivering one outbox message as the outbox's history grows: back-channel
logout notices delivered by a running identityctl to a local receiver, with 0 and then
20,000 delivered messages already in the store.

The guard: a message with the long history costs no more than twice one without (claiming
due messages reads an index of the undelivered ones; delivered ones are not scanned).
Prints messages/s at each size and the ratio.

    identityctl --config demo/config.toml serve &
    .venv/bin/python bench/outbox.py --url http://localhost:8090 --config demo/config.toml
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench.passkey import bench_arguments
from identityctl.config import load_config
from identityctl.services.accounts.sessions import BACKCHANNEL_LOGOUT
from identityctl.services.admin.bootstrap import open_store
from identityctl.store import db, outbox
from identityctl.store.models import OutboxMessage, new_id

HISTORY = (0, 20_000)
MESSAGES = 400


class Receiver(BaseHTTPRequestHandler):
    """Answers every logout notice 200 and counts it."""

    received = 0
    lock = threading.Lock()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with Receiver.lock:
            Receiver.received += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def grow_history(count: int, *, kind: str = BACKCHANNEL_LOGOUT,
                 target: str = "http://127.0.0.1:9/{n}", age: float = 0.0,
                 payload: dict | None = None) -> None:
    """Delivered messages of ``kind`` (``age`` seconds old) until the outbox holds ``count``
    of them; ``target`` may number each ({n})."""
    have = OutboxMessage.select().where((OutboxMessage.kind == kind)
                                        & OutboxMessage.delivered_at.is_null(False)).count()
    sent = time.time() - age
    rows = [{"id": new_id(), "kind": kind, "target": target.format(n=n),
             "payload": payload or {}, "created_at": sent, "next_attempt_at": sent,
             "delivered_at": sent, "attempts": 1} for n in range(max(0, count - have))]
    for start in range(0, len(rows), 500):
        with db.transaction():
            OutboxMessage.insert_many(rows[start:start + 500]).execute()


def deliver(target: str) -> float:
    """Queue MESSAGES notices and wait until the server delivered them; seconds taken."""
    Receiver.received = 0
    started = time.perf_counter()
    with db.transaction():
        for _ in range(MESSAGES):
            outbox.enqueue(kind=BACKCHANNEL_LOGOUT, target=target, payload={
                "clientId": "bench", "sub": "bench", "sid": new_id(), "jti": new_id()})
    while Receiver.received < MESSAGES:
        if time.perf_counter() - started > 300:
            raise SystemExit(f"only {Receiver.received} of {MESSAGES} delivered in 300 s")
        time.sleep(0.01)
    return time.perf_counter() - started


def main() -> None:
    args = bench_arguments(__doc__).parse_args()
    open_store(load_config(args.config))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    target = f"http://127.0.0.1:{server.server_address[1]}/logout"
    report = {}
    for history in HISTORY:
        grow_history(history)
        elapsed = deliver(target)
        report[str(history)] = {"messages": MESSAGES, "seconds": round(elapsed, 2),
                                "per_second": round(MESSAGES / elapsed, 1)}
    small, large = (report[str(size)] for size in HISTORY)
    ratio = small["per_second"] / large["per_second"]
    server.shutdown()
    if args.json:
        print(json.dumps({"url": args.url, "history": report, "cost_ratio": round(ratio, 2)},
                         indent=2))
        return
    for history in HISTORY:
        line = report[str(history)]
        print(f"{history:6} delivered before: {line['messages']} messages in "
              f"{line['seconds']} s, {line['per_second']}/s")
    print(f"a message with {HISTORY[1]} delivered before costs {ratio:.2f}x one with "
          f"{HISTORY[0]} ({'within' if ratio <= 2 else 'OVER'} the 2x guard)")


if __name__ == "__main__":
    main()
