"""Cold start of `identityctl serve`: from the command to the first `/health` 200, and idle RSS.

Runs `identityctl init` in a temporary folder, then `--runs` times starts `python -m
identityctl serve` on that deployment (`--workers 1` by default), polls `/health` every few
milliseconds (a bare connect + GET, so the poller costs next to nothing), notes the time of
the first 200 and the CPU time the server's processes had used by then (less sensitive than
the time to other work on the machine), and, a second later, their RSS, and stops it. One
untimed start comes first (bytecode written, files in the page cache), and every start may
write bytecode even where PYTHONDONTWRITEBYTECODE is set: an installed package has its
bytecode (pip compiles at install, a PEX writes it on its first start, the image ships it),
so a start that compiles the package's 200-odd modules again is not the start being timed.
Prints each run and the medians.

    .venv/bin/python bench/startup.py
    .venv/bin/python bench/startup.py --runs 9 --workers 2
    .venv/bin/python bench/startup.py --imports 15      # the slowest packages to import
    # before/after in one run, the trees taking turns (each starts its own identityctl):
    .venv/bin/python bench/startup.py --tree . --tree /tmp/before
    # the single file people run (./build_pex.sh), beside this tree:
    .venv/bin/python bench/startup.py --tree . --pex dist/identityctl.pex

`--imports N` adds one start of each tree (not of a PEX, whose Python runs with `-I`) with
`PYTHONPROFILEIMPORTTIME=1` and prints the N top-level packages that took the most time to
import (their own time, summed over their modules): where to look when the start grows.
"""

# ruff: noqa: E402  (sys.path is fixed before the imports below)
from __future__ import annotations

import os
import sys

_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH]
sys.path.insert(0, os.path.dirname(_BENCH))

import argparse
import http.client
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from bench.hotpaths import cpu_seconds, free_port, process_tree
from bench.soak import rss_mib
from tests.support.processes import stop

POLL_SECONDS = 0.005
IDLE_SECONDS = 1.0
DEADLINE_SECONDS = 60.0


def health_status(port: int) -> int | None:
    """The status of one GET /health, None while nothing listens."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/health")
        return connection.getresponse().status
    except OSError:
        return None
    finally:
        connection.close()


@dataclass(frozen=True)
class Starter:
    """How one identityctl under test is started: a source tree's package (`python -m
    identityctl` in the tree) or a built PEX (with its own PEX_ROOT, unpacked by the warm-up
    start)."""

    label: str
    command: tuple[str, ...]
    cwd: Path
    env: dict[str, str]

    @classmethod
    def tree(cls, tree: Path) -> Starter:
        return cls(str(tree), (sys.executable, "-m", "identityctl"), tree, _bytecode_written())

    @classmethod
    def pex(cls, pex: Path, scratch: Path) -> Starter:
        return cls(f"{pex} (PEX)", (str(pex),), scratch,
                   {**_bytecode_written(), "PEX_ROOT": str(scratch / "pex-root")})


def _bytecode_written() -> dict[str, str]:
    """This environment, letting Python write bytecode (see the module's docstring)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def deployment(starter: Starter, folder: Path) -> Path:
    """A fresh `identityctl init` deployment made by ``starter``'s identityctl: its config."""
    subprocess.run([*starter.command, "init", "--dir", str(folder), "--json"],
                   cwd=starter.cwd, env=starter.env, check=True, capture_output=True)
    return folder / "config.toml"


def cold_start(starter: Starter, config: Path, *, workers: int, log: Path,
               importtime: bool = False) -> tuple[float, float, float | None]:
    """One start of ``starter``'s `serve`: seconds to the first /health 200, CPU seconds
    used by then, idle RSS in MiB."""
    port = free_port()
    env = {**starter.env, "PYTHONPROFILEIMPORTTIME": "1"} if importtime else starter.env
    command = [*starter.command, "--config", str(config),
               "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    with log.open("wb") as out:
        began = time.perf_counter()
        process = subprocess.Popen(command, cwd=starter.cwd, env=env, stdout=out, stderr=out)
    try:
        while (status := health_status(port)) != 200:
            if process.poll() is not None or time.perf_counter() - began > DEADLINE_SECONDS:
                sys.exit(f"serve of {starter.label} did not answer 200 (last: {status}):\n"
                         f"{log.read_text()}")
            time.sleep(POLL_SECONDS)
        elapsed = time.perf_counter() - began
        cpu = cpu_seconds(process_tree(process.pid))
        time.sleep(IDLE_SECONDS)
        return elapsed, cpu, rss_mib(process_tree(process.pid))
    finally:
        stop(process)


def slowest_imports(log: Path, count: int) -> list[tuple[str, float]]:
    """From a `-X importtime` log: the ``count`` top-level packages with the most import
    time of their own (ms, summed over their modules)."""
    own: dict[str, float] = defaultdict(float)
    for line in log.read_text().splitlines():
        if line.startswith("import time:") and "|" in line:
            self_us, _, name = line.removeprefix("import time:").split("|")
            if self_us.strip().isdigit():
                own[name.strip().split(".")[0]] += int(self_us) / 1000
    return sorted(own.items(), key=lambda item: -item[1])[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="Timed starts per tree.")
    parser.add_argument("--workers", type=int, default=1, help="serve --workers.")
    parser.add_argument("--tree", action="append", type=Path, default=[],
                        help="A source tree whose identityctl is started (repeat to compare; "
                             "default: this repository, unless --pex is given).")
    parser.add_argument("--pex", action="append", type=Path, default=[],
                        help="A built PEX (./build_pex.sh) to start as well (repeatable).")
    parser.add_argument("--imports", type=int, default=0, metavar="N",
                        help="Also print the N slowest packages to import at start.")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree]
    if not trees and not args.pex:
        trees = [Path(_BENCH).parent]
    with tempfile.TemporaryDirectory(prefix="startup-") as scratch:
        folder = Path(scratch)
        starters = [Starter.tree(tree) for tree in trees] + [
            Starter.pex(pex.resolve(), folder) for pex in args.pex]
        configs = [deployment(starter, folder / f"deployment-{n}")
                   for n, starter in enumerate(starters)]
        for starter, config in zip(starters, configs, strict=True):
            cold_start(starter, config, workers=args.workers, log=folder / "warm-up.log")
        seconds: dict[str, list[float]] = defaultdict(list)
        cpu: dict[str, list[float]] = defaultdict(list)
        rss: dict[str, list[float]] = defaultdict(list)
        for run in range(args.runs):
            # They take turns, so drift in the machine's speed weighs on each alike.
            for starter, config in zip(starters, configs, strict=True):
                elapsed, used, idle = cold_start(starter, config, workers=args.workers,
                                                 log=folder / f"run-{run}.log")
                seconds[starter.label].append(elapsed)
                cpu[starter.label].append(used)
                if idle is not None:
                    rss[starter.label].append(idle)
        load = os.getloadavg()
        print(f"serve --workers {args.workers}: seconds to the first /health 200, {args.runs} "
              f"runs; {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f}")
        for starter in starters:
            label = starter.label
            runs = " ".join(f"{s:.2f}" for s in seconds[label])
            idle_rss = f"{statistics.median(rss[label]):.0f} MiB" if rss[label] else "unknown"
            print(f"{label:30} median {statistics.median(seconds[label]):.2f} s  "
                  f"(runs {runs})  CPU {statistics.median(cpu[label]):.2f} s  "
                  f"idle RSS {idle_rss}")
        if args.imports:
            # A PEX's Python runs with -I, which ignores PYTHONPROFILEIMPORTTIME.
            for starter, config in zip(starters[:len(trees)], configs, strict=False):
                log = folder / "importtime.log"
                cold_start(starter, config, workers=args.workers, log=log,
                           importtime=True)
                print(f"slowest imports at start of {starter.label} (own time, ms):")
                for package, ms in slowest_imports(log, args.imports):
                    print(f"  {package:30} {ms:7.1f}")


if __name__ == "__main__":
    main()
