"""Flow sign-ins per second through POST /flow/execute against a running identityctl, over HTTP.

Two phases, N client threads each, `--seconds` per phase:

- passkey: the application default flow (default-basic-passkey-flow), usernameless: start
  (AUTHENTICATION) -> action `passkey` without a username -> the software authenticator
  answers the challenge (real keys, signatures and CBOR) -> action `passkey_verify` ->
  COMPLETE with an assertion.
- password: default-basic-flow: start -> action `password` with username and password ->
  COMPLETE (one argon2 verification per sign-in).

Prints completed sign-ins/s, the p50/p99 latency of a whole sign-in (every HTTP call plus the
authenticator's work) and of each HTTP step. Users, their passkeys (registered over HTTP with
bench/passkey.py's client) and their passwords are set up before the clock starts. Only
successful sign-ins are made, so the password throttle (security.max_failures_per_*) never
counts a failure.

The bench needs the deployment's config file: it creates its applications and users in the
deployment's store and mints the admin token passkey registration requires.

    identityctl --config demo/config.toml serve &
    .venv/bin/python bench/flow.py --url http://localhost:8090 --config demo/config.toml \\
        --threads 4 --seconds 10
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.passkey import Client, Results, bench_arguments, open_deployment, run_phase
from identityctl.services import catalog
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin

PASSWORD = "bench flow password 7f3a"
PASSKEY_STEPS = ("start", "passkey", "passkey_verify")
PASSWORD_STEPS = ("start", "password")
WARM_UP_SECONDS = 1.0


def create_application(run: str, auth_flow: str | None) -> str:
    """A SPA application signing in with ``auth_flow`` (None: the application default)."""
    document = catalog.applications.application_templates()["SPA"]
    document.pop("themeId", None)
    document["inboundAuthConfig"][0]["config"]["redirectUris"] = ["https://bench.example/cb"]
    document.update(name=f"bench flow {auth_flow or 'default'} {run}", authFlowId=auth_flow)
    return catalog.applications.create_application(document,
                                                   origin=RequestOrigin(actor="bench"))[0]["id"]


@dataclass
class FlowClient:
    """One bench thread: bench/passkey.py's client (HTTP session, authenticator holding this
    thread's passkeys) plus the usernames it signs in with passwords."""

    passkeys: Client
    passkey_app: str
    password_app: str
    usernames: list[str]
    steps: dict[str, Results]
    turn: int = 0
    last: dict[str, Any] = field(default_factory=dict)

    def _step(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        began = time.perf_counter()
        response = self.passkeys.http.post(self.passkeys.url + "/flow/execute", json=body,
                                           timeout=60)
        elapsed = time.perf_counter() - began
        if response.status_code != 200:
            code = response.json().get("code", "") if response.content else ""
            self.steps[name].add(None, f"{response.status_code} {code}")
            raise RuntimeError(f"{name} {response.status_code} {code}")
        step = response.json()
        if step["flowStatus"] == "ERROR" or step.get("failureReason"):
            self.steps[name].add(None, step.get("failureReason", "ERROR"))
            raise RuntimeError(f"{name} {step['flowStatus']} {step.get('failureReason', '')}")
        self.steps[name].add(elapsed)
        return step

    def _act(self, name: str, execution_id: str, inputs: dict[str, str]) -> dict[str, Any]:
        return self._step(name, {"executionId": execution_id, "action": name, "inputs": inputs})

    def _next(self, count: int) -> int:
        self.turn += 1
        return self.turn % count

    def passkey_sign_in(self) -> None:
        started = self._step("start", {"applicationId": self.passkey_app,
                                       "flowType": "AUTHENTICATION"})
        challenged = self._act("passkey", started["executionId"], {})
        options = json.loads(challenged["data"]["additionalData"]["passkeyChallenge"])
        credentials = self.passkeys.authenticator.credentials
        credential = credentials[self._next(len(credentials))]
        answer = self.passkeys.authenticator.get(options, origin=self.passkeys.origin,
                                                 credential_id=credential.credential_id)
        inputs = {"credentialId": answer["id"]}
        inputs.update({name: value for name, value in answer["response"].items()
                       if value is not None})
        done = self._act("passkey_verify", started["executionId"], inputs)
        if done["flowStatus"] != "COMPLETE" or not done.get("assertion"):
            raise RuntimeError(f"passkey_verify ended {done['flowStatus']}")

    def password_sign_in(self) -> None:
        started = self._step("start", {"applicationId": self.password_app,
                                       "flowType": "AUTHENTICATION"})
        username = self.usernames[self._next(len(self.usernames))]
        done = self._act("password", started["executionId"],
                         {"username": username, "password": PASSWORD})
        if done["flowStatus"] != "COMPLETE" or not done.get("assertion"):
            raise RuntimeError(f"password ended {done['flowStatus']}")


def measure(clients: list[FlowClient], method: Any, step_names: tuple[str, ...],
            seconds: float) -> dict[str, Any]:
    """Warm up, then run ``method`` on every client for ``seconds``; the phase's summary."""
    for client in clients:
        client.steps = {name: Results() for name in step_names}
    run_phase(clients, method, WARM_UP_SECONDS)
    for client in clients:
        client.steps = {name: Results() for name in step_names}
    shared = {name: Results() for name in step_names}
    for client in clients:  # every thread records into the same (locked) per-step results
        client.steps = shared
    began = time.perf_counter()
    whole = run_phase(clients, method, seconds)
    elapsed = time.perf_counter() - began
    summary = whole.summary(elapsed)
    summary["sign_ins"] = summary.pop("ceremonies")
    summary["steps"] = {}
    for name, results in shared.items():
        step = results.summary(elapsed)
        summary["steps"][name] = {"p50_ms": step["p50_ms"], "p99_ms": step["p99_ms"],
                                  "mean_ms": step["mean_ms"], "requests": step["ceremonies"]}
    return summary


def main() -> None:
    parser = bench_arguments(__doc__)
    parser.add_argument("--users", type=int, default=20,
                        help="Users per thread (each with a passkey and a password).")
    args = parser.parse_args()

    url = args.url.rstrip("/")
    config, admin_token = open_deployment(args.config)
    run = uuid.uuid4().hex[:8]
    passkey_app = create_application(run, None)  # the default: default-basic-passkey-flow
    password_app = create_application(run, "default-basic-flow")

    clients = []
    for n in range(args.threads):  # untimed set-up: users, passwords, passkeys over HTTP
        usernames = [f"bench-flow-{run}-{n}-{i}" for i in range(args.users)]
        user_ids = [directory.create_user(username=name, password=PASSWORD,
                                          origin=RequestOrigin(actor="bench")).id
                    for name in usernames]
        passkeys = Client(url=url, origin=config.passkey.allowed_origins[0],
                          rp_id=config.passkey.rp_id, admin_token=admin_token,
                          user_ids=user_ids)
        for _ in user_ids:
            passkeys.register()
        clients.append(FlowClient(passkeys=passkeys, passkey_app=passkey_app,
                                  password_app=password_app, usernames=usernames, steps={}))

    report: dict[str, Any] = {"url": url, "threads": args.threads, "seconds": args.seconds,
                              "cpus": os.cpu_count()}
    report["passkey"] = measure(clients, FlowClient.passkey_sign_in, PASSKEY_STEPS,
                                args.seconds)
    report["password"] = measure(clients, FlowClient.password_sign_in, PASSWORD_STEPS,
                                 args.seconds)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{args.threads} client threads, {args.seconds:g} s per phase, {url}, "
          f"{os.cpu_count()} CPUs")
    for phase in ("passkey", "password"):
        line = report[phase]
        print(f"{phase:8} sign-in  {line['sign_ins']:6} completed  {line['per_second']:7.1f}/s  "
              f"p50 {line['p50_ms']:6.1f} ms  p99 {line['p99_ms']:6.1f} ms  "
              f"failures {sum(line['failures'].values())} {line['failures'] or ''}")
        for name, step in line["steps"].items():
            print(f"  {name:16} p50 {step['p50_ms']:6.1f} ms  p99 {step['p99_ms']:6.1f} ms")


if __name__ == "__main__":
    main()
