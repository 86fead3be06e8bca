"""E-mail as the outbox's history grows: a running identityctl sends queued mail to a local
SMTP server (aiosmtpd, started here at the configured email.smtp_host/port), the outbox view
lists the newest messages, and "Lost your passkey?" requests an e-mail code over HTTP, with
0 and then 20,000 e-mails already sent.

The guard: each costs no more than twice as much with the long history (sending claims from
an index of the unsent; the view reads an index by kind and time; the allowance of code
mails reads and counts throttle rows by key, never the outbox). Prints the rates at each
size and the ratios.

    # config: [email] smtp_host = "127.0.0.1", smtp_port = 2525, security = "none"
    identityctl --config demo/config.toml serve &
    .venv/bin/python bench/mail.py --url http://localhost:8090 --config demo/config.toml
"""

from __future__ import annotations

import json
import time
import uuid

import requests
from aiosmtpd.controller import Controller

from bench.outbox import grow_history
from bench.passkey import bench_arguments
from identityctl.config import load_config
from identityctl.services import catalog
from identityctl.services.admin.bootstrap import open_store
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import mail
from identityctl.store import db
from tests.support.origins import TEST_ORIGIN

HISTORY = (0, 20_000)
MESSAGES = 300
VIEWS = 200
RECOVERIES = 100


class Counter:
    received = 0

    async def handle_DATA(self, server: object, session: object, envelope: object) -> str:
        Counter.received += 1
        return "250 OK"


def send(ctx: ServiceContext) -> float:
    """Queue MESSAGES e-mails and wait until the server sent them; messages/s."""
    Counter.received = 0
    started = time.perf_counter()
    with db.transaction():
        for n in range(MESSAGES):
            mail.queue(ctx, "test", to=f"bench-{n}@example.com", server="bench")
    while Counter.received < MESSAGES:
        if time.perf_counter() - started > 300:
            raise SystemExit(f"only {Counter.received} of {MESSAGES} sent in 300 s")
        time.sleep(0.01)
    return MESSAGES / (time.perf_counter() - started)


def view() -> float:
    """`identityctl email outbox`'s read: views/s."""
    started = time.perf_counter()
    for _ in range(VIEWS):
        mail.recent(50)
    return VIEWS / (time.perf_counter() - started)


def recover(url: str, application_id: str) -> float:
    """Recovery e-mail requests (a start and "E-mail me a code") per second."""
    http = requests.Session()
    started = time.perf_counter()
    for _ in range(RECOVERIES):
        step = http.post(f"{url}/flow/execute", timeout=30, json={
            "applicationId": application_id, "flowType": "RECOVERY"}).json()
        answer = http.post(f"{url}/flow/execute", timeout=30, json={
            "executionId": step["executionId"], "action": "email_code",
            "inputs": {"username": f"nobody-{uuid.uuid4().hex[:8]}"}})
        assert answer.status_code == 200, answer.text
    return RECOVERIES / (time.perf_counter() - started)


def main() -> None:
    args = bench_arguments(__doc__).parse_args()
    config = load_config(args.config)
    if not config.email.enabled:
        raise SystemExit("set [email] smtp_host (127.0.0.1) and smtp_port in the config")
    open_store(config)
    ctx = ServiceContext.for_config(config)
    smtp = Controller(Counter(), hostname=config.email.smtp_host, port=config.email.smtp_port)
    smtp.start()
    document = catalog.applications.application_templates()["SPA"]
    document.update(name=f"bench-mail-{uuid.uuid4().hex[:6]}",
                    themeId=catalog.themes.list_themes()[0]["id"])
    document["inboundAuthConfig"][0]["config"]["redirectUris"] = ["https://bench.example/cb"]
    application_id = catalog.applications.create_application(document, origin=TEST_ORIGIN)[0]["id"]
    url = args.url.rstrip("/")
    report = {}
    for history in HISTORY:
        grow_history(history, kind=mail.EMAIL, target="old-{n}@example.com", age=7200,
                     payload={"subject": "old"})
        report[str(history)] = {"sent_per_second": round(send(ctx), 1),
                                "views_per_second": round(view(), 1),
                                "recoveries_per_second": round(recover(url, application_id), 1)}
    smtp.stop()
    small, large = (report[str(size)] for size in HISTORY)
    ratios = {name: round(small[name] / large[name], 2) for name in small}
    if args.json:
        print(json.dumps({"url": args.url, "history": report, "cost_ratios": ratios},
                         indent=2))
        return
    for history in HISTORY:
        line = report[str(history)]
        print(f"{history:6} sent before: {line['sent_per_second']} sent/s, "
              f"{line['views_per_second']} outbox views/s, "
              f"{line['recoveries_per_second']} recovery requests/s")
    for name, ratio in ratios.items():
        print(f"{name}: {HISTORY[1]} before costs {ratio:.2f}x {HISTORY[0]} "
              f"({'within' if ratio <= 2 else 'OVER'} the 2x guard)")


if __name__ == "__main__":
    main()
