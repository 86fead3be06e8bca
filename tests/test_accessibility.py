"""Every hosted page scanned with axe-core (npm) in Chromium at 375 px, in the light and the
dark theme: no serious or critical violations (the pages in Arabic: tests/test_languages.py).

axe-core is installed by ./scripts/test.sh into tests/node/node_modules (npm ci); without it
the scan skips and says why. The pages run under a CSP that allows no injected script, so
the browser context is told to bypass it for the scanner only.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest

from identityctl.oauth.pkce import s256_challenge
from identityctl.services import catalog
from identityctl.services.accounts import federation
from identityctl.services.context import ServiceContext
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from tests.conftest import Service
from tests.support.browser import (
    ARTIFACTS,
    AXE,
    AXE_MISSING,
    PasskeyPage,
    axe_violations,
    needs_chromium,
    not_now,
    sign_in_with_password,
)
from tests.support.origins import TEST_ORIGIN

pytestmark = [needs_chromium, pytest.mark.skipif(not AXE.exists(), reason=AXE_MISSING)]
NARROW = {"width": 375, "height": 812}
PASSWORD = "correct horse battery"
REDIRECT_URI = "https://demo-client.example/callback"


def shop_application(**marks: Any) -> dict[str, Any]:
    """A single-page application at REDIRECT_URI, open to sign-up, in the default theme;
    ``marks``: e.g. selfRegistered (a third party: the person is asked to consent)."""
    document = catalog.applications.application_templates()["SPA"]
    document["inboundAuthConfig"][0]["config"]["redirectUris"] = [REDIRECT_URI]
    document.update(name=f"Shop {uuid.uuid4().hex[:4]}", isRegistrationFlowEnabled=True,
                    themeId=catalog.themes.require_theme("default")["id"])
    return catalog.applications.create_application(document, marks=marks or None,
                                                   origin=TEST_ORIGIN)[0]


def authorize_url(service: Service, application: dict[str, Any], **extra: str) -> str:
    return service.url("/oauth2/authorize?" + urlencode({
        "response_type": "code",
        "client_id": catalog.applications.oauth_config(application)["clientId"],
        "redirect_uri": REDIRECT_URI, "scope": "openid profile",
        "code_challenge": s256_challenge("v" * 43), "code_challenge_method": "S256", **extra}))


def _scan(page: Any, name: str, scheme: str) -> list[dict[str, Any]]:
    found = axe_violations(page)
    (ARTIFACTS / "accessibility").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "accessibility" / f"{name}-{scheme}.png"),
                    full_page=True)
    return [{"page": name, "scheme": scheme, "rule": item["id"], "impact": item["impact"],
             "nodes": [node["target"] for node in item["nodes"]][:3]}
            for item in found if item["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_hosted_page_has_no_serious_accessibility_violations(
        service: Service, browser: Any, scheme: str) -> None:
    shop, third_party = shop_application(), shop_application(selfRegistered=True)
    if not federation.list_providers():  # "Continue with GitHub" on the sign-in page
        federation.add_provider(ServiceContext.for_config(service.config), kind="github",
                                client_id="a11y", client_secret="a11y",
                                origin=RequestOrigin(actor="test"))
    user = directory.create_user(username=f"ally-{uuid.uuid4().hex[:6]}", password=PASSWORD,
                                 origin=TEST_ORIGIN)
    # A browser with an authenticator (one holding no passkey): Continue's passkey try
    # ends at once, as on a phone without a passkey for the site.
    tab = PasskeyPage(browser, viewport=NARROW, color_scheme=scheme, bypass_csp=True)
    page = tab.page
    page.route(REDIRECT_URI + "*", lambda route: route.fulfill(
        status=200, content_type="text/html",
        body="<!doctype html><html lang=en><title>Shop</title><main><h1>Shop</h1></main>"))
    violations: list[dict[str, Any]] = []

    def visit(name: str, go: Callable[[], None]) -> None:
        go()
        violations.extend(_scan(page, name, scheme))

    def sign_in_page() -> None:
        page.goto(authorize_url(service, shop))
        page.get_by_role("button", name="Continue", exact=True).wait_for()

    def password_step() -> None:  # Continue found no passkey for the name
        page.get_by_label("Username").fill(user.username)
        page.get_by_role("button", name="Continue", exact=True).click()
        page.get_by_label("Password").wait_for()

    def sign_up_page() -> None:
        page.get_by_role("link", name="Create an account").click()
        page.get_by_role("button", name="Create account").wait_for()

    def refused_page() -> None:  # an error shown in the form
        page.get_by_label("Username").fill("x")
        page.get_by_label("Password").fill("short")
        page.get_by_role("button", name="Create account").click()
        page.get_by_role("alert").wait_for()

    def upgrade_page() -> None:  # signed in with a password: "Create a passkey"?
        page.goto(authorize_url(service, third_party, prompt="login"))
        sign_in_with_password(page, user.username, PASSWORD)
        page.get_by_role("button", name="Not now").wait_for()

    def consent_page() -> None:
        not_now(page)
        page.get_by_role("button", name="Allow").wait_for()
        page.get_by_text(f"Signed in as {user.username}").wait_for()  # which account answers

    def account_page() -> None:
        page.goto(service.url("/account"))
        page.locator("#username").wait_for()

    def recover_page() -> None:  # "Lost your passkey?"
        page.goto(authorize_url(service, shop, prompt="login"))
        page.get_by_role("link", name="Lost your passkey or password?").click()
        page.get_by_label("Recovery code").wait_for()

    def link_page() -> None:
        page.goto(service.url("/account/enrol#not-a-link"))
        page.get_by_role("alert").wait_for()

    def device_page() -> None:  # a TV's sign-in, approved on the phone (RFC 8628)
        page.goto(service.url("/device?user_code=BCDF-GHJK"))
        page.get_by_label("Code shown on your device").wait_for()

    visit("home", lambda: page.goto(service.url("/")))
    visit("sign-in", sign_in_page)
    visit("password", password_step)
    visit("sign-up", sign_up_page)
    visit("sign-up-refused", refused_page)
    visit("passkey-upgrade", upgrade_page)
    visit("consent", consent_page)
    visit("account", account_page)
    visit("enrol-link", link_page)
    visit("device", device_page)
    visit("recover", recover_page)
    visit("error", lambda: page.goto(service.url("/gate/signin")))
    visit("not-found", lambda: page.goto(service.url("/no/such/page")))
    visit("sign-out-question", lambda: page.goto(service.url("/oauth2/logout")))
    visit("signed-out", lambda: page.get_by_role("button", name="Sign out").click())
    tab.close()
    assert violations == [], json.dumps(violations, indent=1)
