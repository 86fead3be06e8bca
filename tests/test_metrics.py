"""GET /metrics, read with prometheus_client's own parser: figures move with a sign-in and a
token; a scraper elsewhere needs metrics.allow or metrics.token; with `serve --workers 2`
every scrape adds up all workers."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from identityctl.config import load_config
from identityctl.services.admin.bootstrap import open_store
from identityctl.store import db
from tests.conftest import Service, deployment_with, free_port, make_deployment
from tests.support.authenticator import SoftAuthenticator
from tests.support.oauth import OAuthDriver, register_client
from tests.support.passkeys import PasskeyClient
from tests.support.processes import stop, wait_for_health


def scrape(url: str, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics: (name, labels) -> value."""
    answer = requests.get(url + "/metrics", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"].startswith("text/plain")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(answer.text)
            for sample in family.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_a_sign_in_and_a_token_show_in_the_figures(service: Service) -> None:
    before = scrape(service.base_url)
    passkeys = PasskeyClient(service)
    user = passkeys.new_user()
    authenticator = SoftAuthenticator()
    passkeys.enrolled(user, authenticator)
    assert passkeys.sign_in(authenticator, user.id).status_code == 200
    rp = OAuthDriver(service)
    machine = register_client("M2M")
    assert rp.client_post("/oauth2/token", machine, {
        "grant_type": "client_credentials"}).status_code == 200
    after = scrape(service.base_url)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("identityctl_sign_ins_total", method="passkey", outcome="success") == 1
    assert grew("identityctl_passkey_registrations_total", outcome="success") == 1
    assert grew("identityctl_tokens_issued_total", grant="client_credentials") == 1
    assert grew("identityctl_http_requests_total", route="/auth/passkey/finish",
                method="POST", status="200") == 1
    assert grew("identityctl_http_request_duration_seconds_count",
                route="/auth/passkey/finish") == 1
    assert ("identityctl_outbox_waiting", ()) not in after  # a family, by kind when any


@pytest.fixture
def behind_a_proxy(tmp_path: Path) -> Iterator[Service]:
    """Requests arrive through a proxy on 127.0.0.1 that names the real client."""
    yield from deployment_with(tmp_path, {
        "trusted_proxies = []": 'trusted_proxies = ["127.0.0.1"]',
        'token = ""': 'token = "scrape-secret"', "\nallow = []": '\nallow = ["198.51.100.0/24"]'})


def test_a_scraper_elsewhere_needs_an_allowed_network_or_the_token(
        behind_a_proxy: Service) -> None:
    url = behind_a_proxy.url("/metrics")
    stranger = requests.get(url, headers={"X-Forwarded-For": "203.0.113.9"}, timeout=30)
    assert stranger.status_code == 403 and stranger.json()["code"] == "metrics_forbidden"
    wrong = requests.get(url, timeout=30, headers={"X-Forwarded-For": "203.0.113.9",
                                                   "Authorization": "Bearer guess"})
    assert wrong.status_code == 403
    assert requests.get(url, timeout=30, headers={
        "X-Forwarded-For": "203.0.113.9",
        "Authorization": "Bearer scrape-secret"}).status_code == 200
    assert requests.get(url, headers={"X-Forwarded-For": "198.51.100.7"},
                        timeout=30).status_code == 200


def test_with_two_workers_every_scrape_counts_all_of_them(tmp_path: Path) -> None:
    port = free_port()
    config_path = make_deployment(tmp_path, port=port)
    open_store(load_config(config_path), create=True)
    db.close()
    log = tmp_path / "serve.log"
    with log.open("w") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "identityctl", "--config", str(config_path), "serve",
             "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
            stdout=output, stderr=output, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url + "/health", server, log)
        marker = f"/no-such-page-{uuid.uuid4().hex[:6]}"
        for _ in range(40):  # new connections: the kernel spreads them over the workers
            assert requests.get(url + marker, timeout=30).status_code == 404
        for _ in range(4):  # whichever worker answers the scrape, it counts all 40
            samples = scrape(url)
            assert value(samples, "identityctl_http_requests_total", route="unmatched",
                         method="GET", status="404") == 40
    finally:
        stop(server)
    assert "Traceback" not in log.read_text()


def test_mcp_requests_are_counted_and_carry_a_request_id(service: Service) -> None:
    """/mcp is served beside the Falcon app, with the same figures, X-Request-ID and audit
    request ids (its tools run on the SDK's threads)."""
    from identityctl.store import audit
    from tests.support.mcp_clients import admin_token, call, http_session, run

    before = scrape(service.base_url)
    refused = requests.post(service.url("/mcp"), json={}, timeout=30,
                            headers={"X-Request-ID": "mcp-trace-1"})
    assert refused.status_code == 401 and refused.headers["X-Request-ID"] == "mcp-trace-1"
    role = f"mcp-metrics-{uuid.uuid4().hex[:6]}"

    async def create_role() -> None:
        async with http_session(service.url("/mcp"), admin_token(service)) as session:
            await call(session, "create_role", {"name": role, "scopes": ["reports:read"]})

    run(create_role())
    after = scrape(service.base_url)
    grew = lambda **labels: (value(after, "identityctl_http_requests_total", **labels)  # noqa: E731
                             - value(before, "identityctl_http_requests_total", **labels))
    assert grew(route="/mcp", method="POST", status="401") == 1
    assert grew(route="/mcp", method="POST", status="200") >= 2  # initialize, the tool call
    [created] = [event for event in audit.events(event="role.create", limit=50)
                 if event["details"].get("role") == role]
    assert created["requestId"]  # the tool call's, made by the server
