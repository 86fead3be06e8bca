"""The cost of one page of an MCP list tool as the list grows: svc_list_applications with 10
applications, then with 1,000, over HTTP against a running identityctl.

The guard: a page with 1,000 applications costs no more than twice a page
with 10. A page is `limit` items (default 30), so the answer does not grow with the list;
what may grow is the count and the offset's skip in the database. Prints pages/s, p50/p99
and the answer's size at each size, and the ratio of the per-page times.

    identityctl --config demo/config.toml serve &
    .venv/bin/python bench/mcp_lists.py --url http://localhost:8090 --config demo/config.toml
"""

from __future__ import annotations

import json
import sys
import uuid

import requests

from bench.oauth_token import REDIRECT_URI, timed_requests
from bench.passkey import bench_arguments, print_line
from identityctl.config import load_config
from identityctl.security.tokens import ACCESS_TOKEN_TYP
from identityctl.services import catalog
from identityctl.services.admin.bootstrap import open_store
from identityctl.services.origin import RequestOrigin
from identityctl.services.tokens import TokenService

SIZES = (10, 1000)
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def grow_to(count: int, run: str) -> None:
    """Public SPA applications (no secret to hash) until the deployment has ``count``."""
    have = catalog.applications.applications_page(limit=1)[0]
    template = catalog.applications.application_templates()["SPA"]
    for number in range(have, count):
        spa = json.loads(json.dumps(template)) | {"name": f"bench list {run} {number:05}"}
        spa.pop("themeId")
        spa["inboundAuthConfig"][0]["config"]["redirectUris"] = [REDIRECT_URI]
        catalog.applications.create_application(spa, origin=RequestOrigin(actor="bench"))


def main() -> None:
    parser = bench_arguments(__doc__)
    parser.add_argument("--limit", type=int, default=30, help="Page size asked for.")
    args = parser.parse_args()
    url = args.url.rstrip("/")
    config = load_config(args.config)
    open_store(config)
    token = TokenService(config.issuer).sign(
        {"sub": "bench", "aud": [config.mcp_audience], "scope": "system",
         "client_id": "bench"}, typ=ACCESS_TOKEN_TYP, ttl=3600)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "svc_list_applications", "arguments": {"limit": args.limit}}}
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    run = uuid.uuid4().hex[:8]
    report: dict[str, dict[str, object]] = {}
    for size in SIZES:
        if catalog.applications.applications_page(limit=1)[0] > size:
            sys.exit(f"the deployment has more than {size} applications already; use a new one")
        grow_to(size, run)
        answer = requests.post(f"{url}/mcp", json=call, headers=headers, timeout=60)
        answer.raise_for_status()
        results, elapsed = timed_requests(
            args.threads, lambda http, _: http.post(f"{url}/mcp", json=call, headers=headers,
                                                    timeout=60),
            seconds=args.seconds)
        report[str(size)] = {**results.summary(elapsed), "answer_bytes": len(answer.content)}
    small, large = (report[str(size)] for size in SIZES)
    ratio = float(small["per_second"]) / float(large["per_second"])  # type: ignore[arg-type]
    if args.json:
        print(json.dumps({"url": url, "threads": args.threads, "pages": report,
                          "cost_ratio": round(ratio, 2)}, indent=2))
        return
    print(f"{args.threads} client threads, {url}, svc_list_applications limit {args.limit}")
    for size in SIZES:
        line = report[str(size)]
        print_line(f"{size} applications", line, "pages")
        print(f"{'':19} answer {line['answer_bytes']} bytes")
    print(f"a page with {SIZES[1]} costs {ratio:.2f}x a page with {SIZES[0]} "
          f"({'within' if ratio <= 2 else 'OVER'} the 2x guard)")


if __name__ == "__main__":
    main()
