"""Pushed Authorization Requests (RFC 9126): openid-client pushes the request to /oauth2/par
(authenticated with its key or its secret, or as a public client) and sends the browser with
the request_uri alone; the person signs in; the code is exchanged by the same library.

A request_uri works once, for its client, for 60 seconds; a push is checked as an
authorization request would be and refused at once; an application (or the deployment) can
require every request to be pushed."""

from __future__ import annotations

import time
from typing import Any

import pytest

from identityctl.oauth.pushed_requests import REQUEST_URI_PREFIX
from identityctl.store.models import PushedRequest
from tests.conftest import Service
from tests.support.oauth import (
    OAuthDriver,
    RegisteredClient,
    assert_oauth_error,
    query_of,
    register_client,
)
from tests.support.openid_client import ec_key, needs_openid_client, public, step

REDIRECT = "https://app.example/callback"


def server_app(**config: Any) -> tuple[RegisteredClient, dict[str, Any]]:
    key = ec_key()
    made = register_client("Server", tokenEndpointAuthMethod="private_key_jwt",
                           jwks={"keys": [public(key)]}, **config)
    return made, {"method": "private_key_jwt", "jwk": key}


def sign_in_at(driver: OAuthDriver, url: str) -> str:
    """The browser follows ``url`` (an authorize URL), a new person signs in: the URL the
    client's redirect URI gets."""
    service = driver.service
    answer = service.http.get(url.replace("localhost", "127.0.0.1", 1), allow_redirects=False,
                              timeout=30)
    assert answer.status_code == 302, answer.text
    link = query_of(answer.headers["Location"])
    _, signed_in = driver.signed_in_user()
    return driver.handed_back(link["authId"], signed_in)


@needs_openid_client
@pytest.mark.parametrize("method", ["private_key_jwt", "client_secret_basic", "none"])
def test_openid_client_pushes_its_request_and_signs_a_person_in(service: Service,
                                                               method: str) -> None:
    if method == "private_key_jwt":
        client, auth = server_app()
    elif method == "client_secret_basic":
        client = register_client("Server")
        auth = {"method": method, "secret": client.secret}
    else:
        client, auth = register_client("SPA"), {"method": "none"}
    issuer = service.config.issuer
    started = step(issuer, client.client_id, "par", auth=auth, redirectUri=REDIRECT)
    assert "error" not in started, started
    assert query_of(started["url"])["request_uri"].startswith(REQUEST_URI_PREFIX)
    assert set(query_of(started["url"])) == {"request_uri", "client_id"}  # nothing else
    callback = sign_in_at(OAuthDriver(service), started["url"])
    tokens = step(issuer, client.client_id, "code", auth=auth, callback=callback,
                  verifier=started["verifier"], state=started["state"], nonce=started["nonce"])
    assert "error" not in tokens, tokens
    assert tokens["claims"]["aud"] == client.client_id and tokens["access_token"]


def test_a_request_uri_works_once_and_only_for_its_client(service: Service) -> None:
    driver = OAuthDriver(service)
    client = register_client("SPA")
    other = register_client("SPA")
    pushed = push(service, client)
    request_uri = pushed.json()["request_uri"]
    stolen = driver.authorize(other, request_uri=request_uri)
    assert_page_error(stolen, "request_uri_invalid")
    used = driver.authorize(client, request_uri=request_uri, response_type=None,
                            redirect_uri=None, scope=None)
    assert used.status_code == 302 and "/signin?" in used.headers["Location"]
    again = driver.authorize(client, request_uri=request_uri)
    assert_page_error(again, "request_uri_invalid")
    assert_page_error(driver.authorize(client, request_uri=REQUEST_URI_PREFIX + "made-up"),
                      "request_uri_invalid")


def test_a_request_uri_expires(service: Service) -> None:
    client = register_client("SPA")
    request_uri = push(service, client).json()["request_uri"]
    PushedRequest.update(expires_at=time.time() - 1).execute()
    assert_page_error(OAuthDriver(service).authorize(client, request_uri=request_uri),
                      "request_uri_invalid")
    assert not PushedRequest.select().exists()  # gone, not kept


def test_a_push_is_checked_like_an_authorization_request(service: Service) -> None:
    client = register_client("SPA")
    assert push(service, client).status_code == 201
    refusals = {
        "redirect_uri_mismatch": {"redirect_uri": "https://evil.example/cb"},
        "pkce_required": {"code_challenge": None, "code_challenge_method": None},
        "scope_not_allowed": {"scope": "openid admin"},
        "response_type_unsupported": {"response_type": "token"},
        "request_uri_not_allowed": {"request_uri": REQUEST_URI_PREFIX + "x"},
    }
    for code, change in refusals.items():
        answer = push(service, client, **change)
        assert answer.status_code == 400, (code, answer.text)
        assert answer.json()["code"] == code, answer.json()
    confidential = register_client("Server")
    assert_oauth_error(push(service, confidential, secret="wrong"), 401, "invalid_client",
                       "client_authentication_failed")


def test_an_application_can_require_pushed_requests(service: Service) -> None:
    driver = OAuthDriver(service)
    client = register_client("SPA", requirePushedAuthorizationRequests=True)
    direct = driver.authorize(client, code_challenge="x" * 43, code_challenge_method="S256")
    assert direct.status_code == 302
    answered = query_of(direct.headers["Location"])
    assert answered["error"] == "invalid_request"
    assert "/oauth2/par" in answered["error_description"]
    request_uri = push(service, client).json()["request_uri"]
    pushed = driver.authorize(client, request_uri=request_uri)
    assert pushed.status_code == 302 and "/signin?" in pushed.headers["Location"]
    metadata = service.get("/.well-known/openid-configuration").json()
    assert metadata["pushed_authorization_request_endpoint"] == \
        service.config.base_url + "/oauth2/par"
    assert metadata["require_pushed_authorization_requests"] is False  # per application here


# --- helpers ----------------------------------------------------------------------------------


def push(service: Service, client: RegisteredClient, *, secret: str | None = None,
         **change: str | None) -> Any:
    form = {"response_type": "code", "client_id": client.client_id,
            "redirect_uri": client.redirect_uri, "scope": "openid", "state": "s",
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            "code_challenge_method": "S256", **change}
    auth = (client.client_id, secret or client.secret) if client.secret else None
    return service.http.post(service.url("/oauth2/par"), timeout=30, auth=auth,
                             data={k: v for k, v in form.items() if v is not None})


def assert_page_error(answer: Any, code: str) -> None:
    """An error shown on a page (no redirect: nothing trusted to redirect to)."""
    assert answer.status_code == 400, answer.text
    assert code in answer.text, answer.text
