"""Soak: passkey ceremonies at full speed for N seconds; throughput per window, server RSS.

Reuses bench/passkey.py's harness (its client threads, software authenticator and bench
users). Each client thread alternates a registration and a sign-in with one of its users,
so the database keeps growing as it would in production. Every `--window` seconds (10 by
default) it prints the ceremonies completed, ceremonies/s, p50/p99 and the failures of that
window; at the start and the end it prints the resident memory (RSS) of the server process,
found by the port it listens on (Linux /proc), or given with --pid.

    identityctl --config demo/config.toml serve &
    .venv/bin/python bench/soak.py --url http://localhost:8090 --config demo/config.toml \\
        --threads 8 --seconds 300

Exits with status 1 when any ceremony failed.
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
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import passkey as harness
from identityctl.config import load_config
from identityctl.security.tokens import ACCESS_TOKEN_TYP, TokenService
from identityctl.server.runtime import open_store
from identityctl.services import directory


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://localhost:8090", help="Running server.")
    parser.add_argument("--config", required=True, help="The server's config.toml.")
    parser.add_argument("--threads", type=int, default=4, help="Client threads.")
    parser.add_argument("--seconds", type=float, default=60.0, help="Total duration.")
    parser.add_argument("--window", type=float, default=10.0, help="Report every N seconds.")
    parser.add_argument("--pid", type=int, action="append", default=[],
                        help="Server process id(s) for RSS (default: whoever listens on "
                             "the URL's port).")
    parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
    args = parser.parse_args()

    config = load_config(args.config)
    open_store(config)
    admin_token = TokenService(config.issuer).sign(
        {"sub": "bench", "aud": [config.issuer], "scope": "system"}, typ=ACCESS_TOKEN_TYP,
        ttl=int(args.seconds) * 2 + 600)
    run = uuid.uuid4().hex[:8]
    clients = [harness.Client(
        url=args.url.rstrip("/"), origin=config.passkey.allowed_origins[0],
        rp_id=config.passkey.rp_id, admin_token=admin_token,
        user_ids=[directory.create_user(username=f"soak-{run}-{n}-{i}", actor="bench").id
                  for i in range(harness.USERS_PER_THREAD)])
        for n in range(args.threads)]
    port = urlsplit(args.url).port or (443 if args.url.startswith("https") else 80)
    pids = args.pid or server_pids(port)

    report: dict[str, object] = {"url": args.url, "threads": args.threads,
                                 "seconds": args.seconds, "server_pids": pids,
                                 "rss_start_mib": rss_mib(pids), "windows": []}
    windows: list[dict[str, object]] = report["windows"]  # type: ignore[assignment]
    if not args.json:
        print(f"{args.threads} client threads, {args.seconds:g} s, {args.url}; server pids "
              f"{pids or 'unknown'} RSS {report['rss_start_mib']} MiB")
    began = time.perf_counter()
    while (elapsed := time.perf_counter() - began) < args.seconds:
        length = min(args.window, args.seconds - elapsed)
        summary = harness.run_phase(clients, ceremony, length).summary(length)
        summary["at_s"] = round(time.perf_counter() - began, 1)
        summary["rss_mib"] = rss_mib(pids)
        windows.append(summary)
        if not args.json:
            print(f"t={summary['at_s']:7.1f}s {summary['ceremonies']:6} ceremonies "
                  f"{summary['per_second']:7.1f}/s  p50 {summary['p50_ms']:6.1f} ms  "
                  f"p99 {summary['p99_ms']:6.1f} ms  RSS {summary['rss_mib']} MiB  "
                  f"failures {sum(summary['failures'].values())} {summary['failures'] or ''}",
                  flush=True)
    report["rss_end_mib"] = rss_mib(pids)
    failures = sum(sum(w["failures"].values()) for w in windows)  # type: ignore[union-attr]
    report["failures"] = failures
    p99s = [w["p99_ms"] for w in windows if w["ceremonies"]]
    report["p99_drift_ms"] = round(p99s[-1] - p99s[0], 1) if p99s else 0.0
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"RSS {report['rss_start_mib']} -> {report['rss_end_mib']} MiB; "
              f"p99 drift {report['p99_drift_ms']} ms; failures {failures}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
