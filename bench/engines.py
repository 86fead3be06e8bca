"""client_credentials tokens from the same app under waitress and under granian, in one run.

Runs `identityctl init` in a temporary folder and serves that one deployment twice:

- waitress, as `identityctl serve --workers 1 --threads T` (T = `--server-threads`, 4);
- granian, `granian --interface wsgi --workers 1 --blocking-threads T` on
  `bench.engine_app:app`: `identityctl.server.runtime.served_app`, the app waitress serves,
  built for the deployment $IDENTITYCTL_CONFIG names.

Then both are asked for tokens in turns, `--rounds` times (which goes first alternates), with
the same multi-process client as bench/hotpaths.py (HTTP Basic, every thread a keep-alive
session; one M2M client, one database, so both write to the same audit table). Per round and
server: tokens/s and server CPU ms per token (utime+stime in /proc of the server and its
children: granian's supervisor and worker); then per server over all rounds tokens/s, p50,
p99, CPU ms per token, errors, and granian's rate and CPU as multiples of waitress's.

`--slow-clients N` adds N clients to every phase that each send a token request's headers at
once and then its body a byte at a time over the whole phase: a server that hands a request
to a thread before its body has arrived loses that thread for the phase (waitress reads the
whole request first). Each slow client's answer (or its failure) is printed after the phase.

    .venv/bin/pip install granian    # not a dependency of the project
    .venv/bin/python bench/engines.py --seconds 5 --rounds 3
    .venv/bin/python bench/engines.py --seconds 10 --rounds 2 --slow-clients 8

Without granian it says so and exits 0 (the bench is run by hand).
"""

# ruff: noqa: E402  (sys.path is fixed before the imports below)
from __future__ import annotations

import os
import sys

_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH]
sys.path.insert(0, os.path.dirname(_BENCH))

import argparse
import base64
import contextlib
import dataclasses
import importlib.util
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from bench.hotpaths import (
    ClientCredentials,
    Phase,
    Target,
    combined,
    free_port,
    load_options,
    measure,
    rate,
    started,
)
from bench.peers import ratio
from bench.scaling import start_server
from identityctl.config import CONFIG_ENV

TOKEN_BODY = b"grant_type=client_credentials"


def granian_command(config_path: Path, port: int, threads: int) -> list[str]:
    """granian serving bench/engine_app.py for ``config_path`` with one worker."""
    return ["env", f"{CONFIG_ENV}={config_path}", sys.executable, "-m", "granian",
            "--interface", "wsgi", "--host", "127.0.0.1", "--port", str(port),
            "--workers", "1", "--blocking-threads", str(threads),
            "--working-dir", os.path.dirname(_BENCH), "bench.engine_app:app"]


def slow_request(target: Target, seconds: float, answers: list[str]) -> None:
    """One token request whose body trickles in a byte at a time over ``seconds``; what the
    server answered goes to ``answers``."""
    address = urlsplit(target.url)
    basic = base64.b64encode(":".join(target.m2m).encode()).decode()
    head = (f"POST /oauth2/token HTTP/1.1\r\nHost: {address.netloc}\r\n"
            f"Authorization: Basic {basic}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(TOKEN_BODY)}\r\nConnection: close\r\n\r\n").encode()
    began = time.perf_counter()
    try:
        with socket.create_connection((address.hostname, address.port), timeout=60) as conn:
            conn.sendall(head)
            for byte in TOKEN_BODY:
                time.sleep(seconds / len(TOKEN_BODY))
                conn.sendall(bytes([byte]))
            status = conn.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
        answers.append(f"{status or 'closed'} after {time.perf_counter() - began:.1f} s")
    except OSError as exc:
        answers.append(f"{type(exc).__name__} after {time.perf_counter() - began:.1f} s")


@contextlib.contextmanager
def slow_clients(target: Target, count: int, seconds: float) -> Iterator[list[str]]:
    """``count`` slow requests to ``target`` running in the background while in the block."""
    answers: list[str] = []
    threads = [threading.Thread(target=slow_request, args=(target, seconds, answers))
               for _ in range(count)]
    for thread in threads:
        thread.start()
    try:
        yield answers
    finally:
        for thread in threads:
            thread.join()


def cpu_ms(phase: Phase) -> float:
    return phase.cpu_seconds * 1000 / max(1, len(phase.results.latencies))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    load_options(parser, seconds=5.0, server_threads="Threads of the one server process "
                 "(waitress's threads, granian's blocking threads).")
    parser.add_argument("--slow-clients", type=int, default=0,
                        help="Requests whose body trickles in over each phase.")
    args = parser.parse_args()
    if importlib.util.find_spec("granian") is None:
        print("bench/engines.py skipped: granian is not installed "
              "(.venv/bin/pip install granian)")
        return
    path = ClientCredentials()
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="engines-")))
        waitress = start_server(stack, folder, "waitress",
                                ["--workers", "1", "--threads", str(args.server_threads)])
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        process = stack.enter_context(started(
            granian_command(folder / "waitress" / "config.toml", port, args.server_threads),
            url, folder / "granian.log"))
        granian = dataclasses.replace(waitress, name="granian", url=url, pid=process.pid)
        phases: dict[str, list[Phase]] = {waitress.name: [], granian.name: []}
        print(f"client_credentials tokens; one process, {args.server_threads} threads; client "
              f"{args.processes} processes x {args.threads} threads; {args.rounds} rounds of "
              f"{args.seconds:g} s per server; {args.slow_clients} slow clients; "
              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
        for round_number in range(args.rounds):
            # Alternate which server goes first, so drift in the machine's speed weighs on
            # both alike.
            order = (waitress, granian) if round_number % 2 == 0 else (granian, waitress)
            for target in order:
                with slow_clients(target, args.slow_clients, args.seconds) as answers:
                    phase = measure(path, target, processes=args.processes,
                                    threads=args.threads, seconds=args.seconds, client_cpus="")
                phases[target.name].append(phase)
                failures = sum(phase.results.failures.values())
                print(f"round {round_number + 1} {target.name:9} {rate(phase):7.1f}/s  "
                      f"{cpu_ms(phase):.2f} ms CPU per token  errors {failures}"
                      + (f"  slow clients: {sorted(answers)}" if answers else ""), flush=True)
            ours, theirs = phases[waitress.name][-1], phases[granian.name][-1]
            print(f"round {round_number + 1} granian/waitress "
                  f"{ratio(rate(theirs), rate(ours))}x the tokens/s, "
                  f"{ratio(cpu_ms(theirs), cpu_ms(ours))}x the CPU per token", flush=True)
    line = {name: combined(runs, path.unit) for name, runs in phases.items()}
    print(f"{'server':10} {'tokens/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'CPU ms':>7} "
          f"{'errors':>6}   load average {os.getloadavg()[0]:.2f}")
    for name, row in line.items():
        print(f"{name:10} {row['per_second']:9.1f} {row['p50_ms']:7.1f} {row['p99_ms']:7.1f} "
              f"{row['cpu_ms'] or 0:7.2f} {row['errors']:6}"
              + (f"  {row['failures']}" if row["failures"] else ""))
    print(f"granian / waitress: "
          f"{ratio(line['granian']['per_second'], line['waitress']['per_second'])}x the "
          f"tokens/s, {ratio(line['granian']['cpu_ms'], line['waitress']['cpu_ms'])}x the CPU "
          "per token")


if __name__ == "__main__":
    main()
