"""The cost of one page of the admin API's lists as they grow, over HTTP: people found by a
username prefix, by an address prefix and listed without a query, each the first page and
the page after it (by its cursor), and for the prefixes the page halfway down the list (by
the cursor the API answers there), with 1,000, 10,000 and 100,000 users; and the audit log,
newest first, alone and filtered by actor, by the user the events are about and by an event
prefix (a quarter of the log), with 10,000, 100,000 and 1,000,000 events.

The guard: a page of the largest list costs no more than twice a page of the smallest. The
lists page by keyset (a seek in an index, then `limit` rows), so neither the answer nor the
work should grow with the list. Prints pages/s and p50/p99 per case and size, and each
case's ratio of the per-page times.

Each case is a `PageCase` in `CASES`: a path of the admin API, its query, and the
`Population` it pages through (what is counted, at which sizes, and how the set-up grows it,
untimed). Another list is measured by adding its population and its cases beside `USERS`.

    .venv/bin/python bench/admin_pages.py                        # starts its own server
    .venv/bin/python bench/admin_pages.py --database-url postgresql://postgres@127.0.0.1/bench
    .venv/bin/python bench/admin_pages.py --url http://localhost:8090 --config demo/config.toml

It calls the API as automation does: a client_credentials application allowed the `admin`
scope, its token asked for the admin API's audience (RFC 8707 `resource`).
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
import re
import secrets
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from bench.hotpaths import free_port, started
from bench.oauth_token import timed_requests
from identityctl.config import Config, load_config
from identityctl.security.secrets import b64url_encode
from identityctl.security.usernames import username_key
from identityctl.services import catalog
from identityctl.services.admin import bootstrap
from identityctl.services.admin.bootstrap import open_store
from identityctl.services.admin.console import encode_cursor
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from identityctl.store import db
from identityctl.store.directory import email_key
from identityctl.store.models import AuditEvent, User, new_id

API = "/admin/api/v1"
#: Users inserted per statement while growing (SQLite's bound parameters stay far below
#: its limit).
BATCH = 500


@dataclass(frozen=True)
class Population:
    """What a list pages through: its noun, the sizes measured (smallest first) and how the
    set-up grows the deployment to a size (untimed)."""

    noun: str
    sizes: tuple[int, ...]
    grow_to: Callable[[int], None]


@dataclass(frozen=True)
class PageCase:
    """One page of ``path`` (under the admin API) with ``params``: the first page, with
    ``following`` the page after it (by the first's ``next``), or with ``position`` the
    page after that keyset position at each size (the cursor the API answers there)."""

    name: str
    population: Population
    path: str
    params: dict[str, str] = field(default_factory=dict)
    following: bool = False
    position: Callable[[int], list[Any]] | None = None


def grow_users(count: int) -> None:
    """Users until the deployment has ``count``: ``bench000123``, address
    ``Reader000123@Example.com``, written as the store writes them (username key, lower-case
    e-mail key, a user handle) but many to a statement."""
    have = User.select().count()
    person = directory.require_user_type(directory.DEFAULT_USER_TYPE)
    rows = []
    for number in range(have, count):
        username, attributes = f"bench{number:06}", {"email": f"Reader{number:06}@Example.com"}
        rows.append({"id": new_id(), "username": username, "username_key": username_key(username),
                     "user_handle": b64url_encode(secrets.token_bytes(32)),
                     "attributes": attributes, "email_key": email_key(attributes),
                     "user_type": person["id"], "ou": person["ouId"]})
    for start in range(0, len(rows), BATCH):
        with db.transaction():
            User.insert_many(rows[start:start + BATCH]).execute()


USERS = Population("users", (1_000, 10_000, 100_000), grow_users)

#: The bench's audit events: one a second from this time on, before any the deployment wrote.
AUDIT_START = 1_700_000_000.0
AUDIT_EVENTS = ("user.update", "oauth.token", "passkey.authenticate", "session.start")


def grow_audit(count: int) -> None:
    """Audit events until the log holds ``count``: event number n at ``AUDIT_START + n``, by
    ``admin:<n % 100>`` about ``user-<n % 97>`` (coprime: each actor acts on every user), the
    event names taken in turn; many to a statement."""
    have = AuditEvent.select().count()
    for first in range(have, count, BATCH):
        with db.transaction():
            AuditEvent.insert_many([
                {"at": AUDIT_START + number, "event": AUDIT_EVENTS[number % len(AUDIT_EVENTS)],
                 "outcome": "success", "actor": f"admin:{number % 100}",
                 "user_id": f"user-{number % 97}", "client_address": "127.0.0.1",
                 "details": {}, "request_id": ""}
                for number in range(first, min(first + BATCH, count))]).execute()


AUDIT = Population("audit events", (10_000, 100_000, 1_000_000), grow_audit)

CASES: list[PageCase] = [
    PageCase("username prefix", USERS, "/users", {"q": "bench", "limit": "50"}),
    PageCase("username prefix, next page", USERS, "/users", {"q": "bench", "limit": "50"},
             following=True),
    PageCase("address prefix", USERS, "/users", {"q": "reader", "limit": "50"}),
    PageCase("address prefix, next page", USERS, "/users", {"q": "reader", "limit": "50"},
             following=True),
    PageCase("username prefix, middle page", USERS, "/users", {"q": "bench", "limit": "50"},
             position=lambda size: ["username", f"bench{size // 2:06}"]),
    PageCase("address prefix, middle page", USERS, "/users", {"q": "reader", "limit": "50"},
             position=lambda size: ["email", f"reader{size // 2:06}@example.com", ""]),
    PageCase("no query", USERS, "/users", {"limit": "50"}),
    PageCase("no query, next page", USERS, "/users", {"limit": "50"}, following=True),
    PageCase("audit, newest", AUDIT, "/audit", {"limit": "50"}),
    PageCase("audit, next page", AUDIT, "/audit", {"limit": "50"}, following=True),
    # Those before the bench's event halfway down: at <= AUDIT_START + size // 2.
    PageCase("audit, middle page", AUDIT, "/audit", {"limit": "50"},
             position=lambda size: [AUDIT_START + size // 2 + 0.5, 0]),
    PageCase("audit by actor", AUDIT, "/audit", {"actor": "admin:7", "limit": "50"}),
    PageCase("audit by subject", AUDIT, "/audit", {"subject": "user-42", "limit": "50"}),
    PageCase("audit by event prefix", AUDIT, "/audit", {"event": "passkey.", "limit": "50"}),
]


def admin_client() -> tuple[str, str]:
    """A client_credentials application allowed the admin scope: its id and secret."""
    m2m = catalog.applications.application_templates()["M2M"] | {
        "name": f"bench admin pages {secrets.token_hex(4)}"}
    m2m["inboundAuthConfig"][0]["config"]["scopes"] = ["admin"]
    created, secret = catalog.applications.create_application(m2m,
                                                              origin=RequestOrigin(actor="bench"))
    return catalog.applications.oauth_config(created)["clientId"], secret or ""


def admin_token(url: str, config: Config, client: tuple[str, str]) -> str:
    answer = requests.post(f"{url}/oauth2/token", auth=client, timeout=30, data={
        "grant_type": "client_credentials", "scope": "admin",
        "resource": config.admin_audience})
    answer.raise_for_status()
    return answer.json()["access_token"]


def page_params(url: str, case: PageCase, size: int,
                headers: dict[str, str]) -> dict[str, str]:
    """The query of the page ``case`` measures, and a check that there are more."""
    if case.position is not None:
        return case.params | {"cursor": encode_cursor(case.position(size))}
    answer = requests.get(url + API + case.path, params=case.params, headers=headers,
                          timeout=60)
    answer.raise_for_status()
    first = answer.json()
    if not first["next"]:
        sys.exit(f"{case.name}: the first page is the only one; the case needs more")
    return case.params | {"cursor": first["next"]} if case.following else case.params


def measure(url: str, case: PageCase, size: int, token: str, *, threads: int,
            seconds: float) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    params = page_params(url, case, size, headers)
    answer = requests.get(url + API + case.path, params=params, headers=headers, timeout=60)
    results, elapsed = timed_requests(
        threads, lambda http, _: http.get(url + API + case.path, params=params,
                                          headers=headers, timeout=60),
        seconds=seconds)
    return {**results.summary(elapsed), "items": len(answer.json()["items"]),
            "answer_bytes": len(answer.content)}


def measure_all(url: str, config: Config, *, threads: int, seconds: float,
                only: list[str]) -> list[dict[str, Any]]:
    """Every case at every size of its population: ``[{case, sizes: {size: summary},
    cost_ratio}]`` in the order of ``CASES``."""
    cases = [case for case in CASES if not only or any(word in case.name for word in only)]
    client = admin_client()
    report = [{"case": case.name, "sizes": {}} for case in cases]
    populations = list(dict.fromkeys(case.population for case in cases))
    for population in populations:
        for size in population.sizes:
            began = time.perf_counter()
            population.grow_to(size)
            print(f"{size} {population.noun} ({time.perf_counter() - began:.1f} s to grow)",
                  file=sys.stderr, flush=True)
            token = admin_token(url, config, client)  # one per size: a token lives an hour
            for case, line in zip(cases, report, strict=True):
                if case.population is population:
                    line["sizes"][str(size)] = measure(url, case, size, token,
                                                       threads=threads, seconds=seconds)
    for case, line in zip(cases, report, strict=True):
        smallest, largest = (line["sizes"][str(size)] for size in (
            case.population.sizes[0], case.population.sizes[-1]))
        line["cost_ratio"] = round(smallest["per_second"] / largest["per_second"], 2) \
            if largest["per_second"] else None
    return report


def _deployment(folder: Path, database_url: str) -> Path:
    """A fresh `identityctl init` deployment in ``folder``, on ``database_url`` if given."""
    subprocess.run([sys.executable, "-m", "identityctl", "init", "--dir", str(folder),
                    "--json"], check=True, capture_output=True)
    config_path = folder / "config.toml"
    if database_url:
        text = re.sub(r'^url = "sqlite:[^"]*"$', f'url = "{database_url}"',
                      config_path.read_text(), count=1, flags=re.MULTILINE)
        config_path.write_text(text)
        config = load_config(config_path)
        open_store(config, create=True)
        bootstrap.seed(config)
        db.close()
    return config_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="", help="A running server (needs --config).")
    parser.add_argument("--config", default="", help="With --url: the server's config.toml.")
    parser.add_argument("--database-url", default="",
                        help="Without --url: put the deployment on this (empty) database.")
    parser.add_argument("--server-threads", type=int, default=4,
                        help="waitress threads of the server it starts.")
    parser.add_argument("--threads", type=int, default=4, help="Client threads.")
    parser.add_argument("--seconds", type=float, default=5.0, help="Duration of each case.")
    parser.add_argument("--only", action="append", default=[],
                        help="Run only the cases whose name contains this.")
    parser.add_argument("--json", action="store_true", help="Print the report as JSON.")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.url:
            config_path, url = Path(args.config), args.url.rstrip("/")
        else:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="admin-pages-")))
            config_path = _deployment(folder / "deployment", args.database_url)
            url = f"http://127.0.0.1:{free_port()}"
            stack.enter_context(started(
                [sys.executable, "-m", "identityctl", "--config", str(config_path), "serve",
                 "--host", "127.0.0.1", "--port", url.rsplit(":", 1)[1], "--workers", "1",
                 "--threads", str(args.server_threads)], url, folder / "serve.log"))
        config = load_config(config_path)
        open_store(config)
        smallest = min(size for case in CASES for size in case.population.sizes)
        if User.select().count() > smallest:
            sys.exit(f"the deployment has more than {smallest} users already; use a new one")
        report = measure_all(url, config, threads=args.threads, seconds=args.seconds,
                             only=args.only)
    if args.json:
        print(json.dumps({"url": url, "threads": args.threads, "seconds": args.seconds,
                          "store": config.database.url.split(":", 1)[0], "cases": report},
                         indent=2))
        return
    print(f"{args.threads} client threads, {args.seconds:g} s per case, {url} "
          f"({config.database.url.split(':', 1)[0]})")
    print(f"{'case':28} {'size':>7} {'pages':>6} {'per s':>8} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'items':>5} {'failures':>8}")
    for line in report:
        for size, row in line["sizes"].items():
            print(f"{line['case']:28} {size:>7} {row['ceremonies']:6} "
                  f"{row['per_second']:8.1f} {row['p50_ms']:7.1f} {row['p99_ms']:7.1f} "
                  f"{row['items']:5} {sum(row['failures'].values()):8}")
        ratio = line["cost_ratio"]
        print(f"{'':28} largest/smallest {ratio:.2f}x "
              f"({'within' if ratio is not None and ratio <= 2 else 'OVER'} the 2x guard)")

if __name__ == "__main__":
    main()
