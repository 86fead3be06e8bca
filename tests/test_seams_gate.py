"""A flow execution belongs to the browser that started it (docs/security.md, "Flow
executions"): authorize binds the execution it starts to a browser secret in a ``__Host-``
cookie; a step without that secret is refused, and the execution's sign-in link opened in
another browser starts a fresh sign-in instead of resuming it. An application's own page
(across origins, no cookies) still drives the executions it starts by their id."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
import requests

from identityctl.services.directory import users as directory
from identityctl.services.flows.execution import BROWSER_COOKIE
from tests.conftest import Service, deployment_with
from tests.support.flows import FlowClient
from tests.support.oauth import OAuthDriver, query_of, register_client
from tests.support.origins import TEST_ORIGIN

PASSWORD = "correct horse battery"


@pytest.fixture
def rp(service: Service) -> OAuthDriver:
    return OAuthDriver(service)


def _authorized(rp: OAuthDriver) -> tuple[dict[str, str], str]:
    """authorize as a browser: the sign-in link's query, and the browser secret it set."""
    client = register_client("SPA")
    response = rp.authorize(client, code_challenge="E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                            code_challenge_method="S256")
    assert response.status_code == 302, response.text
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith(f"{BROWSER_COOKIE}=")
    assert all(flag in cookie for flag in ("Secure", "HttpOnly", "SameSite=Lax", "Path=/"))
    secret = cookie.split(";")[0].split("=", 1)[1]
    return query_of(response.headers["Location"]), secret


def _step(service: Service, execution_id: str, secret: str | None, **inputs: str
          ) -> requests.Response:
    headers = {"Cookie": f"{BROWSER_COOKIE}={secret}"} if secret else {}
    return service.post("/flow/execute", {"executionId": execution_id, "action": "password",
                                          "inputs": inputs}, headers=headers)


def _user() -> Any:
    return directory.create_user(username=f"vic-{uuid.uuid4().hex[:6]}", password=PASSWORD,
                                 origin=TEST_ORIGIN)


def test_a_step_without_the_browser_secret_is_refused_and_changes_nothing(
        service: Service, rp: OAuthDriver) -> None:
    link, secret = _authorized(rp)
    victim = _user()
    for stranger in (None, "another-browser"):
        refused = _step(service, link["executionId"], stranger, username=victim.username,
                        password=PASSWORD)
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "execution_other_browser"
    done = _step(service, link["executionId"], secret, username=victim.username,
                 password=PASSWORD)
    assert done.status_code == 200 and done.json()["flowStatus"] == "COMPLETE", done.text


def _page_data(page: requests.Response, name: str) -> str:
    found = re.search(rf'data-{name}="([^"]*)"', page.text)
    assert found is not None, page.text[:500]
    return found.group(1)


def test_a_sign_in_link_opened_in_another_browser_starts_afresh(
        service: Service, rp: OAuthDriver) -> None:
    link, secret = _authorized(rp)
    query = "&".join(f"{name}={value}" for name, value in link.items())
    own = service.get(f"/gate/signin?{query}",
                      headers={"Cookie": f"{BROWSER_COOKIE}={secret}"})
    assert _page_data(own, "execution-id") == link["executionId"]
    assert _page_data(own, "first-step")  # the page goes on where authorize started
    elsewhere = requests.get(service.url(f"/gate/signin?{query}"), timeout=30)
    assert elsewhere.status_code == 200
    # The page starts its own execution.
    assert _page_data(elsewhere, "execution-id") == _page_data(elsewhere, "first-step") == ""
    # ... bound to the browser secret that page set for its own browser.
    assert elsewhere.headers["Set-Cookie"].startswith(f"{BROWSER_COOKIE}=")


def test_an_applications_own_page_drives_the_executions_it_starts(service: Service) -> None:
    client = register_client("SPA")
    flow = FlowClient(service, client.application_id)
    flow.start()
    victim = _user()
    done = flow.act("password", username=victim.username, password=PASSWORD)
    assert done["flowStatus"] == "COMPLETE"


@pytest.fixture
def own_sign_in_page(tmp_path: Any) -> Any:
    """A deployment whose sign-in page is an application's own, on another origin."""
    yield from deployment_with(tmp_path, {'url = ""\n\n[mcp]':
                                          'url = "https://login.app.example"\n\n[mcp]'})


def test_an_applications_own_sign_in_page_gets_no_execution_in_its_link(
        own_sign_in_page: Service) -> None:
    """Such a page calls across origins without cookies, so a link carrying an execution
    could be handed to anyone: the page starts the execution it drives, and its id is in
    no link."""
    rp = OAuthDriver(own_sign_in_page)
    client = register_client("SPA")
    response = rp.authorize(client, code_challenge="E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                            code_challenge_method="S256")
    assert response.status_code == 302, response.text
    location = response.headers["Location"]
    assert location.startswith("https://login.app.example/signin?")
    link = query_of(location)
    assert set(link) == {"authId", "applicationId"}
    flow = FlowClient(own_sign_in_page, link["applicationId"])
    flow.start()
    victim = _user()
    done = flow.act("password", username=victim.username, password=PASSWORD)
    answered = rp.callback(link["authId"], done["assertion"])
    assert answered.status_code == 200, answered.text
    assert query_of(answered.json()["redirect_uri"])["code"]
