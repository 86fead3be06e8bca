"""The floor: GET /health requests per second and p50/p99 latency over HTTP, N client threads.

/health does the least a request can do (routing, middleware, a `SELECT 1` on the database), so
its rate is the ceiling every other endpoint stays under: what waitress, Falcon and our
middleware cost per request. Each client thread keeps one HTTP connection (keep-alive) and
sends requests back to back for `--seconds`, after a one-second warm-up.

Against a running server:

    .venv/bin/python bench/floor.py --url http://localhost:8090 --threads 8 --seconds 10

Or let the bench start its own (a fresh `identityctl init` in a temporary folder, then
`identityctl serve --workers N`), e.g. to compare one process with several:

    .venv/bin/python bench/floor.py --serve --workers 1 --threads 8
    .venv/bin/python bench/floor.py --serve --workers 4 --threads 8

The client threads share one CPython process too: on a small machine they, not the
server, can be what saturates; run the bench on another machine (or several) to find the
server's own limit.
"""

from __future__ import annotations

import sys

# Run as a script, this folder comes first on sys.path, where bench/token.py would shadow the
# standard library's `token` (imported by dataclasses): the repository root goes there.
sys.path.pop(0)

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.passkey import Results, run_phase

WARM_UP_SECONDS = 1.0


@dataclass
class HealthClient:
    """One bench thread: its keep-alive session to the server."""

    url: str
    http: requests.Session = field(default_factory=requests.Session)

    def health(self) -> None:
        response = self.http.get(self.url + "/health", timeout=30)
        if response.status_code != 200:
            raise RuntimeError(f"/health {response.status_code}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def served(workers: int, threads: int | None) -> Iterator[str]:
    """`identityctl serve --workers N` on a fresh deployment in a temporary folder."""
    identityctl = [sys.executable, "-m", "identityctl"]
    with tempfile.TemporaryDirectory(prefix="identityctl-floor-") as folder:
        made = subprocess.run([*identityctl, "init", "--dir", folder, "--json"],
                              capture_output=True, text=True, check=False)
        if made.returncode != 0:
            sys.exit(f"identityctl init failed: {made.stderr}")
        port = _free_port()
        command = [*identityctl, "--config", str(Path(folder) / "config.toml"), "serve",
                   "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
        if threads:
            command += ["--threads", str(threads)]
        log_path = Path(folder) / "serve.log"
        with log_path.open("wb") as log:
            # The access log of every request goes to the log file, as in production.
            server = subprocess.Popen(command, stdout=log, stderr=log)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    requests.get(url + "/health", timeout=5)
                    break
                except requests.ConnectionError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        sys.exit(f"identityctl serve did not start:\n{log_path.read_text()}")
                    time.sleep(0.1)
            yield url
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def measure(url: str, *, threads: int, seconds: float) -> dict[str, object]:
    clients = [HealthClient(url.rstrip("/")) for _ in range(threads)]
    run_phase(clients, HealthClient.health, WARM_UP_SECONDS)  # connections open, caches warm
    results: Results = run_phase(clients, HealthClient.health, seconds)
    summary = results.summary(seconds)
    summary["requests"] = summary.pop("ceremonies")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://localhost:8090", help="Running server.")
    parser.add_argument("--serve", action="store_true",
                        help="Start a fresh server instead of using --url.")
    parser.add_argument("--workers", type=int, default=1,
                        help="With --serve: server processes (serve --workers).")
    parser.add_argument("--server-threads", type=int, default=None,
                        help="With --serve: threads per server process (default: config).")
    parser.add_argument("--threads", type=int, default=8, help="Client threads.")
    parser.add_argument("--seconds", type=float, default=10.0, help="Measured duration.")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON.")
    args = parser.parse_args()

    with (served(args.workers, args.server_threads) if args.serve
          else contextlib.nullcontext(args.url)) as url:
        summary = measure(url, threads=args.threads, seconds=args.seconds)
    report = {"url": url, "threads": args.threads, "seconds": args.seconds,
              "server_workers": args.workers if args.serve else None,
              "cpus": os.cpu_count(), "health": summary}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    where = f"serve --workers {args.workers}" if args.serve else url
    print(f"{args.threads} client threads, {args.seconds:g} s, {where}, {os.cpu_count()} CPUs")
    print(f"GET /health  {summary['requests']:7} requests  {summary['per_second']:8.1f}/s  "
          f"p50 {summary['p50_ms']:6.1f} ms  p99 {summary['p99_ms']:6.1f} ms  "
          f"failures {sum(summary['failures'].values())} {summary['failures'] or ''}")


if __name__ == "__main__":
    main()
