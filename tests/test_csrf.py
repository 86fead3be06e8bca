"""Cross-site request forgery: another site's pages cannot drive the hosted UI's posts.

The hosted UI changes state only with JSON ``fetch`` posts (identityctl/ui/static/gate.js):
POST /flow/execute and POST /oauth2/auth/callback. What a page of another site can send
without a CORS preflight is an HTML form (``application/x-www-form-urlencoded``,
``multipart/form-data``, ``text/plain``): those bodies are refused with 415 before anything
happens. A JSON post needs a preflight, which these endpoints never grant; and a browser
names the page's origin in ``Origin``, which must be the service's own or one of
``passkey.allowed_origins`` (403 ``cross_origin_refused``). The two cookies, the browser
secret flow executions are bound to and the browser session a completed sign-in starts,
are SameSite=Lax: another site's POST or fetch never carries them. docs/security.md, "CSRF
and cookies".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from identityctl.services.flows.execution import BROWSER_COOKIE
from identityctl.store.models import AuthorizationCode, FlowExecution
from tests.conftest import Service, deployment_with
from tests.support.oauth import OAuthDriver, basic_auth, query_of, register_client
from tests.support.passkeys import assert_error
from tests.test_flow_execution import make_application

BROWSER_POSTS = ("/flow/execute", "/oauth2/auth/callback")
EVIL = "https://evil.example"

#: Every body an HTML form of another site can post without a preflight.
FORM_POSTS = {
    "urlencoded": lambda body: {"data": {k: str(v) for k, v in body.items()}},
    "multipart": lambda body: {"files": {k: (None, str(v)) for k, v in body.items()}},
    # <form enctype="text/plain"> with name='{"a":"' value='"}' posts JSON-looking text.
    "text_plain": lambda body: {"data": json.dumps(body),
                                "headers": {"Content-Type": "text/plain"}},
}


@pytest.fixture
def rp(service: Service) -> OAuthDriver:
    return OAuthDriver(service)


def _state() -> tuple[int, int]:
    """What a successful browser post would add: flow executions, authorization codes."""
    return FlowExecution.select().count(), AuthorizationCode.select().count()


def _bodies(service: Service, rp: OAuthDriver) -> dict[str, dict[str, Any]]:
    """A valid body for each browser post (each would change state if accepted)."""
    application = make_application()
    client = register_client()
    link = rp.gate_link(client, state="s", code_challenge="x" * 43,
                        code_challenge_method="S256")
    _, assertion = rp.signed_in_user()
    return {"/flow/execute": {"applicationId": application["id"],
                              "flowType": "AUTHENTICATION"},
            "/oauth2/auth/callback": {"authId": link["authId"], "assertion": assertion}}


def _post(service: Service, path: str, **kwargs: Any) -> requests.Response:
    return service.http.post(service.url(path), timeout=30, **kwargs)


def _assert_unchanged_then_usable(service: Service, path: str, body: dict[str, Any],
                                  before: tuple[int, int]) -> None:
    """Nothing was written, and the very same body still works as a same-origin fetch."""
    assert _state() == before
    accepted = _post(service, path, json=body, headers={"Origin": service.base_url})
    assert accepted.status_code == 200, accepted.text
    assert _state() != before


@pytest.mark.parametrize("kind", sorted(FORM_POSTS))
@pytest.mark.parametrize("path", BROWSER_POSTS)
@pytest.mark.parametrize("origin", [None, EVIL])
def test_a_cross_site_form_post_is_415_and_changes_nothing(
        service: Service, rp: OAuthDriver, path: str, kind: str, origin: str | None) -> None:
    body = _bodies(service, rp)[path]
    before = _state()
    request = FORM_POSTS[kind](body)
    if origin:
        request.setdefault("headers", {})["Origin"] = origin

    refused = _post(service, path, **request)

    error = assert_error(refused, 415, "unsupported_media_type")
    assert "Traceback" not in error["description"]
    assert "Access-Control-Allow-Origin" not in refused.headers
    _assert_unchanged_then_usable(service, path, body, before)


@pytest.mark.parametrize("path", BROWSER_POSTS)
@pytest.mark.parametrize("origin", [EVIL, "null", "http://localhost", "https://localhost:1",
                                    "http://localhost.evil.example", "not a url"])
def test_a_json_post_from_another_origin_is_403_and_changes_nothing(
        service: Service, rp: OAuthDriver, path: str, origin: str) -> None:
    body = _bodies(service, rp)[path]
    before = _state()

    refused = _post(service, path, json=body, headers={"Origin": origin})

    assert_error(refused, 403, "cross_origin_refused")
    assert "Access-Control-Allow-Origin" not in refused.headers
    _assert_unchanged_then_usable(service, path, body, before)


@pytest.mark.parametrize("which", ["base_url", "allowed_origin", "none", "upper_case"])
def test_same_origin_and_non_browser_posts_are_accepted(
        service: Service, rp: OAuthDriver, which: str) -> None:
    origin = {"base_url": service.base_url,
              "allowed_origin": service.config.passkey.allowed_origins[-1],
              "none": None, "upper_case": service.base_url.upper()}[which]
    headers = {"Origin": origin} if origin else {}
    for path, body in _bodies(service, rp).items():
        accepted = _post(service, path, json=body, headers=headers)
        assert accepted.status_code == 200, (path, accepted.text)


def test_the_preflight_a_cross_site_json_post_needs_is_never_granted(service: Service) -> None:
    for path in BROWSER_POSTS:
        preflight = service.http.options(service.url(path), timeout=30, headers={
            "Origin": EVIL, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type"})
        assert preflight.status_code >= 400 or \
            "Access-Control-Allow-Origin" not in preflight.headers, preflight.headers
        assert "Access-Control-Allow-Origin" not in preflight.headers


def test_the_token_endpoint_stays_open_to_cross_origin_spas(service: Service) -> None:
    """/oauth2/token is CORS ``*`` by design (no cookies; the client authenticates)."""
    m2m = register_client("M2M")
    headers = {"Origin": EVIL, "Authorization": basic_auth(m2m.client_id, m2m.secret or "")}
    preflight = service.http.options(service.url("/oauth2/token"), timeout=30, headers={
        "Origin": EVIL, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "*"

    issued = _post(service, "/oauth2/token", data={"grant_type": "client_credentials"},
                   headers=headers)

    assert issued.status_code == 200, issued.text
    assert issued.headers["Access-Control-Allow-Origin"] == "*"
    assert issued.json()["access_token"]
    assert "Set-Cookie" not in issued.headers


def test_two_cookies_only_the_browser_secret_and_the_session(service: Service,
                                                             rp: OAuthDriver) -> None:
    client = register_client()
    link = rp.gate_link(client, state="s", code_challenge="x" * 43,
                        code_challenge_method="S256")
    application_id = link["applicationId"]
    # The browser secret executions are bound to: set by authorize and the sign-in pages
    # for a browser that has none, and by nothing else.
    binding = [
        rp.authorize(client, state="s", code_challenge="x" * 43, code_challenge_method="S256"),
        service.get("/gate/signin", params=link),
        service.get("/gate/signup", params=link),
    ]
    for response in binding:
        name, _, attributes = response.headers["Set-Cookie"].partition(";")
        assert name.startswith(f"{BROWSER_COOKIE}=") and len(name) > 60
        assert sorted(part.strip() for part in attributes.split(";")) == [
            "HttpOnly", "Path=/", "SameSite=Lax", "Secure"]  # no Domain
    responses = [
        service.get("/gate/signin"),  # the incomplete-link error page
        service.get("/gate/theme.css", params={"applicationId": application_id}),
        service.get("/gate/static/gate.js"),
        service.get("/gate/static/gate.css"),
    ]
    started = service.post("/flow/execute", {"applicationId": application_id,
                                             "flowType": "AUTHENTICATION"})
    assert started.status_code == 200, started.text
    execution = started.json()["executionId"]
    responses += [
        started,
        service.post("/flow/execute", {"executionId": execution, "action": "password",
                                       "inputs": {"username": "nobody", "password": "x"}}),
        service.post("/flow/execute", {"executionId": "unknown", "action": "password"}),
        service.post("/flow/execute", {"applicationId": application_id,
                                       "flowType": "REGISTRATION"}),
    ]
    _, assertion = rp.signed_in_user()
    answered = rp.callback(link["authId"], assertion)
    assert answered.status_code == 200, answered.text
    assert query_of(answered.json()["redirect_uri"])["code"]
    responses.append(rp.callback(link["authId"], assertion))

    for response in responses:
        assert "Set-Cookie" not in response.headers, (response.url, response.headers)
        assert not response.cookies, response.url
    # The browser session a completed sign-in starts (single sign-on).
    cookie = answered.headers["Set-Cookie"]
    name, _, attributes = cookie.partition(";")
    assert name.startswith("__Host-identityctl-session=") and len(name) > 60
    assert sorted(part.strip() for part in attributes.split(";")) == [
        "HttpOnly", "Max-Age=604800", "Path=/", "SameSite=Lax", "Secure"]  # no Domain


@pytest.fixture
def app_origin_allowed(tmp_path: Path) -> Iterator[Service]:
    """A deployment whose passkey.allowed_origins also lists a Vite dev server's origin."""
    yield from deployment_with(tmp_path, {
        'allowed_origins = ["http://localhost:':
        'allowed_origins = ["http://localhost:5173", "http://localhost:'})


def test_an_applications_own_pages_may_call_the_flow_api_across_origins(
        app_origin_allowed: Service) -> None:
    """CORS for /flow/execute, for passkey.allowed_origins only and without credentials: a
    self-hosted sign-in page (the React guide's Mode 2) works without a proxy."""
    service, allowed = app_origin_allowed, "http://localhost:5173"
    preflight = service.http.options(service.url("/flow/execute"), timeout=30, headers={
        "Origin": allowed, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == allowed
    assert preflight.headers["Access-Control-Allow-Methods"] == "POST"
    assert "Access-Control-Allow-Credentials" not in preflight.headers
    app = make_application()
    started = service.post("/flow/execute", {"applicationId": app["id"],
                                             "flowType": "AUTHENTICATION"},
                           headers={"Origin": allowed})
    assert started.status_code == 200
    assert started.headers["Access-Control-Allow-Origin"] == allowed
    assert "Origin" in started.headers["Vary"]
    elsewhere = service.http.options(service.url("/flow/execute"), timeout=30,
                                     headers={"Origin": EVIL,
                                              "Access-Control-Request-Method": "POST"})
    assert "Access-Control-Allow-Origin" not in elsewhere.headers


@pytest.mark.parametrize("method", ["POST", "PATCH", "PUT", "DELETE"])
def test_a_change_to_the_admin_api_from_another_origin_is_403(service: Service,
                                                             method: str) -> None:
    """The console calls the admin API from the service's own origin and automation sends no
    Origin: a page of another site gets nowhere, before any token is looked at."""
    refused = service.http.request(method, service.url("/admin/api/v1/users"), json={},
                                   headers={"Origin": EVIL}, timeout=30)
    assert_error(refused, 403, "cross_origin_refused")
    read = service.http.get(service.url("/admin/api/v1/users"), headers={"Origin": EVIL},
                            timeout=30)
    assert_error(read, 401, "missing_token")  # a read is the token's business only
