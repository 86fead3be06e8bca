"""Tokens issued per second by a running identityctl's /oauth2/token, over HTTP.

Two phases, N client threads each:

- client_credentials: an M2M client asks for an access token in a loop for `--seconds`
  (HTTP Basic; the secret's argon2 check is paid once, then cached per process).
- authorization_code: codes are prepared first (authorize -> hand-off with a sign-in
  assertion -> code, untimed), then every thread exchanges its codes (with PKCE) as fast as
  it can; codes live 60 s, so `--codes` should be what the server exchanges in well under
  a minute.

Prints tokens/s and the p50/p99 latency of one token request. The bench needs the
deployment's config file: it creates its applications and user in the deployment's store
and mints the sign-in assertions the hosted UI would hand back.

    identityctl --config demo/config.toml serve &
    .venv/bin/python bench/oauth_token.py --url http://localhost:8090 --config demo/config.toml \\
        --threads 4 --seconds 10 --codes 2000
"""

from __future__ import annotations

import json
import secrets
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.passkey import Results, bench_arguments, print_line
from identityctl.config import Config, load_config
from identityctl.oauth.pkce import s256_challenge
from identityctl.services import catalog
from identityctl.services.accounts import signin
from identityctl.services.admin.bootstrap import open_store
from identityctl.services.context import ServiceContext
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin

REDIRECT_URI = "https://bench.example/callback"


def create_clients(run: str) -> tuple[tuple[str, str], str]:
    """An M2M client (id, secret) and a public SPA client id for this run."""
    templates = catalog.applications.application_templates()
    m2m = templates["M2M"] | {"name": f"bench m2m {run}"}
    m2m_app, secret = catalog.applications.create_application(m2m,
                                                              origin=RequestOrigin(actor="bench"))
    spa = templates["SPA"] | {"name": f"bench spa {run}"}
    spa.pop("themeId")
    spa["inboundAuthConfig"][0]["config"]["redirectUris"] = [REDIRECT_URI]
    spa_app, _ = catalog.applications.create_application(spa, origin=RequestOrigin(actor="bench"))
    return ((catalog.applications.oauth_config(m2m_app)["clientId"], secret or ""),
            catalog.applications.oauth_config(spa_app)["clientId"])


def prepare_codes(config: Config, url: str, client_id: str, user_id: str,
                  count: int, *, threads: int = 8) -> list[tuple[str, str]]:
    """``count`` fresh (code, verifier) pairs: authorize, then the hosted UI's hand-off
    (``threads`` at a time: codes live 60 s, and a long phase needs thousands)."""
    context = ServiceContext.for_config(config)
    user = directory.require_user(user_id)
    local = threading.local()

    def one_code(_: int) -> tuple[str, str]:
        http = getattr(local, "http", None) or requests.Session()
        local.http = http
        verifier = secrets.token_urlsafe(48)
        started = http.get(f"{url}/oauth2/authorize", allow_redirects=False, timeout=60, params={
            "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT_URI,
            "scope": "openid", "code_challenge": s256_challenge(verifier),
            "code_challenge_method": "S256"})
        auth_id = parse_qs(urlsplit(started.headers["Location"]).query)["authId"][0]
        handed = http.post(f"{url}/oauth2/auth/callback", timeout=60, json={
            "authId": auth_id, "assertion": signin.issue_assertion(context, user, ["pwd"])})
        redirect = handed.json()["redirect_uri"]
        return parse_qs(urlsplit(redirect).query)["code"][0], verifier

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(one_code, range(count)))


TokenRequest = Callable[[requests.Session, Any], requests.Response]


def timed_requests(threads: int, request: TokenRequest, *, seconds: float = 0.0,
                   work: list[list[tuple[str, str]]] | None = None) -> tuple[Results, float]:
    """Run ``request`` per thread until the deadline, or until its share of ``work`` is done.

    Returns the results and the wall-clock time the phase took.
    """
    results = Results()
    deadline = time.perf_counter() + seconds

    def loop(index: int) -> None:
        http = requests.Session()
        pending = work[index] if work is not None else None

        def more() -> bool:
            return bool(pending) if pending is not None else time.perf_counter() < deadline

        while more():
            item = pending.pop() if pending is not None else None
            began = time.perf_counter()
            try:
                response = request(http, item)
            except requests.RequestException as exc:
                results.add(None, type(exc).__name__)
                continue
            if response.status_code == 200:
                results.add(time.perf_counter() - began)
            else:
                results.add(None, f"{response.status_code} {response.json().get('code')}")

    started = time.perf_counter()
    workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return results, time.perf_counter() - started


def main() -> None:
    parser = bench_arguments(__doc__)
    parser.add_argument("--codes", type=int, default=1000,
                        help="Codes to prepare and exchange in the authorization_code phase.")
    args = parser.parse_args()

    url = args.url.rstrip("/")
    config = load_config(args.config)
    open_store(config)
    run = uuid.uuid4().hex[:8]
    (m2m_id, m2m_secret), spa_id = create_clients(run)
    user = directory.create_user(username=f"bench-token-{run}", origin=RequestOrigin(actor="bench"))

    def client_credentials(http: requests.Session, _: object) -> requests.Response:
        return http.post(f"{url}/oauth2/token", data={"grant_type": "client_credentials"},
                         auth=(m2m_id, m2m_secret), timeout=60)

    def exchange(http: requests.Session, item: tuple[str, str]) -> requests.Response:
        code, verifier = item
        return http.post(f"{url}/oauth2/token", timeout=60, data={
            "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
            "code_verifier": verifier, "client_id": spa_id})

    report: dict[str, object] = {"url": url, "threads": args.threads}
    results, elapsed = timed_requests(args.threads, client_credentials, seconds=args.seconds)
    report["client_credentials"] = results.summary(elapsed)
    codes = prepare_codes(config, url, spa_id, user.id, args.codes)
    shares = [codes[i::args.threads] for i in range(args.threads)]
    results, elapsed = timed_requests(args.threads, exchange, work=shares)
    report["authorization_code"] = results.summary(elapsed)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{args.threads} client threads, {url}")
    for grant in ("client_credentials", "authorization_code"):
        print_line(grant, report[grant], "tokens")


if __name__ == "__main__":
    main()
