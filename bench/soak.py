"""Soak: passkey ceremonies AND token requests at full speed from several client processes.

The load test. `--processes` client processes (multiprocessing, 4 by default), each
with `--ceremony-threads` threads running passkey ceremonies and `--token-threads` threads
asking /oauth2/token for client_credentials tokens, all at full speed for `--seconds` (300 by
default). The ceremonies reuse bench/passkey.py's harness (its Client, software
authenticator and users): each thread alternates a registration and a sign-in with one of
its users, so the database keeps growing as in production. The token requests are
bench/oauth_token.py's M2M client (HTTP Basic, client_credentials).

Every `--window` seconds (10 by default) it prints, per kind, the requests completed, per
second, p50/p99 and the failures of that window, and the resident memory (RSS) of the server
process, found by the port it listens on (Linux /proc), or given with --pid. At the end: the
total errors (must be 0) and the p99 drift of each kind (last window minus first, and the
spread between the best and the worst window).

    identityctl --config demo/config.toml serve --workers 2 &
    .venv/bin/python bench/soak.py --url http://localhost:8090 --config demo/config.toml \\
        --processes 4 --seconds 300

Exits with status 1 when any request failed.
"""

# ruff: noqa: E402  (sys.path is fixed before the imports below)
from __future__ import annotations

import os
import sys

# `python bench/soak.py` puts bench/ first on sys.path, where bench/token.py would shadow
# the standard library's `token` module: import from the repository root instead.
_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH]

import argparse
import json
import multiprocessing
import queue
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests

from bench import passkey as harness
from bench.oauth_token import create_clients
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin

KINDS = ("ceremony", "token")
PLURAL = {"ceremony": "ceremonies", "token": "tokens"}
#: Seconds between the last client process being ready and the clock starting.
START_DELAY = 0.5


def ceremony(client: harness.Client) -> None:
    """A registration, then a sign-in, then a registration... per client thread."""
    if client.registered and client.turn % 2:
        client.sign_in()
    else:
        client.register()


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    return inodes


def server_pids(port: int) -> list[int]:
    """Processes holding a socket that listens on ``port`` (Linux; [] when unknown)."""
    inodes = _listening_inodes(port)
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            links = {os.readlink(fd) for fd in (entry / "fd").iterdir()}
        except OSError:
            continue
        if any(f"socket:[{inode}]" in links for inode in inodes):
            pids.append(int(entry.name))
    return sorted(pids)


def rss_mib(pids: list[int]) -> float | None:
    """The summed VmRSS of ``pids`` in MiB (None when unreadable)."""
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return round(total / 1024, 1) if pids else None


def percentile(ordered: list[float], share: float) -> float:
    return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 1) \
        if ordered else 0.0


def client_process(index: int, plan: dict[str, Any], out: Any, go: Any, clock: Any) -> None:
    """One client process: its ceremony and token threads. It reports ready, waits for the
    common start time, then every second sends the records it has, as (window, kind,
    latency ms or None, failure)."""
    url, window = plan["url"], plan["window"]
    out.put((index, "ready"))
    go.wait()
    start_at = clock.value
    stop_at = start_at + plan["seconds"]
    records: list[tuple[int, str, float | None, str]] = []
    lock = threading.Lock()

    def record(began: float, kind: str, failure: str = "") -> None:
        finished = time.time()
        slot = min(int((began - start_at) / window), plan["windows"] - 1)
        with lock:
            records.append((slot, kind, None if failure else (finished - began) * 1000,
                            failure))

    def ceremonies(user_ids: list[str]) -> None:
        client = harness.Client(url=url, origin=plan["origin"], rp_id=plan["rp_id"],
                                admin_token=plan["admin_token"], user_ids=user_ids)
        while (began := time.time()) < stop_at:
            try:
                ceremony(client)
            except RuntimeError as exc:  # an error answer: "path status code"
                record(began, "ceremony", str(exc))
            except harness.TRANSPORT_ERRORS as exc:
                record(began, "ceremony", type(exc).__name__)
            else:
                record(began, "ceremony")

    def tokens() -> None:
        http = requests.Session()
        client_id, secret = plan["m2m"]
        while (began := time.time()) < stop_at:
            try:
                response = http.post(f"{url}/oauth2/token", timeout=60,
                                     data={"grant_type": "client_credentials"},
                                     auth=(client_id, secret))
            except requests.RequestException as exc:
                record(began, "token", type(exc).__name__)
                continue
            if response.status_code == 200 and response.json().get("access_token"):
                record(began, "token")
            else:
                code = response.json().get("code", "") if response.content else ""
                record(began, "token", f"/oauth2/token {response.status_code} {code}")

    workers = [threading.Thread(target=ceremonies, args=(users,), daemon=True)
               for users in plan["users"][index]]
    workers += [threading.Thread(target=tokens, daemon=True)
                for _ in range(plan["token_threads"])]
    time.sleep(max(0.0, start_at - time.time()))
    for worker in workers:
        worker.start()
    while any(worker.is_alive() for worker in workers):
        time.sleep(min(window, 1.0))
        with lock:
            batch, records[:] = list(records), []
        if batch:
            out.put((index, batch))
    for worker in workers:
        worker.join()
    with lock:
        out.put((index, list(records)))
    out.put((index, None))


def summarize(records: list[tuple[int, str, float | None, str]], seconds: float
              ) -> dict[str, Any]:
    line: dict[str, Any] = {}
    for kind in KINDS:
        latencies = sorted(r[2] for r in records if r[1] == kind and r[2] is not None)
        failures: dict[str, int] = {}
        for r in records:
            if r[1] == kind and r[2] is None:
                failures[r[3]] = failures.get(r[3], 0) + 1
        line[kind] = {"count": len(latencies), "per_second": round(len(latencies) / seconds, 1),
                      "p50_ms": percentile(latencies, 0.50),
                      "p99_ms": percentile(latencies, 0.99), "failures": failures}
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://localhost:8090", help="Running server.")
    parser.add_argument("--config", required=True, help="The server's config.toml.")
    parser.add_argument("--processes", type=int, default=4, help="Client processes.")
    parser.add_argument("--ceremony-threads", "--threads", type=int, default=2,
                        help="Passkey ceremony threads per client process (--threads: the "
                             "old name).")
    parser.add_argument("--token-threads", type=int, default=2,
                        help="client_credentials token threads per client process.")
    parser.add_argument("--seconds", type=float, default=300.0, help="Total duration.")
    parser.add_argument("--window", type=float, default=10.0, help="Report every N seconds.")
    parser.add_argument("--pid", type=int, action="append", default=[],
                        help="Server process id(s) for RSS (default: whoever listens on "
                             "the URL's port).")
    parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
    args = parser.parse_args()

    url = args.url.rstrip("/")
    config, admin_token = harness.open_deployment(args.config,
                                                  token_ttl=int(args.seconds) * 2 + 600)
    run = uuid.uuid4().hex[:8]
    (m2m_id, m2m_secret), _ = create_clients(run)
    users = [[[directory.create_user(username=f"soak-{run}-{p}-{t}-{i}",
                                     origin=RequestOrigin(actor="bench")).id
               for i in range(harness.USERS_PER_THREAD)]
              for t in range(args.ceremony_threads)] for p in range(args.processes)]
    windows = max(1, int(-(-args.seconds // args.window)))
    plan = {"url": url, "origin": config.passkey.allowed_origins[0],
            "rp_id": config.passkey.rp_id, "admin_token": admin_token,
            "m2m": (m2m_id, m2m_secret), "users": users, "token_threads": args.token_threads,
            "seconds": args.seconds, "window": args.window, "windows": windows}
    port = urlsplit(url).port or (443 if url.startswith("https") else 80)
    pids = args.pid or server_pids(port)

    report: dict[str, Any] = {
        "url": url, "processes": args.processes, "ceremony_threads": args.ceremony_threads,
        "token_threads": args.token_threads, "seconds": args.seconds, "server_pids": pids,
        "rss_start_mib": rss_mib(pids), "windows": []}
    if not args.json:
        print(f"{args.processes} client processes x ({args.ceremony_threads} ceremony + "
              f"{args.token_threads} token threads), {args.seconds:g} s, {url}; server pids "
              f"{pids or 'unknown'} RSS {report['rss_start_mib']} MiB", flush=True)

    context = multiprocessing.get_context("spawn")
    out, go, clock = context.Queue(), context.Event(), context.Value("d", 0.0)
    processes = [context.Process(target=client_process, args=(i, plan, out, go, clock),
                                 daemon=True) for i in range(args.processes)]
    for process in processes:
        process.start()
    ready: set[int] = set()
    while len(ready) < args.processes:  # every process imported and waiting: no cold start
        try:
            index, _ = out.get(timeout=120)
        except queue.Empty:
            sys.exit("client processes did not start within 120 s")
        ready.add(index)
    clock.value = time.time() + START_DELAY
    go.set()
    plan["start_at"] = clock.value
    by_window: dict[int, list[tuple[int, str, float | None, str]]] = {}
    running, shown = set(range(args.processes)), 0

    def show(slot: int) -> None:
        length = min(args.window, args.seconds - slot * args.window)
        summary = summarize(by_window.pop(slot, []), length)
        summary["at_s"] = round(min((slot + 1) * args.window, args.seconds), 1)
        summary["rss_mib"] = rss_mib(pids)
        report["windows"].append(summary)
        if args.json:
            return
        parts = [f"t={summary['at_s']:7.1f}s"]
        for kind in KINDS:
            line = summary[kind]
            failed = sum(line["failures"].values())
            note = f" FAILED {failed} {line['failures']}" if failed else ""
            parts.append(f"{PLURAL[kind]} {line['count']:6} {line['per_second']:7.1f}/s p50 "
                         f"{line['p50_ms']:6.1f} p99 {line['p99_ms']:6.1f} ms{note}")
        print("  ".join(parts) + f"  RSS {summary['rss_mib']} MiB", flush=True)

    deadline = plan["start_at"] + args.seconds + 120
    while running and time.time() < deadline:
        try:
            index, batch = out.get(timeout=1.0)
        except queue.Empty:
            if any(not p.is_alive() for i, p in enumerate(processes) if i in running):
                for i, p in enumerate(processes):
                    if i in running and not p.is_alive():
                        running.discard(i)
                        report.setdefault("lost_processes", []).append(i)
            batch, index = [], -1
        if batch is None:
            running.discard(index)
        else:
            for item in batch:
                by_window.setdefault(item[0], []).append(item)
        # A window is complete once every process is past it (plus a second of slack).
        elapsed = time.time() - plan["start_at"]
        while shown < windows and elapsed > (shown + 1) * args.window + 1.0 and running:
            show(shown)
            shown += 1
    while shown < windows:
        show(shown)
        shown += 1
    for process in processes:
        process.join(timeout=10)

    report["rss_end_mib"] = rss_mib(pids)
    failures = sum(sum(w[k]["failures"].values()) for w in report["windows"] for k in KINDS)
    failures += len(report.get("lost_processes", []))
    report["failures"] = failures
    for kind in KINDS:
        p99s = [w[kind]["p99_ms"] for w in report["windows"] if w[kind]["count"]]
        report[f"{kind}_total"] = sum(w[kind]["count"] for w in report["windows"])
        report[f"{kind}_p99_drift_ms"] = round(p99s[-1] - p99s[0], 1) if p99s else 0.0
        report[f"{kind}_p99_spread_ms"] = round(max(p99s) - min(p99s), 1) if p99s else 0.0
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"RSS {report['rss_start_mib']} -> {report['rss_end_mib']} MiB; "
              + "; ".join(f"{PLURAL[kind]} {report[f'{kind}_total']} "
                          f"({report[f'{kind}_total'] / args.seconds:.1f}/s), p99 drift "
                          f"{report[f'{kind}_p99_drift_ms']} ms (spread "
                          f"{report[f'{kind}_p99_spread_ms']} ms)" for kind in KINDS)
              + f"; failures {failures}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
