"""Passkey ceremonies of this tree against an earlier release, in one run, taking turns.

For each tree (this one and `--against`, a commit checked out into a temporary git worktree)
it runs `identityctl init` and `identityctl serve --workers 1 --threads 4` from that tree, then
that tree's own bench/passkey.py against it (`--threads` client threads: registrations for
`--seconds`, then sign-ins for `--seconds`), `--rounds` times, which tree goes first
alternating. Each tree's bench sets up its users with its own code, so the store's schema of
either release is never touched by the other. Per tree: ceremonies/s of both phases (start +
finish over HTTP, the software authenticator's signature included) and the server's CPU ms
per ceremony (utime+stime in /proc over both phases); then this tree's rates as a share of the
release's, overall and per round. Starts stay counted per address (only the limit is raised).

    .venv/bin/python bench/releases.py --seconds 5 --rounds 3
    .venv/bin/python bench/releases.py --against 8bc71ad --seconds 10 --rounds 5 --json

The default release is the commit before the account lifecycle (recovery, federation,
webhooks) landed, the baseline of the ceremony figures in docs/performance.md.
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
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.hotpaths import (
    allow_one_address_everything,
    cpu_seconds,
    free_port,
    process_tree,
    started,
    tree_environment,
)

HERE = Path(_BENCH).parent
#: The last commit before the account lifecycle landed.
PREVIOUS_RELEASE = "8bc71ad"
PHASES = ("registration", "authentication")


@contextlib.contextmanager
def release_tree(commit: str) -> Iterator[Path]:
    """``commit`` checked out (detached) in a temporary worktree, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="identityctl-release-") as folder:
        tree = Path(folder) / "tree"
        subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", "--quiet",
                        str(tree), commit], check=True)
        try:
            yield tree
        finally:
            subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force",
                            str(tree)], check=False)


def run_tree(tree: Path, *, threads: int, seconds: float) -> dict[str, Any]:
    """One round on ``tree``: a fresh deployment, its server, its own ceremony bench."""
    env = tree_environment(tree)
    with tempfile.TemporaryDirectory(prefix="identityctl-bench-") as folder:
        work = Path(folder)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        subprocess.run([sys.executable, "-m", "identityctl", "init", "--dir",
                        str(work / "deployment")], cwd=tree, env=env, check=True,
                       capture_output=True)
        config_path = work / "deployment" / "config.toml"
        allow_one_address_everything(config_path)
        command = [sys.executable, "-m", "identityctl", "--config", str(config_path), "serve",
                   "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                   "--threads", "4"]
        with started(command, url, work / "server.log", tree=tree) as server:
            pids = process_tree(server.pid)
            before = cpu_seconds(pids)
            bench = subprocess.run(
                [sys.executable, str(tree / "bench" / "passkey.py"), "--url", url,
                 "--config", str(config_path), "--threads", str(threads),
                 "--seconds", str(seconds), "--json"],
                cwd=tree, env=env, capture_output=True, text=True)
            cpu = cpu_seconds(pids) - before
        if bench.returncode:
            sys.exit(f"bench/passkey.py of {tree} failed:\n{bench.stderr[-3000:]}")
    report = json.loads(bench.stdout)
    ceremonies = sum(report[phase]["ceremonies"] for phase in PHASES)
    return {**{phase: report[phase]["per_second"] for phase in PHASES},
            "cpu_ms_per_ceremony": round(cpu * 1000 / ceremonies, 2) if ceremonies else None,
            "failures": sum(sum(report[phase]["failures"].values()) for phase in PHASES)}


def share(ours: float, theirs: float) -> float | None:
    return round(ours / theirs, 2) if theirs else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default=PREVIOUS_RELEASE,
                        help="The earlier release's commit (default: %(default)s).")
    parser.add_argument("--threads", type=int, default=8, help="Client threads.")
    parser.add_argument("--seconds", type=float, default=5.0, help="Duration of each phase.")
    parser.add_argument("--rounds", type=int, default=3,
                        help="Rounds; which tree goes first alternates.")
    parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
    args = parser.parse_args()

    runs: dict[str, list[dict[str, Any]]] = {"this tree": [], args.against: []}
    with release_tree(args.against) as release:
        trees = {"this tree": HERE, args.against: release}
        for number in range(args.rounds):
            order = list(trees) if number % 2 == 0 else list(reversed(trees))
            for name in order:
                runs[name].append(run_tree(trees[name], threads=args.threads,
                                           seconds=args.seconds))
    report: dict[str, Any] = {"load_average": os.getloadavg(), "cpus": os.cpu_count(),
                              "threads": args.threads, "seconds": args.seconds, "trees": {}}
    for name, rounds in runs.items():
        report["trees"][name] = {
            **{phase: round(statistics.median(r[phase] for r in rounds), 1) for phase in PHASES},
            "cpu_ms_per_ceremony": statistics.median(r["cpu_ms_per_ceremony"] or 0
                                                     for r in rounds),
            "failures": sum(r["failures"] for r in rounds), "rounds": rounds}
    ours, theirs = report["trees"]["this tree"], report["trees"][args.against]
    report["share"] = {phase: {"median": share(ours[phase], theirs[phase]),
                               "by_round": [share(a[phase], b[phase]) for a, b in
                                            zip(ours["rounds"], theirs["rounds"], strict=True)]}
                       for phase in PHASES}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"passkey ceremonies, {args.rounds} rounds, {args.threads} client threads, "
          f"{args.seconds:g} s per phase; {report['cpus']} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in report['load_average'])}")
    for name, line in report["trees"].items():
        print(f"{name:12} registration {line['registration']:7.1f}/s  sign-in "
              f"{line['authentication']:7.1f}/s  CPU {line['cpu_ms_per_ceremony']:.2f} ms/ceremony"
              f"  failures {line['failures']}")
    for phase in PHASES:
        print(f"this tree / {args.against}, {phase}: {report['share'][phase]['median']} "
              f"(by round {report['share'][phase]['by_round']})")


if __name__ == "__main__":
    main()
