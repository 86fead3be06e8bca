"""The server skeleton: health, and one JSON error shape for everything that goes wrong."""

from __future__ import annotations

import json

from identityctl import __version__
from tests.conftest import Service
from tests.support.oauth import basic_auth


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"code", "message", "description"}
    assert body["code"] == code
    assert "Traceback" not in response.text
    return body


def test_health_reports_the_database(service: Service) -> None:
    response = service.get("/health")
    assert response.status_code == 200
    assert response.json()["database"] == "ok"


def test_unknown_path_is_a_json_404(service: Service) -> None:
    assert_error(service.get("/no/such/thing"), 404, "not_found")


def test_wrong_method_is_a_json_405(service: Service) -> None:
    assert_error(service.http.delete(service.url("/health")), 405, "method_not_allowed")


def test_oversized_body_is_refused_before_it_is_read(service: Service) -> None:
    limit = service.config.server.max_body_bytes
    response = service.http.post(service.url("/health"), data=b"x" * (limit + 1),
                                 headers={"Content-Type": "application/json"})
    assert_error(response, 413, "payload_too_large")


def test_security_headers_are_on_every_response(service: Service) -> None:
    headers = service.get("/health").headers
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]


def test_x_forwarded_for_counts_only_from_a_trusted_proxy(service: Service) -> None:
    """The client address (throttles, audit) comes from X-Forwarded-For only when the peer is
    one of server.trusted_proxies; waitress must hand the header through for that."""
    from identityctl.store import audit
    from tests.support.passkeys import second_instance

    def audited_address(target: Service) -> str:
        target.post("/auth/passkey/finish", {"publicKeyCredential": {}, "sessionToken": "x"},
                    headers={"X-Forwarded-For": "203.0.113.7"})
        return audit.events(event="passkey.authenticate", limit=1)[0]["clientAddress"]

    assert audited_address(service) == "127.0.0.1"
    trust_local = lambda text: text.replace(  # noqa: E731
        "trusted_proxies = []", 'trusted_proxies = ["127.0.0.1"]')
    with second_instance(service, trust_local) as behind_proxy:
        assert audited_address(behind_proxy) == "203.0.113.7"


def test_access_log_writes_one_line_per_request_when_turned_on(service: Service) -> None:
    """Off by default (the proxy in front logs requests; the audit log has every security
    event); ``server.access_log = true`` logs method, path without query, status, client."""
    from tests.support.passkeys import second_instance

    assert service.config.server.access_log is False
    log_on = lambda text: text.replace("access_log = false", "access_log = true")  # noqa: E731
    with second_instance(service, log_on) as logging_instance:
        answer = logging_instance.http.get(logging_instance.url("/health?secret=x"),
                                           headers={"X-Request-ID": "trace-42"})
        log = logging_instance.config_path.with_suffix(".log")
    assert answer.headers["X-Request-ID"] == "trace-42"
    lines = [line for line in log.read_text().splitlines() if "identityctl.access" in line]
    assert lines and all("secret" not in line for line in lines)
    assert " GET /health 200 " in lines[-1] and lines[-1].endswith(" 127.0.0.1 trace-42")


def test_json_logs_are_one_object_per_line_with_the_request_id(service: Service) -> None:
    from tests.support.passkeys import second_instance

    def json_lines(text: str) -> str:
        return text.replace("access_log = false", "access_log = true").replace(
            'log_format = "text"', 'log_format = "json"')

    with second_instance(service, json_lines) as logging_instance:
        answer = logging_instance.http.get(logging_instance.url("/health"))
        log = logging_instance.config_path.with_suffix(".log")
    entries = [json.loads(line) for line in log.read_text().splitlines()
               if line.startswith("{")]
    [access] = [entry for entry in entries if entry["logger"] == "identityctl.access"
                and entry.get("requestId") == answer.headers["X-Request-ID"]]  # made here
    assert (access["method"], access["path"], access["status"]) == ("GET", "/health", 200)


def test_an_audit_event_names_the_request_that_caused_it(service: Service) -> None:
    failed = service.http.post(service.url("/oauth2/token"), timeout=30,
                               data={"grant_type": "client_credentials"},
                               headers={"X-Request-ID": "req-7",
                                        "Authorization": basic_auth("nobody", "no")})
    assert failed.status_code == 401 and failed.headers["X-Request-ID"] == "req-7"
    odd = service.get("/health", headers={"X-Request-ID": "not a token; <script>"})
    assert odd.headers["X-Request-ID"] != "not a token; <script>"  # a new one instead
    from identityctl.store import audit
    assert any(event["requestId"] == "req-7" for event in audit.events(limit=20))


def test_the_start_page_says_what_is_running_and_offers_a_sign_in(service: Service) -> None:
    home = service.get("/")
    assert home.status_code == 200 and home.headers["Content-Type"].startswith("text/html")
    text = home.text
    assert "identityctl is running" in text and __version__ in text
    assert service.config.issuer + "/.well-known/openid-configuration" in text
    assert f'href="{service.url("/account")}"' in text and "Try signing in" in text


def test_uptime_checkers_may_ask_with_head(service: Service) -> None:
    for path in ("/", "/health", "/gate/static/gate.css", "/account"):
        answer = service.http.head(service.url(path), timeout=30)
        assert answer.status_code == 200, path
        assert answer.content == b""


def test_a_browser_that_opens_no_page_reads_a_page_and_an_api_client_the_json(
        service: Service) -> None:
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8",
               "Accept-Language": "de-DE,de;q=0.9"}
    missing = service.get("/no/such/page", headers=browser)
    assert missing.status_code == 404 and missing.headers["Content-Type"].startswith("text/html")
    assert "Diese Seite gibt es nicht" in missing.text
    assert f'href="{service.url("/")}"' in missing.text  # a way on
    assert "frame-ancestors 'none'" in missing.headers["Content-Security-Policy"]
    assert_error(service.get("/no/such/page", headers={"Accept": "*/*"}), 404, "not_found")
    assert_error(service.get("/no/such/page", headers={"Accept": "application/json"}), 404,
                 "not_found")


def test_the_start_page_speaks_the_browsers_language(service: Service) -> None:
    home = service.get("/", headers={"Accept-Language": "de"})
    assert '<html lang="de" dir="ltr">' in home.text
    assert "identityctl läuft" in home.text and "Anmelden ausprobieren" in home.text
