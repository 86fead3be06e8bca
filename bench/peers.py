"""client_credentials tokens: identityctl against node oidc-provider, in one run.

Starts `identityctl serve --workers 1 --threads 4` on a fresh `identityctl init` deployment
and the peer, `node bench/peers/oidc-provider.js` (one process; one client_credentials
client, ES256 JWT access tokens at /oauth2/token), then asks both for tokens in turns,
`--rounds` times (which goes first alternates), with wrk (bench/wrk.py: 16 kept-alive
connections, a few percent of a core) where it is installed, else (or with `--client
python`) the multi-process client of bench/hotpaths.py (HTTP Basic, every thread a
keep-alive session), which takes about a core of the two for itself. Per server: tokens/s,
p50, p99, server CPU ms per token (utime+stime in /proc), errors; then the peer's rate and
CPU as multiples of identityctl's, overall and per round.

identityctl writes an audit row for every token and checks the client's state; the peer
keeps nothing for a JWT access token. The comparison is of what each does per token.

    (cd bench/peers && npm ci)    # once: the peer's pinned packages
    .venv/bin/python bench/peers.py --seconds 5 --rounds 3
    # and identityctl as an earlier commit has it, in the same rounds (a before/after):
    git worktree add /tmp/before REV && .venv/bin/python bench/peers.py --against /tmp/before

Without node or the peer's packages it says so and exits 0 (the bench is run by hand).
"""

# ruff: noqa: E402  (sys.path is fixed before the imports below)
from __future__ import annotations

import os
import sys

_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH]
sys.path.insert(0, os.path.dirname(_BENCH))

import argparse
import contextlib
import json
import secrets
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench import wrk
from bench.hotpaths import (
    ClientCredentials,
    Target,
    free_port,
    load_options,
    measure,
    started,
)
from bench.oauth_token import create_clients
from bench.passkey import open_deployment

PEER_DIR = Path(_BENCH) / "peers"
PEER_SCRIPT = PEER_DIR / "oidc-provider.js"
PEER_CLIENT_ID = "peer-m2m"


def missing_peer() -> str:
    """Why the peer cannot run here, or "" when it can."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (PEER_DIR / "node_modules" / "oidc-provider" / "package.json").is_file():
        return f"the peer's packages are not installed (cd {PEER_DIR} && npm ci)"
    return ""


def token_target(name: str, url: str, pid: int, m2m: tuple[str, str]) -> Target:
    """A server under test that only hands out client_credentials tokens."""
    return Target(name=name, url=url, pid=pid, origin="", rp_id="", m2m=m2m, spa_id="",
                  password_app="", mcp_token="")


def ratio(peer: float | None, ours: float | None) -> float | None:
    return round(peer / ours, 2) if peer and ours else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    load_options(parser, seconds=5.0,
                 server_threads="identityctl's waitress threads (one process).")
    parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
    parser.add_argument("--pin-cores", action="store_true",
                        help="Keep identityctl's one process to one core (serve --pin-cores).")
    parser.add_argument("--client", choices=["wrk", "python"],
                        default="wrk" if wrk.available() else "python",
                        help="The load's client (default: wrk where it is installed; "
                             "--processes x --threads connections either way).")
    parser.add_argument("--against", type=Path, metavar="DIR",
                        help="Also serve identityctl from this source tree (an earlier "
                             "commit's worktree with the same store schema) on the same "
                             "deployment, in the same rounds.")
    args = parser.parse_args()
    if why := missing_peer():
        print(f"bench/peers.py skipped: {why}")
        return
    path = ClientCredentials()
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="peers-")))
        identityctl = [sys.executable, "-m", "identityctl"]
        subprocess.run([*identityctl, "init", "--dir", str(folder / "deployment"), "--json"],
                       check=True, capture_output=True)
        config_path, port = folder / "deployment" / "config.toml", free_port()
        url = f"http://127.0.0.1:{port}"
        server = stack.enter_context(started(
            [*identityctl, "--config", str(config_path), "serve", "--host", "127.0.0.1",
             "--port", str(port), "--workers", "1", "--threads", str(args.server_threads),
             *(["--pin-cores"] if args.pin_cores else [])],
            url, folder / "serve.log"))
        open_deployment(config_path)
        m2m, _ = create_clients(uuid.uuid4().hex[:8])
        ours = token_target("identityctl", url, server.pid, m2m)
        peer_secret, peer_port = secrets.token_urlsafe(32), free_port()
        peer_url = f"http://127.0.0.1:{peer_port}"
        peer_process = stack.enter_context(started(
            ["node", str(PEER_SCRIPT), str(peer_port), PEER_CLIENT_ID, peer_secret],
            peer_url, folder / "peer.log"))
        peer = token_target("oidc-provider", peer_url, peer_process.pid,
                            (PEER_CLIENT_ID, peer_secret))
        targets = [ours, peer]
        if args.against:
            tree, port = args.against.resolve(), free_port()
            earlier = stack.enter_context(started(
                [*identityctl, "--config", str(config_path), "serve", "--host", "127.0.0.1",
                 "--port", str(port), "--workers", "1", "--threads", str(args.server_threads)],
                f"http://127.0.0.1:{port}", folder / "against.log", tree=tree))
            targets.append(token_target(f"identityctl {tree.name}", f"http://127.0.0.1:{port}",
                                        earlier.pid, m2m))
        phases: dict[str, list[wrk.Measured]] = {target.name: [] for target in targets}
        for round_number in range(args.rounds):
            # Alternate which server goes first, so drift in the machine's speed weighs on
            # each alike.
            for target in targets if round_number % 2 == 0 else targets[::-1]:
                if args.client == "wrk":
                    phase = wrk.token_phase(target, connections=args.processes * args.threads,
                                            threads=args.processes, seconds=args.seconds)
                else:
                    phase = wrk.from_python(measure(
                        path, target, processes=args.processes, threads=args.threads,
                        seconds=args.seconds, client_cpus=""))
                phases[target.name].append(phase)
                if not args.json:
                    print(f"  {target.name}, round {round_number + 1}: {phase.rate:.1f}/s",
                          file=sys.stderr, flush=True)
    report: dict[str, Any] = {
        "identityctl": f"serve --workers 1 --threads {args.server_threads}"
                       + (" --pin-cores" if args.pin_cores else ""),
        "client": f"{args.client}, {args.processes * args.threads} connections",
        "seconds": args.seconds, "rounds": args.rounds, "cpus": os.cpu_count(),
        "load_average": os.getloadavg()[0],
        "servers": {name: wrk.combined(runs) for name, runs in phases.items()}}
    line = report["servers"]
    report["peer_rate_ratio"] = ratio(line[peer.name]["per_second"],
                                      line[ours.name]["per_second"])
    report["peer_cpu_ratio"] = ratio(line[peer.name]["cpu_ms"], line[ours.name]["cpu_ms"])
    report["peer_rate_ratio_by_round"] = [
        ratio(theirs.rate, mine.rate)
        for mine, theirs in zip(phases[ours.name], phases[peer.name], strict=True)]
    if args.against:
        earlier_line = line[targets[2].name]
        report["against_rate_ratio"] = ratio(line[ours.name]["per_second"],
                                             earlier_line["per_second"])
        report["against_cpu_ratio"] = ratio(line[ours.name]["cpu_ms"], earlier_line["cpu_ms"])
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"client_credentials tokens; identityctl {report['identityctl']}, the peer one node "
          f"process; client {report['client']}; {args.rounds} rounds of {args.seconds:g} s "
          f"per server; {os.cpu_count()} CPUs, load average {report['load_average']:.2f}")
    width = max(len(name) for name in line)
    print(f"{'server':{width}} {'tokens/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'CPU ms':>7} "
          f"{'errors':>6}")
    for name, row in line.items():
        print(f"{name:{width}} {row['per_second']:9.1f} {row['p50_ms']:7.1f} {row['p99_ms']:7.1f} "
              f"{row['cpu_ms'] or 0:7.2f} {row['errors']:6}")
    by_round = "/".join(f"{r:.2f}" for r in report["peer_rate_ratio_by_round"] if r)
    print(f"oidc-provider / identityctl: {report['peer_rate_ratio']}x the tokens/s "
          f"(by round {by_round}), {report['peer_cpu_ratio']}x the CPU per token")
    if args.against:
        print(f"identityctl / {targets[2].name}: {report['against_rate_ratio']}x the "
              f"tokens/s, {report['against_cpu_ratio']}x the CPU per token")


if __name__ == "__main__":
    main()
