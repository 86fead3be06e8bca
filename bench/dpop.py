"""DPoP-bound tokens as the store of spent proof ids grows: client_credentials token requests
with a fresh DPoP proof each (its jti remembered for N instances), against a running
identityctl, with 0 and then 100,000 spent identifiers (proof and client-assertion jtis)
already in the store.

The guard: a token request with the long history costs no more than twice one without (a
spent identifier is one insert by primary key; expired ones are purged now and then).
Prints tokens/s at each size and the ratio.

    identityctl --config demo/config.toml serve --workers 1 &
    .venv/bin/python bench/dpop.py --url http://localhost:8090 --config demo/config.toml
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid

import requests

from bench.passkey import bench_arguments
from identityctl.config import load_config
from identityctl.services import catalog
from identityctl.services.admin.bootstrap import open_store
from identityctl.store import db
from identityctl.store.models import SpentIdentifier
from tests.support.openid_client import dpop_proof, ec_key
from tests.support.origins import TEST_ORIGIN

HISTORY = (0, 100_000)
REQUESTS = 400


def grow_spent(count: int) -> None:
    """Spent identifiers, valid for an hour, until the store holds ``count``."""
    have = SpentIdentifier.select().count()
    until = time.time() + 3600
    rows = [{"key": hashlib.sha256(f"bench:{uuid.uuid4()}".encode()).hexdigest(),
             "expires_at": until} for _ in range(max(0, count - have))]
    for start in range(0, len(rows), 1000):
        with db.transaction():
            SpentIdentifier.insert_many(rows[start:start + 1000]).execute()


def tokens(url: str, client_id: str, secret: str, token_url: str) -> float:
    """REQUESTS DPoP-bound client_credentials tokens, one after another: tokens/s."""
    http, key = requests.Session(), ec_key()
    started = time.perf_counter()
    for _ in range(REQUESTS):
        answer = http.post(f"{url}/oauth2/token", auth=(client_id, secret), timeout=30,
                           headers={"DPoP": dpop_proof(key, "POST", token_url)},
                           data={"grant_type": "client_credentials"})
        assert answer.status_code == 200 and answer.json()["token_type"] == "DPoP", answer.text
    return REQUESTS / (time.perf_counter() - started)


def main() -> None:
    args = bench_arguments(__doc__).parse_args()
    config = load_config(args.config)
    open_store(config)
    document = catalog.applications.application_templates()["M2M"]
    document["name"] = f"bench-dpop-{uuid.uuid4().hex[:6]}"
    application, secret = catalog.applications.create_application(document, origin=TEST_ORIGIN)
    client_id = catalog.applications.oauth_config(application)["clientId"]
    url, token_url = args.url.rstrip("/"), config.base_url + "/oauth2/token"
    tokens(url, client_id, secret or "", token_url)  # warm up
    report = {}
    for history in HISTORY:
        grow_spent(history)
        report[str(history)] = round(tokens(url, client_id, secret or "", token_url), 1)
    ratio = round(report[str(HISTORY[0])] / report[str(HISTORY[1])], 2)
    if args.json:
        print(json.dumps({"url": url, "tokens_per_second": report, "cost_ratio": ratio},
                         indent=2))
        return
    for history in HISTORY:
        print(f"{history:7} spent identifiers: {report[str(history)]} DPoP tokens/s")
    print(f"with {HISTORY[1]} spent a token costs {ratio:.2f}x one with {HISTORY[0]} "
          f"({'within' if ratio <= 2 else 'OVER'} the 2x guard)")


if __name__ == "__main__":
    main()
