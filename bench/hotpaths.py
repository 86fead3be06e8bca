"""The hot paths of identityctl against the floor (bench/floor.py), under the same load, in one run.

Starts (or uses, with --url/--config) `identityctl serve --workers N` on a fresh `identityctl
init` deployment, and bench/floor.py with the same number of processes and threads, then drives
each hot path on both, taking turns `--rounds` times, with the same multi-process client:
`--processes` client processes (forked; pinned with taskset when --client-cpus is given) of
`--threads` threads each, every thread with its own keep-alive requests.Session. Per hot path
and server it prints requests/s, p50, p99, server CPU ms per request (utime+stime deltas in
/proc of the server process and its children), errors, the product's rate as a share of the
floor's, and that share per round.

Hot paths: passkey auth start (with a userId), passkey auth finish (usernameless sessions
started and answered before the clock starts), a full passkey ceremony (start + finish, the
authenticator's signature included), password sign-in through POST /flow/execute
(default-basic-flow: start + `password` action), token by client_credentials, code exchange
(codes prepared before the clock starts) and /mcp tools/list.

    .venv/bin/python bench/hotpaths.py --workers 1 --seconds 5 --rounds 3
    .venv/bin/python bench/hotpaths.py --workers 2 --seconds 5 --rounds 3 --json > results.json

The set-up (users, passkeys, passwords, applications, codes) is untimed. The client runs on the
same machine: on a small one it takes CPU from the servers, and more from the faster one, so
the share of the floor reads high rather than low there.
"""

# ruff: noqa: E402  (sys.path is fixed before the imports below)
from __future__ import annotations

import os
import sys
from abc import ABC, abstractmethod

_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _BENCH]
sys.path.insert(0, os.path.dirname(_BENCH))

import argparse
import contextlib
import json
import math
import multiprocessing
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from bench.flow import PASSWORD, FlowClient, create_application
from bench.oauth_token import REDIRECT_URI, create_clients, prepare_codes
from bench.passkey import TRANSPORT_ERRORS, Client, Results, open_deployment
from bench.soak import rss_mib
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from tests.support.processes import stop

FLOOR_CLIENT_ID = "floor-m2m"  # bench/floor.py's client_credentials client
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
WARM_UP_SECONDS = 1.0
TICKS = os.sysconf("SC_CLK_TCK")


# --- the two servers ------------------------------------------------------------------------

def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def allow_one_address_everything(config_path: Path) -> None:
    """Every client of the bench is 127.0.0.1: starts are still counted per address (that
    cost is measured), but the limit is set out of reach."""
    text = config_path.read_text()
    config_path.write_text(text.replace("max_starts_per_address = 1000",
                                        "max_starts_per_address = 1000000000"))


def _pinned(command: list[str], cpus: str) -> list[str]:
    return ["taskset", "-c", cpus, *command] if cpus and shutil.which("taskset") else command


def _wait_up(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            requests.get(url + "/health", timeout=5)
            return
        except requests.ConnectionError:
            if process.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"{url} did not start:\n{log.read_text()}")
            time.sleep(0.1)


def tree_environment(tree: Path) -> dict[str, str]:
    """This process's environment with ``tree``'s package first on the import path."""
    return {**os.environ, "PYTHONPATH": str(tree)}


@contextlib.contextmanager
def started(command: list[str], url: str, log: Path, *, tree: Path | None = None
            ) -> Iterator[subprocess.Popen]:
    """``command`` running until the block ends, answering /health at ``url``; with
    ``tree``, ``python -m identityctl`` imports that checkout's package."""
    env = tree_environment(tree) if tree else None
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=out, env=env, cwd=tree)
    try:
        _wait_up(url, process, log)
        yield process
    finally:
        stop(process)


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux /proc)."""
    parents: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(stat.rsplit(")", 1)[1].split()[1])].append(int(entry.name))
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        pending.extend(parents.get(current, []))
    return tree


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of ``pids`` in seconds."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / TICKS


@dataclass
class Target:
    """One server under test and what its set-up made."""

    name: str
    url: str
    pid: int
    origin: str
    rp_id: str
    m2m: tuple[str, str]
    spa_id: str
    password_app: str
    mcp_token: str
    admin_token: str = ""
    new_user_ids: Callable[[int], list[str]] = field(default=lambda n: [])
    new_password_users: Callable[[int], list[str]] = field(default=lambda n: [])
    new_codes: Callable[[int], list[tuple[str, str]]] = field(default=lambda n: [])


def product_target(url: str, config_path: Path, pid: int) -> Target:
    config, admin_token = open_deployment(config_path, token_ttl=7200)
    run = uuid.uuid4().hex[:8]
    m2m, spa_id = create_clients(run)
    token = subprocess.run([sys.executable, "-m", "identityctl", "--config", str(config_path),
                            "token", "--scope", "system"], capture_output=True, text=True,
                           check=True).stdout.strip()
    counter = iter(range(10**9))

    def user_ids(count: int) -> list[str]:
        return [directory.create_user(username=f"hot-{run}-{next(counter)}",
                                      origin=RequestOrigin(actor="bench")).id
                for _ in range(count)]

    def password_users(count: int) -> list[str]:
        names = [f"hot-pw-{run}-{next(counter)}" for _ in range(count)]
        for name in names:
            directory.create_user(username=name, password=PASSWORD,
                                  origin=RequestOrigin(actor="bench"))
        return names

    def codes(count: int) -> list[tuple[str, str]]:
        return prepare_codes(config, url, spa_id, user_ids(1)[0], count)

    return Target(name="identityctl", url=url, pid=pid, origin=config.passkey.allowed_origins[0],
                  rp_id=config.passkey.rp_id, m2m=m2m, spa_id=spa_id,
                  password_app=create_application(run, "default-basic-flow"),
                  mcp_token=token, admin_token=admin_token, new_user_ids=user_ids,
                  new_password_users=password_users, new_codes=codes)


def floor_target(url: str, pid: int, *, origin: str, rp_id: str, secret: str) -> Target:
    http = requests.Session()
    token = http.post(url + "/oauth2/token", data={"grant_type": "client_credentials"},
                      auth=(FLOOR_CLIENT_ID, secret), timeout=30).json()["access_token"]

    def password_users(count: int) -> list[str]:
        names = [f"pw-{uuid.uuid4().hex}" for _ in range(count)]
        for name in names:
            http.post(url + "/bench/users", json={"username": name, "password": PASSWORD},
                      timeout=30).raise_for_status()
        return names

    def codes(count: int) -> list[tuple[str, str]]:
        made = http.post(url + "/bench/codes", timeout=60, json={
            "userId": uuid.uuid4().hex, "count": count, "clientId": "floor-spa",
            "redirectUri": REDIRECT_URI})
        return [tuple(pair) for pair in made.json()["codes"]]

    return Target(name="floor", url=url, pid=pid, origin=origin, rp_id=rp_id,
                  m2m=(FLOOR_CLIENT_ID, secret), spa_id="floor-spa", password_app="floor",
                  mcp_token=token,
                  new_user_ids=lambda count: [uuid.uuid4().hex for _ in range(count)],
                  new_password_users=password_users, new_codes=codes)


#: Finish sessions prepared per second of a phase and server process: more than
#: either server answers, so a phase ends at its deadline with every connection busy. (When
#: the work ran out first, phases lasted 1.5-2 s and their ragged end, with fewer and fewer
#: connections busy, made the per-round shares swing by 20 points.)
PREPARED_PER_SECOND = 1500
#: Codes prepared per second of a phase and server process: fewer than the sessions, as a
#: code lives 60 s and they are made at ~120/s, so 1,500 a second of a 5 s phase let the
#: first ones run out before they were used (400 invalid_grant); still more than either
#: server exchanges in a second.
CODES_PER_SECOND = 1100


# --- the hot paths --------------------------------------------------------------------------
# Each has set-up (parent: shared records; child: per-thread state, untimed) and a request
# that returns False when the thread's prepared work is used up.

def _checked(response: requests.Response, path: str, status: int = 200) -> dict[str, Any]:
    if response.status_code != status:
        raise RuntimeError(f"{path} {response.status_code}")
    return response.json()


def _passkey_client(target: Target, user_id: str) -> Client:
    client = Client(url=target.url, origin=target.origin, rp_id=target.rp_id,
                    admin_token=target.admin_token, user_ids=[user_id])
    client.register()
    return client


@dataclass
class Work:
    """Per-thread state of a hot path."""

    target: Target
    http: requests.Session = field(default_factory=requests.Session)
    passkeys: Client | None = None
    flow: FlowClient | None = None
    queue: deque = field(default_factory=deque)


class HotPath(ABC):
    """What a hot path needs: its records, its per-thread set-up and its request."""

    name = ""
    unit = "requests"
    warm_up = True

    def prepare(self, target: Target, count: int) -> list[Any]:
        """Parent side, before forking: one item per client thread."""
        return target.new_user_ids(count)

    def setup(self, target: Target, item: Any) -> Work:
        return Work(target=target, passkeys=_passkey_client(target, item))

    @abstractmethod
    def request(self, work: Work) -> bool:
        """One request of the hot path; False when it did not count (e.g. nothing left)."""


class AuthStart(HotPath):
    name = "passkey auth start"

    def request(self, work: Work) -> bool:
        client = work.passkeys
        _checked(client.http.post(work.target.url + "/auth/passkey/start", timeout=60, json={
            "userId": client.registered[0], "relyingPartyId": work.target.rp_id}),
            "/auth/passkey/start")
        return True


class AuthFinish(HotPath):
    name = "passkey auth finish"
    warm_up = False

    def __init__(self, per_thread: int) -> None:
        self.per_thread = per_thread

    def setup(self, target: Target, item: Any) -> Work:
        work = super().setup(target, item)
        client = work.passkeys
        credential = client.authenticator.credentials[0]
        for _ in range(self.per_thread):  # usernameless sessions, answered in counter order
            started = client._post("/auth/passkey/start", {"relyingPartyId": target.rp_id})
            assertion = client.authenticator.get(started["publicKeyCredentialRequestOptions"],
                                                 origin=target.origin,
                                                 credential_id=credential.credential_id)
            work.queue.append({"publicKeyCredential": assertion,
                               "sessionToken": started["sessionToken"]})
        return work

    def request(self, work: Work) -> bool:
        if not work.queue:
            return False
        _checked(work.http.post(work.target.url + "/auth/passkey/finish",
                                json=work.queue.popleft(), timeout=60), "/auth/passkey/finish")
        return True


class Ceremony(HotPath):
    name = "passkey ceremony"
    unit = "ceremonies"

    def request(self, work: Work) -> bool:
        work.passkeys.sign_in()
        return True


class PasswordSignIn(HotPath):
    name = "password sign-in (flow)"
    unit = "sign-ins"

    def prepare(self, target: Target, count: int) -> list[Any]:
        return target.new_password_users(count)

    def setup(self, target: Target, item: Any) -> Work:
        passkeys = Client(url=target.url, origin=target.origin, rp_id=target.rp_id,
                          admin_token="", user_ids=[])
        return Work(target=target, flow=FlowClient(
            passkeys=passkeys, passkey_app="", password_app=target.password_app,
            usernames=[item], steps=defaultdict(Results)))

    def request(self, work: Work) -> bool:
        work.flow.password_sign_in()
        return True


class ClientCredentials(HotPath):
    name = "token client_credentials"

    def prepare(self, target: Target, count: int) -> list[Any]:
        return [None] * count

    def setup(self, target: Target, item: Any) -> Work:
        return Work(target=target)

    def request(self, work: Work) -> bool:
        _checked(work.http.post(work.target.url + "/oauth2/token", timeout=60,
                                data={"grant_type": "client_credentials"}, auth=work.target.m2m),
                 "/oauth2/token")
        return True


class CodeExchange(HotPath):
    name = "token code exchange"
    warm_up = False

    def __init__(self, codes: int) -> None:
        self.codes = codes

    def prepare(self, target: Target, count: int) -> list[Any]:
        codes = target.new_codes(self.codes)
        return [codes[i::count] for i in range(count)]

    def setup(self, target: Target, item: Any) -> Work:
        return Work(target=target, queue=deque(item))

    def request(self, work: Work) -> bool:
        if not work.queue:
            return False
        code, verifier = work.queue.popleft()
        _checked(work.http.post(work.target.url + "/oauth2/token", timeout=60, data={
            "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
            "code_verifier": verifier, "client_id": work.target.spa_id}), "/oauth2/token")
        return True


class McpToolsList(HotPath):
    name = "/mcp tools/list"

    def prepare(self, target: Target, count: int) -> list[Any]:
        return [None] * count

    def setup(self, target: Target, item: Any) -> Work:
        return Work(target=target)

    def request(self, work: Work) -> bool:
        _checked(work.http.post(work.target.url + "/mcp", timeout=60, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={**MCP_HEADERS, "Authorization": f"Bearer {work.target.mcp_token}"}),
            "/mcp")
        return True


# --- the load -------------------------------------------------------------------------------

def _drive(path: HotPath, works: list[Work], seconds: float, results: Results) -> float:
    """Every thread repeats its request until the deadline or until its work is used up."""
    deadline = time.perf_counter() + seconds
    began = time.perf_counter()

    def repeat(work: Work) -> None:
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            try:
                if not path.request(work):
                    return
            except (RuntimeError, *TRANSPORT_ERRORS) as exc:
                results.add(None, str(exc) if isinstance(exc, RuntimeError)
                            else type(exc).__name__)
            else:
                results.add(time.perf_counter() - start)

    threads = [threading.Thread(target=repeat, args=(work,)) for work in works]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began


def _client_process(path: HotPath, target: Target, items: list[Any], seconds: float,
                    barrier: Any, out: Any, cpus: str) -> None:
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(cpu) for cpu in cpus.split(",")})
    try:
        works = [path.setup(target, item) for item in items]
        if path.warm_up:
            _drive(path, works, WARM_UP_SECONDS, Results())
    except (RuntimeError, *TRANSPORT_ERRORS) as exc:
        barrier.wait()
        out.put(([], {f"set-up failed: {exc}": 1}, 0.0))
        return
    barrier.wait()
    results = Results()
    elapsed = _drive(path, works, seconds, results)
    out.put((results.latencies, results.failures, elapsed))


@dataclass
class Phase:
    """One timed phase of one hot path on one server."""

    results: Results
    seconds: float
    cpu_seconds: float


def measure(path: HotPath, target: Target, *, processes: int, threads: int, seconds: float,
            client_cpus: str) -> Phase:
    items = path.prepare(target, processes * threads)
    context = multiprocessing.get_context("fork")
    barrier, out = context.Barrier(processes + 1, timeout=600), context.Queue()
    children = [context.Process(target=_client_process, args=(
        path, target, items[n * threads:(n + 1) * threads], seconds, barrier, out, client_cpus))
        for n in range(processes)]
    for child in children:
        child.start()
    barrier.wait()
    pids = process_tree(target.pid)
    cpu_before = cpu_seconds(pids)
    results, elapsed = Results(), 0.0
    for _ in children:
        latencies, failures, took = out.get(timeout=seconds + 600)
        results.latencies.extend(latencies)
        for failure, count in failures.items():
            results.failures[failure] = results.failures.get(failure, 0) + count
        elapsed = max(elapsed, took)
    cpu = cpu_seconds(pids) - cpu_before
    for child in children:
        child.join()
    return Phase(results, elapsed, cpu)


def combined(phases: list[Phase], unit: str) -> dict[str, Any]:
    """The phases of one hot path on one server (the rounds) as one: all requests over all
    the time, percentiles over every latency, server CPU per request."""
    merged = Results()
    for phase in phases:
        merged.latencies.extend(phase.results.latencies)
        for failure, count in phase.results.failures.items():
            merged.failures[failure] = merged.failures.get(failure, 0) + count
    seconds = sum(phase.seconds for phase in phases)
    cpu = sum(phase.cpu_seconds for phase in phases)
    summary = merged.summary(seconds)
    done = summary.pop("ceremonies")
    summary.update(count=done, unit=unit, seconds=round(seconds, 2),
                   errors=sum(merged.failures.values()),
                   cpu_ms=round(cpu * 1000 / done, 2) if done else None)
    return summary


def rate(phase: Phase) -> float:
    return len(phase.results.latencies) / phase.seconds if phase.seconds else 0.0


# --- the run --------------------------------------------------------------------------------

def _mcp_tools(target: Target) -> list[Any]:
    answer = requests.post(target.url + "/mcp", timeout=60, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={**MCP_HEADERS, "Authorization": f"Bearer {target.mcp_token}"})
    return _checked(answer, "/mcp")["result"]["tools"]


def load_options(parser: argparse.ArgumentParser, *, seconds: float, server_threads: str,
                 rounds: str = "Phases per server, the servers taking turns.") -> None:
    """The options of every bench that loads servers with this module's client:
    --server-threads, --processes, --threads, --seconds, --rounds."""
    parser.add_argument("--server-threads", type=int, default=4, help=server_threads)
    parser.add_argument("--processes", type=int, default=2, help="Client processes.")
    parser.add_argument("--threads", type=int, default=8, help="Threads per client process.")
    parser.add_argument("--seconds", type=float, default=seconds, help="Duration of each phase.")
    parser.add_argument("--rounds", type=int, default=3, help=rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="", help="A running server (needs --config).")
    parser.add_argument("--config", default="", help="With --url: the server's config.toml.")
    parser.add_argument("--pid", type=int, default=0,
                        help="With --url: the server's process id, for its CPU time.")
    parser.add_argument("--workers", type=int, default=1,
                        help="Server processes of both servers (serve --workers).")
    load_options(parser, seconds=10.0, server_threads="waitress threads per server process, "
                 "both servers.", rounds="Phases per hot path and server, the servers taking "
                 "turns.")
    parser.add_argument("--codes", type=int, default=0,
                        help="Codes prepared for each code exchange phase (default: enough "
                             "for the whole phase).")
    parser.add_argument("--client-cpus", default="", help="Pin the client, e.g. '1'.")
    parser.add_argument("--server-cpus", default="", help="Pin both servers, e.g. '0'.")
    parser.add_argument("--only", action="append", default=[],
                        help="Run only the hot paths whose name contains this.")
    parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
    args = parser.parse_args()

    connections = args.processes * args.threads
    prepared = math.ceil(args.seconds * PREPARED_PER_SECOND * args.workers)
    paths: list[HotPath] = [AuthStart(), AuthFinish(max(20, math.ceil(prepared / connections))),
                            Ceremony(), PasswordSignIn(), ClientCredentials(),
                            CodeExchange(args.codes or math.ceil(
                                args.seconds * CODES_PER_SECOND * args.workers)),
                            McpToolsList()]
    if args.only:
        paths = [p for p in paths if any(word in p.name for word in args.only)]
    report: dict[str, Any] = {"workers": args.workers, "server_threads": args.server_threads,
                              "client": f"{args.processes} processes x {args.threads} threads",
                              "seconds": args.seconds, "cpus": os.cpu_count(), "paths": {}}
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hotpaths-")))
        identityctl = [sys.executable, "-m", "identityctl"]
        if args.url:
            config_path, url, pid = Path(args.config), args.url.rstrip("/"), args.pid
        else:
            subprocess.run([*identityctl, "init", "--dir", str(folder / "deployment"), "--json"],
                           check=True, capture_output=True)
            config_path, port = folder / "deployment" / "config.toml", free_port()
            allow_one_address_everything(config_path)
            url = f"http://127.0.0.1:{port}"
            server = stack.enter_context(started(_pinned(
                [*identityctl, "--config", str(config_path), "serve", "--host", "127.0.0.1",
                 "--port", str(port), "--workers", str(args.workers),
                 "--threads", str(args.server_threads)], args.server_cpus),
                url, folder / "serve.log"))
            pid = server.pid
        product = product_target(url, config_path, pid)
        (folder / "tools.json").write_text(json.dumps(_mcp_tools(product)))
        secret, floor_port = secrets.token_urlsafe(32), free_port()
        floor_url = f"http://127.0.0.1:{floor_port}"
        floor_process = stack.enter_context(started(_pinned(
            [sys.executable, str(Path(_BENCH) / "floor.py"), "--port", str(floor_port),
             "--threads", str(args.server_threads), "--workers", str(args.workers),
             "--db", str(folder / "floor.db"), "--rp-id", product.rp_id,
             "--origin", product.origin, f"--client-secret={secret}",
             "--mcp-tools", str(folder / "tools.json")], args.server_cpus),
            floor_url, folder / "floor.log"))
        floor = floor_target(floor_url, floor_process.pid, origin=product.origin,
                             rp_id=product.rp_id, secret=secret)
        time.sleep(1.0)
        report["idle_rss_mib"] = {t.name: rss_mib(process_tree(t.pid))
                                  for t in (product, floor)}
        for path in paths:
            phases: dict[str, list[Phase]] = {product.name: [], floor.name: []}
            for round_number in range(args.rounds):
                # Alternate which server goes first, so drift in the machine's speed (other
                # tenants, the files growing) weighs on both alike.
                order = (product, floor) if round_number % 2 == 0 else (floor, product)
                for target in order:
                    phase = measure(path, target, processes=args.processes,
                                    threads=args.threads, seconds=args.seconds,
                                    client_cpus=args.client_cpus)
                    phases[target.name].append(phase)
                    if not args.json:
                        print(f"  {path.name} on {target.name}, round {round_number + 1}: "
                              f"{rate(phase):.1f}/s", file=sys.stderr, flush=True)
            line = report["paths"][path.name] = {
                name: combined(runs, path.unit) for name, runs in phases.items()}
            floor_rate = line["floor"]["per_second"]
            line["share_of_floor"] = round(line["identityctl"]["per_second"] / floor_rate, 2) \
                if floor_rate else None
            line["share_by_round"] = [
                round(rate(ours) / rate(theirs), 2) if rate(theirs) else None
                for ours, theirs in zip(phases[product.name], phases[floor.name], strict=True)]
        report["rss_after_mib"] = {t.name: rss_mib(process_tree(t.pid))
                                   for t in (product, floor)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"serve --workers {args.workers} --threads {args.server_threads}; client "
          f"{report['client']}; {args.rounds} rounds of {args.seconds:g} s per hot path and "
          f"server; {os.cpu_count()} CPUs; "
          f"idle RSS {report['idle_rss_mib']} MiB, after {report['rss_after_mib']} MiB")
    print(f"{'hot path':26} {'server':12} {'per s':>8} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'CPU ms':>7} {'errors':>6} {'floor':>6}  by round")
    for name, line in report["paths"].items():
        for target in ("identityctl", "floor"):
            row = line[target]
            share = f"{line['share_of_floor']:.0%}" if target == "identityctl" and \
                line["share_of_floor"] is not None else ""
            rounds = "/".join(f"{share:.0%}" for share in line["share_by_round"]
                              if share is not None) if target == "identityctl" else ""
            print(f"{name:26} {target:12} {row['per_second']:8.1f} {row['p50_ms']:7.1f} "
                  f"{row['p99_ms']:7.1f} {row['cpu_ms'] or 0:7.2f} {row['errors']:6} "
                  f"{share:>6}  {rounds}"
                  + (f"  {row['failures']}" if row["failures"] else ""))


if __name__ == "__main__":
    main()
