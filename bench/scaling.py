"""The default `serve` (one worker per core) against one process: client_credentials tokens.

Runs `identityctl init` twice in a temporary folder (one deployment per server, so neither
writes to the other's database) and starts `identityctl serve` on one (`server.workers`
"auto": one worker per core, each kept to its core) and `identityctl serve --workers 1` on
the other (free to use every core, or kept to one with `--pin-one-process`), both with their
default threads. Then, `--rounds` times, the two take turns (which goes first
alternates) under each load:

- "16 keep-alive": one client's 16 keep-alive connections (2 wrk threads or Python client
  processes, 8 connections each);
- "4 at once": 4 connections opened at once and kept, as a reverse proxy holds them
  (2 x 2).

The client is wrk (bench/wrk.py: all connections opened at its start and kept, for a few
percent of a core) where it is installed, else (or with `--client python`) hotpaths.py's
Python client, where each thread is one keep-alive `requests.Session`; either asks for
client_credentials tokens for `--seconds` after a warm-up. The Python client needs about one
of 2 cores for itself: with it, two workers share the other core and the ratio says little.

Per load and round it prints both rates and their ratio (the goal: at least 1.6x in every
round on 2 cores), the server CPU per token and p99, and for every process of the default
`serve` (the supervisor first, then each worker) its CPU seconds in the phase (warm-up
included: how evenly the workers shared the load) and its RSS after it (the goal: at most
120 MiB per worker).

    .venv/bin/python bench/scaling.py --seconds 5 --rounds 3
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
import subprocess
import tempfile
import uuid
from pathlib import Path

from bench import wrk
from bench.hotpaths import (
    ClientCredentials,
    Target,
    allow_one_address_everything,
    cpu_seconds,
    free_port,
    measure,
    process_tree,
    started,
)
from bench.oauth_token import create_clients
from bench.passkey import open_deployment
from bench.soak import rss_mib

#: load name -> (client processes or wrk threads, connections each): one keep-alive
#: connection per Python client thread
LOADS = {"16 keep-alive": (2, 8), "4 at once": (2, 2)}
IDENTITYCTL = [sys.executable, "-m", "identityctl"]


def start_server(stack: contextlib.ExitStack, folder: Path, name: str,
                 workers: list[str]) -> Target:
    """`identityctl serve` (with ``workers``' options) on a fresh deployment in
    ``folder/name``, and an M2M client of its own."""
    subprocess.run([*IDENTITYCTL, "init", "--dir", str(folder / name), "--json"], check=True,
                   capture_output=True)
    config_path, port = folder / name / "config.toml", free_port()
    allow_one_address_everything(config_path)
    url = f"http://127.0.0.1:{port}"
    server = stack.enter_context(started(
        [*IDENTITYCTL, "--config", str(config_path), "serve", "--host", "127.0.0.1",
         "--port", str(port), *workers], url, folder / f"{name}.log"))
    config, _ = open_deployment(config_path)
    m2m, spa_id = create_clients(uuid.uuid4().hex[:8])
    return Target(name=name, url=url, pid=server.pid, origin=config.passkey.allowed_origins[0],
                  rp_id=config.passkey.rp_id, m2m=m2m, spa_id=spa_id, password_app="",
                  mcp_token="")


def rss_by_process(pid: int) -> list[float | None]:
    """VmRSS in MiB of ``pid`` and then of each of its descendants."""
    return [rss_mib([each]) for each in process_tree(pid)]


def cpu_by_process(pid: int) -> list[float]:
    """utime + stime in seconds of ``pid`` and then of each of its descendants."""
    return [cpu_seconds([each]) for each in process_tree(pid)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="Duration of each phase.")
    parser.add_argument("--rounds", type=int, default=3,
                        help="Phases per load and server, the servers taking turns.")
    parser.add_argument("--client-cpus", default="",
                        help="Pin the Python client, e.g. '1'.")

    parser.add_argument("--pin-one-process", action="store_true",
                        help="Keep the one process to one core (serve --pin-cores): the most "
                        "one process serves here, with its event loop and SQLite's C code on "
                        "its own core.")
    parser.add_argument("--client", choices=["wrk", "python"],
                        default="wrk" if wrk.available() else "python",
                        help="The load's client (default: wrk where it is installed).")
    args = parser.parse_args()

    def phase(target: Target, processes: int, threads: int) -> wrk.Measured:
        """One load on ``target``, as the chosen client measures it."""
        if args.client == "wrk":
            return wrk.token_phase(target, connections=processes * threads,
                                   threads=processes, seconds=args.seconds)
        return wrk.from_python(measure(ClientCredentials(), target, processes=processes,
                                       threads=threads, seconds=args.seconds,
                                       client_cpus=args.client_cpus))

    worst: dict[str, float] = {}
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="scaling-")))
        single = start_server(stack, folder, "one process", [
            "--workers", "1", *(["--pin-cores"] if args.pin_one_process else [])])
        default = start_server(stack, folder, "default serve", [])
        print(f"client: {args.client}; default serve: {len(process_tree(default.pid)) - 1} "
              f"workers; idle RSS (supervisor, workers) {rss_by_process(default.pid)} MiB, "
              f"one process {rss_mib([single.pid])} MiB", flush=True)
        for round_number in range(args.rounds):
            order = (default, single) if round_number % 2 == 0 else (single, default)
            for load, (processes, threads) in LOADS.items():
                phases: dict[str, wrk.Measured] = {}
                for target in order:
                    before = cpu_by_process(default.pid)
                    phases[target.name] = phase(target, processes, threads)
                    if target is default:
                        spread = [round(after - then, 1) for then, after
                                  in zip(before, cpu_by_process(default.pid), strict=False)]
                ours, theirs = phases[default.name], phases[single.name]
                ratio = ours.rate / theirs.rate if theirs.rate else 0.0
                worst[load] = min(worst.get(load, ratio), ratio)
                print(f"round {round_number + 1} {load:14} default {ours.rate:7.1f}/s "
                      f"({ours.cpu_ms_per_request:.2f} ms CPU, p99 {ours.p99_ms:.1f} ms)  one "
                      f"process {theirs.rate:7.1f}/s ({theirs.cpu_ms_per_request:.2f} ms CPU, "
                      f"p99 {theirs.p99_ms:.1f} ms)  ratio {ratio:.2f}x  errors "
                      f"{ours.failures + theirs.failures}  CPU s (supervisor, workers) "
                      f"{spread}  RSS {rss_by_process(default.pid)} MiB, one process "
                      f"{rss_mib([single.pid])} MiB", flush=True)
    print("lowest ratio per load: " + ", ".join(f"{load} {ratio:.2f}x"
                                                  for load, ratio in worst.items()))


if __name__ == "__main__":
    main()
