"""/metrics as the deployment's history grows: a running identityctl is scraped with 0 and
then 20,000 e-mails and 20,000 webhook deliveries already sent, and after 5,000 more requests
to varied paths (unknown ones among them).

The guard: a scrape costs no more than twice as much with the long history (the outbox depth
is read from an index of what waits, not by counting what was sent), and the number of
series stays the same (requests are labelled by route template, never by path). Prints the
scrapes per second, the series and the bytes of each scrape at each size, and the ratios.

    identityctl --config demo/config.toml serve &
    .venv/bin/python bench/metrics.py --url http://localhost:8090 --config demo/config.toml
"""

from __future__ import annotations

import json
import time
import uuid

import requests
from prometheus_client.parser import text_string_to_metric_families

from bench.outbox import grow_history
from bench.passkey import bench_arguments
from identityctl.config import load_config
from identityctl.services.admin.bootstrap import open_store
from identityctl.services.delivery.mail import EMAIL
from identityctl.store.webhooks import WEBHOOK

HISTORY = (0, 20_000)
SCRAPES = 200
TRAFFIC = 5_000


def scrape(http: requests.Session, url: str) -> tuple[float, int, int]:
    """SCRAPES scrapes: scrapes/s, and the series and bytes of the last one."""
    started = time.perf_counter()
    for _ in range(SCRAPES):
        answer = http.get(f"{url}/metrics", timeout=30)
        assert answer.status_code == 200, answer.text
    rate = SCRAPES / (time.perf_counter() - started)
    series = sum(len(family.samples) for family in text_string_to_metric_families(answer.text))
    return rate, series, len(answer.content)


def traffic(http: requests.Session, url: str, count: int = TRAFFIC) -> None:
    """Requests to known routes and to paths nobody serves (each one a different path)."""
    for n in range(count):
        path = ("/health", "/.well-known/openid-configuration", f"/no/such/{uuid.uuid4().hex}",
                f"/api/v1/users/{uuid.uuid4()}")[n % 4]
        http.get(url + path, timeout=30)


def main() -> None:
    args = bench_arguments(__doc__).parse_args()
    open_store(load_config(args.config))
    url, http = args.url.rstrip("/"), requests.Session()
    traffic(http, url, 8)  # each kind of answer once: its series exist from here on
    scrape(http, url)  # the first scrape imports and builds what later ones reuse
    report = {}
    for history in HISTORY:
        if history:
            grow_history(history, kind=EMAIL, target="old-{n}@example.com", age=7200,
                         payload={"subject": "old"})
            grow_history(history, kind=WEBHOOK, target="https://hooks.example/{n}", age=7200)
            traffic(http, url)
        rate, series, size = scrape(http, url)
        report[str(history)] = {"scrapes_per_second": round(rate, 1), "series": series,
                                "bytes": size}
    small, large = (report[str(size)] for size in HISTORY)
    ratio = round(small["scrapes_per_second"] / large["scrapes_per_second"], 2)
    if args.json:
        print(json.dumps({"url": url, "history": report, "cost_ratio": ratio}, indent=2))
        return
    for history in HISTORY:
        line = report[str(history)]
        print(f"{history:6} sent before: {line['scrapes_per_second']} scrapes/s, "
              f"{line['series']} series, {line['bytes']} bytes")
    print(f"a scrape with {HISTORY[1]} sent before costs {ratio:.2f}x one with {HISTORY[0]} "
          f"({'within' if ratio <= 2 else 'OVER'} the 2x guard); series "
          f"{'the same' if small['series'] == large['series'] else 'GREW'}")


if __name__ == "__main__":
    main()
