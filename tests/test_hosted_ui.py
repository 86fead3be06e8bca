"""The hosted sign-in UI in headless Debian Chromium with a CDP virtual authenticator.

A demo client runs authorization code + PKCE: the user signs up (password, then a passkey),
signs out, signs in usernameless with the passkey and with the password fallback; the client
validates each ID token with the service's JWKS. Screenshots of every screen go to
test-artifacts/hosted-ui/.
"""

from __future__ import annotations

import base64
import secrets
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import jwt
import pytest
import requests

from identityctl.oauth.pkce import s256_challenge
from identityctl.services import catalog
from identityctl.services.directory import users as directory
from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator
from tests.support.browser import (
    ARTIFACTS,
    PasskeyPage,
    needs_chromium,
    not_now,
    sign_in_with_password,
)
from tests.support.oauth import OAuthDriver, RegisteredClient, query_of
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient

pytestmark = needs_chromium

REDIRECT_URI = "https://demo-client.example/callback"
PASSWORD = "correct horse battery"
#: Primary colour of the theme the tests give the demo application (rgb of #aa3300).
THEME_PRIMARY = "rgb(170, 51, 0)"
LOGO = "data:image/svg+xml;base64," + base64.b64encode(
    b'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40">'
    b'<circle cx="20" cy="20" r="18" fill="#aa3300"/></svg>').decode()


@pytest.fixture
def demo_app(service: Service) -> dict[str, Any]:
    theme = catalog.themes.create_theme(
        handle=f"brand-{uuid.uuid4().hex[:6]}", display_name="Brand",
        theme={"colorSchemes": {"light": {"primary": "#aa3300", "onPrimary": "#ffffff"}},
               "typography": {"fontFamily": "Georgia, serif"},
               "branding": {"productName": "Demo Shop", "logo": LOGO,
                            "termsUrl": "https://demo-client.example/terms",
                            "privacyUrl": "https://demo-client.example/privacy"}},
                                        origin=TEST_ORIGIN)
    document = catalog.applications.application_templates()["SPA"]
    document["inboundAuthConfig"][0]["config"]["redirectUris"] = [REDIRECT_URI]
    document.update(name="Demo shop", themeId=theme["id"], isRegistrationFlowEnabled=True)
    return catalog.applications.create_application(document, origin=TEST_ORIGIN)[0]


class Browser:
    """One user's browser (phone-sized, with a virtual platform authenticator) and the demo
    client's side of authorization code + PKCE."""

    def __init__(self, service: Service, app: dict[str, Any], tab: PasskeyPage,
                 name: str) -> None:
        self.service, self.app, self.tab, self.name = service, app, tab, name
        page = self.page = tab.page
        self.client_id = catalog.applications.oauth_config(app)["clientId"]
        self.shots = 0
        self.verifier = self.nonce = self.state = ""
        # The demo client's redirect URI: answered inside the browser, never on the network.
        page.route(REDIRECT_URI + "*", lambda route: route.fulfill(
            status=200, content_type="text/html", body="<h1>Demo shop: signed in</h1>"))

    def screenshot(self, what: str) -> None:
        self.shots += 1
        self.page.screenshot(path=str(ARTIFACTS / "hosted-ui" / f"{self.name}-{self.shots:02d}-"
                                      f"{what}.png"), full_page=True)

    def authorize(self, **extra: str) -> None:
        self.verifier = secrets.token_urlsafe(48)
        self.nonce, self.state = secrets.token_urlsafe(12), secrets.token_urlsafe(12)
        query = urlencode({"response_type": "code", "client_id": self.client_id,
                           "redirect_uri": REDIRECT_URI, "scope": "openid profile",
                           "state": self.state, "nonce": self.nonce,
                           "code_challenge": s256_challenge(self.verifier),
                           "code_challenge_method": "S256", **extra})
        self.page.goto(self.service.url(f"/oauth2/authorize?{query}"))

    def click(self, label: str) -> None:
        self.page.get_by_role("button", name=label, exact=True).click()

    def wait_for_step(self, label: str) -> None:
        self.page.get_by_role("button", name=label).wait_for()

    def back_at_the_client(self) -> dict[str, Any]:
        """Wait for the redirect to the demo client, exchange the code, verify the ID token."""
        self.page.wait_for_url(REDIRECT_URI + "*")
        answer = query_of(self.page.url)
        assert answer["state"] == self.state
        assert answer["iss"] == self.service.config.issuer
        tokens = requests.post(self.service.url("/oauth2/token"), data={
            "grant_type": "authorization_code", "code": answer["code"],
            "redirect_uri": REDIRECT_URI, "client_id": self.client_id,
            "code_verifier": self.verifier}, timeout=30)
        assert tokens.status_code == 200, tokens.text
        id_token = tokens.json()["id_token"]
        jwks = jwt.PyJWKClient(self.service.url("/oauth2/jwks"))
        claims = jwt.decode(id_token, jwks.get_signing_key_from_jwt(id_token).key,
                            algorithms=[self.service.config.oauth.signing_alg],
                            audience=self.client_id, issuer=self.service.config.issuer)
        assert claims["nonce"] == self.nonce
        return claims


@pytest.fixture
def user_browser(browser: Any, service: Service, demo_app: dict[str, Any],
                 request: pytest.FixtureRequest) -> Iterator[Browser]:
    (ARTIFACTS / "hosted-ui").mkdir(parents=True, exist_ok=True)
    tab = PasskeyPage(browser)
    yield Browser(service, demo_app, tab, request.node.name)
    tab.close()


def test_sign_up_sign_out_and_sign_in_with_passkey_and_password(user_browser: Browser,
                                                                 service: Service) -> None:
    ui = user_browser
    username = f"ada-{uuid.uuid4().hex[:6]}"

    # Sign up: the sign-in page links to the application's registration flow.
    ui.authorize()
    ui.screenshot("sign-in")
    ui.page.get_by_role("link", name="Create an account").click()
    ui.wait_for_step("Create account")
    ui.screenshot("sign-up")
    ui.page.get_by_label("Username").fill(username)
    ui.page.get_by_label("Password").fill(PASSWORD)
    ui.page.get_by_label("Email").fill(f"{username}@example.com")
    ui.click("Create account")
    ui.wait_for_step("Create a passkey")
    ui.screenshot("add-passkey")
    ui.click("Create a passkey")
    signed_up = ui.back_at_the_client()
    ui.screenshot("signed-up")
    user = directory.require_user(username)
    assert signed_up["sub"] == user.id
    assert len(directory_passkeys(user.id)) == 1

    # Sign out (RP-initiated logout: a link without an ID token asks first, and the
    # signed-out page leads on), then sign in with the passkey from the username field's
    # suggestions (autofill: the virtual authenticator picks it as the person would).
    ui.page.goto(service.url("/oauth2/logout"))
    ui.page.get_by_role("heading", name="Sign out of identityctl?").wait_for()
    ui.screenshot("sign-out-question")
    ui.click("Sign out")
    ui.page.get_by_role("heading", name="You are signed out").wait_for()
    assert ui.page.get_by_role("link", name="Sign in again").get_attribute("href") == \
        service.url("/account")
    ui.screenshot("signed-out")
    ui.authorize()
    with_passkey = ui.back_at_the_client()
    assert with_passkey["sub"] == user.id
    assert "passkey" in with_passkey["amr"]

    # The password fallback: a wrong password first, then the right one (prompt=login: the
    # browser's session would answer otherwise). The person does not pick the suggested
    # passkey this time: the authenticator no longer answers by itself.
    ui.tab.cdp.send("WebAuthn.setAutomaticPresenceSimulation", {
        "authenticatorId": ui.tab.authenticator_id, "enabled": False})
    ui.authorize(prompt="login")
    ui.page.get_by_label("Username").fill(username)
    ui.click("Continue")  # the browser asks for the passkey; the password is one press away
    ui.page.get_by_role("status").filter(
        has_text=f"Your browser is asking for a passkey for {username}").wait_for()
    ui.screenshot("passkey-asked")
    ui.click("Use your password")
    ui.page.get_by_label("Password").fill("not my password")
    ui.click("Sign in")
    ui.page.get_by_role("alert").filter(has_text="not right").wait_for()
    ui.screenshot("wrong-password")
    ui.page.get_by_label("Password").fill(PASSWORD)
    ui.click("Sign in")
    with_password = ui.back_at_the_client()
    assert with_password["sub"] == user.id and with_password["amr"] == ["pwd"]


def directory_passkeys(user_id: str) -> list[Any]:
    from identityctl.services.accounts.passkeys import admin as passkeys
    return passkeys.list_credentials(user_id)


def test_the_application_theme_is_applied(user_browser: Browser) -> None:
    ui = user_browser
    ui.authorize()
    button = ui.page.locator("#step button").first
    styles = button.evaluate("b => { const s = getComputedStyle(b); "
                             "return [s.backgroundColor, getComputedStyle(document.body)"
                             ".fontFamily]; }")
    assert styles[0] == THEME_PRIMARY
    assert "Georgia" in styles[1]
    logo = ui.page.get_by_role("img", name="Demo Shop")
    assert logo.is_visible() and logo.get_attribute("src") == LOGO
    assert ui.page.get_by_role("link", name="Terms").get_attribute("href") == \
        "https://demo-client.example/terms"
    assert ui.page.get_by_role("link", name="Privacy").is_visible()
    assert ui.page.title().endswith("| Demo Shop")
    ui.screenshot("themed")


def test_a_cancelled_passkey_explains_itself(user_browser: Browser, service: Service) -> None:
    ui = user_browser
    username = f"bob-{uuid.uuid4().hex[:6]}"
    directory.create_user(username=username, password=PASSWORD, origin=TEST_ORIGIN)
    ui.authorize()
    ui.click("Continue")  # no name: any passkey of this device; it holds none
    ui.page.get_by_role("alert").filter(has_text="passkey").wait_for()
    ui.screenshot("no-passkey-here")
    # The password is offered on the way back.
    ui.page.get_by_label("Password").wait_for()


# --- the defects seen by a new user, each fixed -------------------------------------------------


def password_user() -> Any:
    username = f"eve-{uuid.uuid4().hex[:6]}"
    return directory.create_user(username=username, password=PASSWORD, origin=TEST_ORIGIN)


def test_enter_in_the_password_field_signs_in_with_the_password(user_browser: Browser) -> None:
    ui, user = user_browser, password_user()
    failures: list[str] = []
    ui.page.on("pageerror", lambda error: failures.append(str(error)))
    ui.authorize()
    # The password is one press away before any passkey prompt.
    ui.page.get_by_label("Username").fill(user.username)
    ui.click("Use your password")
    # Enter with the password empty: the field says what is missing, next to it.
    ui.page.get_by_label("Password").press("Enter")
    password_field = ui.page.locator(".field").filter(has=ui.page.get_by_label("Password"))
    password_field.locator(".field-error").filter(has_text="Password is missing").wait_for()
    assert ui.page.get_by_label("Password").get_attribute("aria-invalid") == "true"
    assert not ui.page.get_by_role("alert").is_visible()
    ui.screenshot("password-missing")
    ui.page.get_by_label("Password").fill(PASSWORD)
    ui.page.get_by_label("Password").press("Enter")  # the password's sign-in, no passkey
    not_now(ui.page)
    assert ui.back_at_the_client()["amr"] == ["pwd"]
    assert failures == []  # no script error on the way


def test_a_wrong_password_keeps_the_username_and_puts_the_cursor_in_the_password(
        user_browser: Browser) -> None:
    ui, user = user_browser, password_user()
    ui.authorize()
    ui.page.get_by_label("Username").fill(user.username)
    ui.click("Continue")
    ui.page.get_by_label("Password").fill("not the password")
    ui.click("Sign in")
    ui.page.get_by_role("alert").filter(has_text="not right").wait_for()
    assert ui.page.get_by_label("Username").input_value() == user.username
    assert ui.page.evaluate("document.activeElement.type") == "password"
    ui.screenshot("wrong-password-kept")


def test_sign_up_shows_the_rules_first_keeps_what_was_typed_and_speaks_plainly(
        user_browser: Browser) -> None:
    ui = user_browser
    ui.authorize()
    ui.page.get_by_role("link", name="Create an account").click()
    ui.wait_for_step("Create account")
    assert "At least 8 characters" in ui.page.locator(".hint").inner_text()  # before a try
    assert "(optional)" in ui.page.locator("form#step").inner_text()
    username = f"fay-{uuid.uuid4().hex[:6]}"
    ui.page.get_by_label("Username").fill(username)
    ui.page.get_by_label("Password").fill("short")
    ui.page.get_by_label("Email").fill(f"{username}@example.com")
    ui.click("Create account")
    alert = ui.page.get_by_role("alert")
    alert.filter(has_text="password").wait_for()
    assert "inputs." not in alert.inner_text() and "_" not in alert.inner_text()
    assert ui.page.get_by_label("Username").input_value() == username
    assert ui.page.get_by_label("Email").input_value() == f"{username}@example.com"
    ui.screenshot("weak-password-kept")

    ui.page.get_by_label("Password").fill(PASSWORD)
    ui.click("Create account")
    ui.wait_for_step("Create a passkey")
    assert "fingerprint, face or screen lock" in ui.page.locator("#notice").inner_text()
    assert not ui.page.locator("#switch").is_visible()  # the account exists: no "sign in"
    ui.screenshot("what-a-passkey-is")


def test_a_passkey_prompt_can_be_cancelled_from_the_page(user_browser: Browser) -> None:
    ui = user_browser
    # The prompt waits for a touch that never comes.
    ui.tab.cdp.send("WebAuthn.setAutomaticPresenceSimulation", {
        "authenticatorId": ui.tab.authenticator_id, "enabled": False})
    ui.authorize()
    ui.page.locator("#gate[data-autofill=ready]").wait_for()  # the suggestions' request runs
    ui.click("Continue")
    asking = ui.page.get_by_role("status").filter(
        has_text="Your browser is asking for a passkey")
    asking.wait_for()
    ui.click("Cancel")
    ui.page.get_by_role("status").filter(has_text="cancelled").wait_for()
    ui.screenshot("passkey-cancelled")
    # Back at the start, and the browser takes a new request (the cancelled one and the
    # suggestions' were let go): Continue asks again.
    ui.click("Continue")
    asking.wait_for()
    ui.click("Use your password")
    ui.page.get_by_label("Password").wait_for()
    assert not ui.page.get_by_role("alert").is_visible()


def test_the_back_button_after_signing_in_offers_the_way_back_to_the_application(
        user_browser: Browser) -> None:
    ui, user = user_browser, password_user()
    ui.authorize(prompt="login")
    sign_in_with_password(ui.page, user.username, PASSWORD)
    not_now(ui.page)
    ui.back_at_the_client()
    ui.page.go_back()
    back = ui.page.get_by_role("link", name="Return to the application")
    back.wait_for()
    assert back.get_attribute("href") == "https://demo-client.example/"
    assert "expired or was already used" in ui.page.inner_text("main")
    assert "authorization_request_invalid" not in ui.page.inner_text("main")  # no codes
    ui.screenshot("back-after-sign-in")


def test_passkey_only_sign_up_is_one_step_and_gives_an_id_token_with_amr(user_browser: Browser,
                                                        service: Service) -> None:
    ui = user_browser
    application = catalog.applications.get_application(ui.app["id"])
    passkey_only = catalog.flows.require_flow_by_handle("default-passkey-flow", "REGISTRATION")
    catalog.applications.update_application(
        {**application, "registrationFlowId": passkey_only["id"]}, origin=TEST_ORIGIN)
    ui.authorize()
    ui.page.get_by_role("link", name="Create an account").click()
    ui.wait_for_step("Continue")
    ui.page.get_by_label("Username").fill(f"gus-{uuid.uuid4().hex[:6]}")
    ui.click("Continue")  # one step: the account, then the passkey prompt at once
    assert "passkey" in ui.back_at_the_client()["amr"]


def test_continue_uses_the_passkey_of_a_person_who_has_one(user_browser: Browser,
                                                            service: Service) -> None:
    ui = user_browser
    ui.tab.without_autofill()  # so that only Continue can use the passkey
    user, authenticator = password_user(), SoftAuthenticator()
    PasskeyClient(service).enrolled(user, authenticator)
    ui.tab.add_passkey(authenticator.credentials[0])
    ui.authorize()
    ui.page.get_by_label("Username").fill(user.username)
    ui.screenshot("continue")
    ui.click("Continue")
    claims = ui.back_at_the_client()
    assert claims["sub"] == user.id and "passkey" in claims["amr"]


def test_continue_asks_for_the_password_of_a_person_without_a_passkey_and_then_remembers(
        user_browser: Browser) -> None:
    ui, user = user_browser, password_user()
    ui.authorize()
    ui.page.get_by_label("Username").fill(user.username)
    ui.click("Continue")  # the service answers as for anyone; this device has no passkey
    ui.page.locator("#notice").filter(has_text="Enter your password").wait_for()
    assert ui.page.get_by_label("Username").input_value() == user.username
    assert ui.page.evaluate("document.activeElement.type") == "password"
    ui.screenshot("password-after-continue")
    ui.page.get_by_label("Password").fill(PASSWORD)
    ui.click("Sign in")
    not_now(ui.page)
    assert ui.back_at_the_client()["amr"] == ["pwd"]

    # This browser remembers the password way for this name: no passkey prompt next time.
    ui.authorize(prompt="login")
    ui.page.get_by_label("Username").fill(user.username)
    ui.click("Continue")
    ui.page.get_by_label("Password").wait_for()
    assert not ui.page.locator("#notice").is_visible()
    assert ui.page.get_by_role("button", name="Use a passkey instead").is_visible()


def test_the_favicon_is_served(service: Service) -> None:
    icon = service.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["Content-Type"] == "image/svg+xml"


def test_a_german_browser_reads_the_sign_in_page_in_german(browser: Any, service: Service,
                                                          demo_app: dict[str, Any]) -> None:
    """The language follows Accept-Language (here Chromium's, from its locale); messages the
    service answers with are in it too."""
    tab = PasskeyPage(browser, locale="de-DE")
    try:
        ui = Browser(service, demo_app, tab, "german")
        ui.authorize()
        assert ui.page.locator("html").get_attribute("lang") == "de"
        assert ui.page.get_by_role("heading", level=1).inner_text() == "Anmelden"
        user = password_user()
        ui.page.get_by_label("Benutzername").fill(user.username)
        ui.click("Weiter")
        ui.page.get_by_label("Passwort").fill("falsch falsch")
        ui.click("Anmelden")
        ui.page.get_by_role("alert").filter(has_text="Benutzername oder Passwort").wait_for()
        ui.screenshot("german")
    finally:
        tab.close()


def test_ui_locales_outranks_the_browsers_language(service: Service,
                                                   demo_app: dict[str, Any]) -> None:
    rp = OAuthDriver(service)
    client = RegisteredClient(application_id=demo_app["id"],
                              client_id=catalog.applications.oauth_config(demo_app)["clientId"],
                              secret=None,
                              redirect_uri=REDIRECT_URI, auth_method="none")
    link = rp.gate_link(client, ui_locales="de en", code_challenge=s256_challenge("v" * 43),
                        code_challenge_method="S256")
    page = service.get("/gate/signin", params=link, headers={"Accept-Language": "en-US"})
    assert '<html lang="de" dir="ltr">' in page.text and \
        "<h1 id=\"heading\" tabindex=\"-1\">Anmelden" in page.text
    english = service.get("/gate/signin", params={**link, "ui_locales": "sv"},
                          headers={"Accept-Language": "sv-SE, en;q=0.5"})
    assert '<html lang="en" dir="ltr">' in english.text  # no Swedish catalog: English


def test_a_passkey_from_the_username_fields_suggestions_signs_in_without_a_button(
        browser: Any, service: Service, demo_app: dict[str, Any]) -> None:
    """Passkey autofill (conditional mediation): the page asks the browser for the person's
    passkeys as it opens; the virtual authenticator answers as the person's pick would."""
    from tests.support.authenticator import SoftAuthenticator
    from tests.support.passkeys import PasskeyClient

    passkeys = PasskeyClient(service)
    user = passkeys.new_user(email=f"auto-{uuid.uuid4().hex[:6]}@example.com")
    authenticator = SoftAuthenticator()
    passkeys.enrolled(user, authenticator)
    tab = PasskeyPage(browser)
    tab.add_passkey(authenticator.credentials[0])
    try:
        ui = Browser(service, demo_app, tab, "autofill")
        ui.authorize()
        field = ui.page.get_by_label("Username")
        assert field.get_attribute("autocomplete") == "username webauthn"
        # Chrome's virtual authenticator picks its passkey for a conditional request, as
        # the person would from the field's suggestions: no button is pressed.
        claims = ui.back_at_the_client()
        assert claims["sub"] == user.id and "passkey" in claims["amr"]
    finally:
        tab.close()
