"""Passkey ceremonies per second against a running identityctl, over HTTP.

N client threads each run start + finish in a loop with the software authenticator (real
keys, signatures and CBOR), first registrations for `--seconds`, then sign-ins with a user
id for `--seconds`. Prints ceremonies/s and the p50/p99 latency of a whole ceremony (both
HTTP calls plus the authenticator's work) for each.

The bench needs the deployment's config file: it creates its bench users and mints the
admin token that registration requires directly in the deployment's store.

    identityctl --config demo/config.toml serve &
    .venv/bin/python bench/passkey.py --url http://localhost:8090 --config demo/config.toml \\
        --threads 8 --seconds 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

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

    def summary(self, seconds: float) -> dict[str, object]:
        ordered = sorted(self.latencies)

        def percentile(share: float) -> float:
            return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000 \
                if ordered else 0.0

        return {"ceremonies": len(ordered), "per_second": round(len(ordered) / seconds, 1),
                "p50_ms": round(percentile(0.50), 1), "p99_ms": round(percentile(0.99), 1),
                "mean_ms": round(statistics.fmean(ordered) * 1000, 1) if ordered else 0.0,
                "failures": self.failures}


@dataclass
class Client:
    """One bench thread: its HTTP session, authenticator and users."""

    url: str
    origin: str
    rp_id: str
    admin_token: str
    user_ids: list[str]
    http: requests.Session = field(default_factory=requests.Session)
    authenticator: SoftAuthenticator = field(default_factory=SoftAuthenticator)
    registered: list[str] = field(default_factory=list)
    turn: int = 0

    def _post(self, path: str, body: dict, token: str = "") -> dict:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        response = self.http.post(self.url + path, json=body, headers=headers, timeout=60)
        if response.status_code >= 300:
            raise RuntimeError(f"{path} {response.status_code} "
                               f"{response.json().get('code', '') if response.content else ''}")
        return response.json()

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
            except requests.RequestException as exc:
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


def main() -> None:
    args = bench_arguments(__doc__).parse_args()

    config, admin_token = open_deployment(args.config, token_ttl=int(args.seconds) * 4 + 600)
    run = uuid.uuid4().hex[:8]
    clients = [Client(url=args.url.rstrip("/"), origin=config.passkey.allowed_origins[0],
                      rp_id=config.passkey.rp_id, admin_token=admin_token,
                      user_ids=[directory.create_user(username=f"bench-{run}-{n}-{i}",
                                                      origin=RequestOrigin(actor="bench")).id
                                for i in range(USERS_PER_THREAD)])
               for n in range(args.threads)]

    report = {"url": args.url, "threads": args.threads, "seconds": args.seconds}
    report["registration"] = run_phase(clients, Client.register, args.seconds) \
        .summary(args.seconds)
    report["authentication"] = run_phase([c for c in clients if c.registered],
                                         Client.sign_in, args.seconds).summary(args.seconds)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{args.threads} client threads, {args.seconds:g} s per phase, {args.url}")
    for phase in ("registration", "authentication"):
        print_line(phase, report[phase], "ceremonies")


if __name__ == "__main__":
    main()
