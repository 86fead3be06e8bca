"""Passkey ceremonies of this tree against an earlier release, in one run, taking turns.

For each tree (this one and `--against`, a commit checked out into a temporary git worktree)
it runs `identityctl init` and `identityctl serve --workers 1 --threads 4` from that tree,
has that tree's own bench/passkey.py make the bench users and an admin token in its store
(so the store's schema of either release is never touched by the other's code), then drives
it with this tree's client (bench/passkey.py's `run_plan`: `--processes` processes of
`--threads` threads, registrations for `--seconds`, then sign-ins for `--seconds`), the same
client for both, `--rounds` times, which tree goes first alternating. Per tree: ceremonies/s
of both phases (start + finish over HTTP, the software authenticator's signature included)
and the server's CPU ms per ceremony (utime+stime in /proc over both phases); then this
tree's rates as a share of the release's, overall and per round. Starts stay counted per
address (only the limit is raised).

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

from bench import passkey
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
PHASES = passkey.PHASES
#: Run with a tree's own code: its bench/passkey.py makes the users and the admin token in
#: its store and prints them as the plan `passkey.run_plan` takes. Trees from before
#: `prepare` existed make them as their `main()` did.
PLAN_SCRIPT = """
import inspect, json, sys, uuid
from bench import passkey as harness
config_path, processes, threads, ttl = sys.argv[1], *map(int, sys.argv[2:])
if hasattr(harness, "prepare"):
    plan = harness.prepare(config_path, processes=processes, threads=threads, token_ttl=ttl)
else:
    config, admin_token = harness.open_deployment(config_path, token_ttl=ttl)
    create, run = harness.directory.create_user, uuid.uuid4().hex[:8]
    if "origin" in inspect.signature(create).parameters:
        from identityctl.services.origin import RequestOrigin
        by = {"origin": RequestOrigin(actor="bench")}
    else:
        by = {"actor": "bench"}
    plan = {"origin": config.passkey.allowed_origins[0], "rp_id": config.passkey.rp_id,
            "admin_token": admin_token,
            "users": [[[create(username=f"bench-{run}-{p}-{t}-{i}", **by).id
                        for i in range(harness.USERS_PER_THREAD)] for t in range(threads)]
                      for p in range(processes)]}
print(json.dumps(plan))
"""


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


def run_tree(tree: Path, *, processes: int, threads: int, seconds: float,
             serve_options: tuple[str, ...] = ()) -> dict[str, Any]:
    """One round on ``tree``: a fresh deployment, its server, its own bench users, this
    tree's client."""
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
            made = subprocess.run(
                [sys.executable, "-c", PLAN_SCRIPT, str(config_path), str(processes),
                 str(threads), str(int(seconds) * 4 + 600)],
                cwd=tree, env=env, capture_output=True, text=True)
            if made.returncode:
                sys.exit(f"the bench users of {tree} could not be made:\n{made.stderr[-3000:]}")
            pids = process_tree(server.pid)
            before = cpu_seconds(pids)
            report = passkey.run_plan(json.loads(made.stdout), url=url, seconds=seconds)
            cpu = cpu_seconds(pids) - before
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
    parser.add_argument("--pin-cores", action="store_true",
                        help="Keep this tree's process to one core (serve --pin-cores).")
    parser.add_argument("--processes", type=int, default=2, help="Client processes.")
    parser.add_argument("--threads", type=int, default=4, help="Threads per client process.")
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
                runs[name].append(run_tree(
                    trees[name], processes=args.processes, threads=args.threads,
                    seconds=args.seconds,
                    serve_options=("--pin-cores",) if args.pin_cores and name == "this tree"
                    else ()))
    report: dict[str, Any] = {"load_average": os.getloadavg(), "cpus": os.cpu_count(),
                              "processes": args.processes, "threads": args.threads,
                              "seconds": args.seconds, "trees": {}}
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
    print(f"passkey ceremonies, {args.rounds} rounds, {args.processes} client processes x "
          f"{args.threads} threads, "
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
