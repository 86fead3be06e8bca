"""Passkey ceremonies per second against a running identityctl, over HTTP.

`--processes` client processes of `--threads` threads each run start + finish in a loop
with the software authenticator (real keys, signatures and CBOR), first registrations for
`--seconds`, then sign-ins with a user id for `--seconds`. Prints ceremonies/s and the
p50/p99 latency of a whole ceremony (both HTTP calls plus the authenticator's work) for each.

The ceremonies' requests go over http.client, one kept-alive connection per thread: through
requests a call cost the client about 570 µs of CPU against 120, so with the client on the
server's machine the figures measured the client as much as the server.

The bench needs the deployment's config file: it creates its bench users and mints the
admin token that registration requires directly in the deployment's store.

    identityctl --config demo/config.toml serve &
    .venv/bin/python bench/passkey.py --url http://localhost:8090 --config demo/config.toml \\
        --processes 2 --threads 4 --seconds 10
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from identityctl.config import Config, load_config
from identityctl.security.tokens import ACCESS_TOKEN_TYP
from identityctl.services.admin.bootstrap import open_store
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from identityctl.services.tokens import TokenService
from tests.support.authenticator import SoftAuthenticator

USERS_PER_THREAD = 100
PHASES = ("registration", "authentication")
#: What a failed request raises, besides an error answer (RuntimeError).
TRANSPORT_ERRORS = (requests.RequestException, http.client.HTTPException, OSError)


@dataclass
class Results:
    """Latencies (seconds) of completed ceremonies and the failures, across threads."""

    latencies: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, latency: float | None, failure: str = "") -> None:
        with self.lock:
            if failure:
                self.failures[failure] = self.failures.get(failure, 0) + 1
            else:
                self.latencies.append(latency)

    def merge(self, latencies: list[float], failures: dict[str, int]) -> None:
        """Another process's results of the same phase."""
        with self.lock:
            self.latencies.extend(latencies)
            for failure, count in failures.items():
                self.failures[failure] = self.failures.get(failure, 0) + count

    def summary(self, seconds: float) -> dict[str, object]:
        ordered = sorted(self.latencies)

        def percentile(share: float) -> float:
            return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000 \
                if ordered else 0.0

        return {"ceremonies": len(ordered), "per_second": round(len(ordered) / seconds, 1),
                "p50_ms": round(percentile(0.50), 1), "p99_ms": round(percentile(0.99), 1),
                "mean_ms": round(statistics.fmean(ordered) * 1000, 1) if ordered else 0.0,
                "failures": self.failures}


class JsonConnection:
    """One kept-alive HTTP/1.1 connection that posts JSON and reads JSON answers.

    PERF: http.client, not requests: a bench client shares the server's cores."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1",
                                                     parts.port or 80, timeout=60)

    def post(self, path: str, body: dict[str, Any], headers: dict[str, str]
             ) -> tuple[int, dict[str, Any]]:
        """The answer's status and JSON body to ``body`` posted to ``path``; a connection
        the server closed while it was idle is opened again once."""
        data = json.dumps(body).encode()
        headers = {**headers, "Content-Type": "application/json"}
        for retry in (False, True):
            try:
                self.connection.request("POST", path, data, headers)
                response = self.connection.getresponse()
                payload = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.connection.close()
                if retry:
                    raise
                continue
            return response.status, json.loads(payload) if payload else {}
        raise AssertionError("unreachable")


@dataclass
class Client:
    """One bench thread: its HTTP session, authenticator and users (``http`` is a requests
    session for benches that send other requests; the ceremonies use ``connection``)."""

    url: str
    origin: str
    rp_id: str
    admin_token: str
    user_ids: list[str]
    http: requests.Session = field(default_factory=requests.Session)
    authenticator: SoftAuthenticator = field(default_factory=SoftAuthenticator)
    registered: list[str] = field(default_factory=list)
    turn: int = 0
    connection: JsonConnection = field(init=False)

    def __post_init__(self) -> None:
        self.connection = JsonConnection(self.url)

    def _post(self, path: str, body: dict, token: str = "") -> dict:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        status, answer = self.connection.post(path, body, headers)
        if status >= 300:
            raise RuntimeError(f"{path} {status} {answer.get('code', '')}")
        return answer

    def _next(self, user_ids: list[str]) -> str:
        self.turn += 1
        return user_ids[self.turn % len(user_ids)]

    def register(self) -> None:
        user_id = self._next(self.user_ids)
        started = self._post("/register/passkey/start",
                             {"userId": user_id, "relyingPartyId": self.rp_id},
                             self.admin_token)
        credential = self.authenticator.create(started["publicKeyCredentialCreationOptions"],
                                               origin=self.origin)
        self._post("/register/passkey/finish", {"publicKeyCredential": credential,
                                                "sessionToken": started["sessionToken"]},
                   self.admin_token)
        if user_id not in self.registered:
            self.registered.append(user_id)

    def sign_in(self) -> None:
        user_id = self._next(self.registered)
        started = self._post("/auth/passkey/start",
                             {"userId": user_id, "relyingPartyId": self.rp_id})
        assertion = self.authenticator.get(started["publicKeyCredentialRequestOptions"],
                                           origin=self.origin)
        self._post("/auth/passkey/finish", {"publicKeyCredential": assertion,
                                            "sessionToken": started["sessionToken"]})


def run_phase(clients: list[Client], ceremony: Callable[[Client], None],
              seconds: float) -> Results:
    results = Results()
    deadline = time.perf_counter() + seconds

    def loop(client: Client) -> None:
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            try:
                ceremony(client)
            except RuntimeError as exc:  # an error answer: "path status code"
                results.add(None, str(exc))
            except TRANSPORT_ERRORS as exc:
                results.add(None, type(exc).__name__)
            else:
                results.add(time.perf_counter() - began)

    threads = [threading.Thread(target=loop, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def open_deployment(config_path: str | Path, *, token_ttl: int = 600) -> tuple[Config, str]:
    """The deployment's config with its store opened, and an admin access token (what
    `identityctl token --scope system` mints) that registration needs."""
    config = load_config(config_path)
    open_store(config)
    admin_token = TokenService(config.issuer).sign(
        {"sub": "bench", "aud": [config.issuer], "scope": "system"}, typ=ACCESS_TOKEN_TYP,
        ttl=token_ttl)
    return config, admin_token


def prepare(config_path: str | Path, *, processes: int, threads: int,
            token_ttl: int = 600) -> dict[str, Any]:
    """What the client processes need, made in the deployment's store: the relying party,
    an admin token and ``USERS_PER_THREAD`` users for each thread of each process."""
    config, admin_token = open_deployment(config_path, token_ttl=token_ttl)
    run = uuid.uuid4().hex[:8]
    by = RequestOrigin(actor="bench")
    return {"origin": config.passkey.allowed_origins[0], "rp_id": config.passkey.rp_id,
            "admin_token": admin_token,
            "users": [[[directory.create_user(username=f"bench-{run}-{p}-{t}-{i}",
                                              origin=by).id
                        for i in range(USERS_PER_THREAD)] for t in range(threads)]
                      for p in range(processes)]}


def run_plan(plan: dict[str, Any], *, url: str, seconds: float) -> dict[str, Any]:
    """Registrations, then sign-ins, for ``seconds`` each, from one client process per
    entry of ``plan["users"]`` (forked), the phases started together in every process."""
    context = multiprocessing.get_context("fork")
    processes = len(plan["users"])
    barrier, out = context.Barrier(processes), context.Queue()
    children = [context.Process(target=_client_process,
                                args=(plan, users, url.rstrip("/"), seconds, barrier, out))
                for users in plan["users"]]
    for child in children:
        child.start()
    phases = {phase: Results() for phase in PHASES}
    for _ in range(processes * len(PHASES)):
        phase, latencies, failures = out.get(timeout=seconds * 4 + 600)
        phases[phase].merge(latencies, failures)
    for child in children:
        child.join()
    return {"url": url, "processes": processes,
            "threads": sum(len(users) for users in plan["users"]), "seconds": seconds,
            **{phase: phases[phase].summary(seconds) for phase in PHASES}}


def _client_process(plan: dict[str, Any], users: list[list[str]], url: str, seconds: float,
                    barrier: Any, out: Any) -> None:
    clients = [Client(url=url, origin=plan["origin"], rp_id=plan["rp_id"],
                      admin_token=plan["admin_token"], user_ids=user_ids)
               for user_ids in users]
    for phase, ceremony in zip(PHASES, (Client.register, Client.sign_in), strict=True):
        barrier.wait()
        results = run_phase([c for c in clients if phase == "registration" or c.registered],
                            ceremony, seconds)
        out.put((phase, results.latencies, results.failures))


def print_line(label: str, line: dict, unit: str) -> None:
    """One result line of ``Results.summary``: count, rate, p50, p99, failures."""
    print(f"{label:19} {line['ceremonies']:6} {unit}  {line['per_second']:7.1f}/s  "
          f"p50 {line['p50_ms']:6.1f} ms  p99 {line['p99_ms']:6.1f} ms  "
          f"failures {sum(line['failures'].values())} {line['failures'] or ''}")


def bench_arguments(doc: str) -> argparse.ArgumentParser:
    """The options of every bench against a running server: --url, --config, --threads,
    --seconds, --json (a bench adds its own)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--url", default="http://localhost:8090", help="Running server.")
    parser.add_argument("--config", required=True, help="The server's config.toml.")
    parser.add_argument("--threads", type=int, default=4, help="Client threads.")
    parser.add_argument("--seconds", type=float, default=10.0, help="Duration of each phase.")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON.")
    return parser


def print_report(report: dict[str, Any]) -> None:
    print(f"{report['processes']} client processes, {report['threads']} threads in all, "
          f"{report['seconds']:g} s per phase, {report['url']}")
    for phase in PHASES:
        print_line(phase, report[phase], "ceremonies")


def main() -> None:
    parser = bench_arguments(__doc__)
    parser.add_argument("--processes", type=int, default=2, help="Client processes.")
    args = parser.parse_args()

    plan = prepare(args.config, processes=args.processes, threads=args.threads,
                   token_ttl=int(args.seconds) * 4 + 600)
    report = run_plan(plan, url=args.url, seconds=args.seconds)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print_report(report)


if __name__ == "__main__":
    main()
