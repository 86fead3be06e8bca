"""Cold start of `identityctl serve`: from the command to the first `/health` 200, and idle RSS.

Runs `identityctl init` in a temporary folder, then `--runs` times starts `python -m
identityctl serve` on that deployment (`--workers 1` by default), polls `/health` every few
milliseconds (a bare connect + GET, so the poller costs next to nothing), notes the time of
the first 200 and the CPU time the server's processes had used by then (less sensitive than
the time to other work on the machine), and, a second later, their RSS, and stops it. One
untimed start comes first (bytecode written, files in the page cache). Prints each run and
the medians.

    .venv/bin/python bench/startup.py
    .venv/bin/python bench/startup.py --runs 9 --workers 2
    .venv/bin/python bench/startup.py --imports 15      # the slowest packages to import
    # before/after in one run, the trees taking turns (each starts its own identityctl):
    .venv/bin/python bench/startup.py --tree . --tree /tmp/before

`--imports N` adds one start under `python -X importtime` and prints the N top-level
packages that took the most time to import (their own time, summed over their modules):
where to look when the start grows.
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


def deployment(tree: Path, folder: Path) -> Path:
    """A fresh `identityctl init` deployment made by ``tree``'s identityctl: its config."""
    subprocess.run([sys.executable, "-m", "identityctl", "init", "--dir", str(folder), "--json"],
                   cwd=tree, check=True, capture_output=True)
    return folder / "config.toml"


def cold_start(tree: Path, config: Path, *, workers: int, log: Path,
               python_options: tuple[str, ...] = ()) -> tuple[float, float, float | None]:
    """One start of ``tree``'s `serve`: seconds to the first /health 200, CPU seconds used
    by then, idle RSS in MiB."""
    port = free_port()
    command = [sys.executable, *python_options, "-m", "identityctl", "--config", str(config),
               "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
    with log.open("wb") as out:
        began = time.perf_counter()
        process = subprocess.Popen(command, cwd=tree, stdout=out, stderr=out)
    try:
        while (status := health_status(port)) != 200:
            if process.poll() is not None or time.perf_counter() - began > DEADLINE_SECONDS:
                sys.exit(f"serve in {tree} did not answer 200 (last: {status}):\n"
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
                             "default: this repository).")
    parser.add_argument("--imports", type=int, default=0, metavar="N",
                        help="Also print the N slowest packages to import at start.")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree] or [Path(_BENCH).parent]
    with tempfile.TemporaryDirectory(prefix="startup-") as scratch:
        folder = Path(scratch)
        configs = [deployment(tree, folder / f"deployment-{n}") for n, tree in enumerate(trees)]
        for tree, config in zip(trees, configs, strict=True):
            cold_start(tree, config, workers=args.workers, log=folder / "warm-up.log")
        seconds: dict[Path, list[float]] = defaultdict(list)
        cpu: dict[Path, list[float]] = defaultdict(list)
        rss: dict[Path, list[float]] = defaultdict(list)
        for run in range(args.runs):
            # The trees take turns, so drift in the machine's speed weighs on each alike.
            for tree, config in zip(trees, configs, strict=True):
                elapsed, used, idle = cold_start(tree, config, workers=args.workers,
                                                 log=folder / f"run-{run}.log")
                seconds[tree].append(elapsed)
                cpu[tree].append(used)
                if idle is not None:
                    rss[tree].append(idle)
        load = os.getloadavg()
        print(f"serve --workers {args.workers}: seconds to the first /health 200, {args.runs} "
              f"runs; {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f}")
        for tree in trees:
            runs = " ".join(f"{s:.2f}" for s in seconds[tree])
            idle_rss = f"{statistics.median(rss[tree]):.0f} MiB" if rss[tree] else "unknown"
            print(f"{tree!s:30} median {statistics.median(seconds[tree]):.2f} s  "
                  f"(runs {runs})  CPU {statistics.median(cpu[tree]):.2f} s  "
                  f"idle RSS {idle_rss}")
        if args.imports:
            for tree, config in zip(trees, configs, strict=True):
                log = folder / "importtime.log"
                cold_start(tree, config, workers=args.workers, log=log,
                           python_options=("-X", "importtime"))
                print(f"slowest imports at start of {tree} (own time, ms):")
                for package, ms in slowest_imports(log, args.imports):
                    print(f"  {package:30} {ms:7.1f}")


if __name__ == "__main__":
    main()
