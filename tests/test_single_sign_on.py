"""Single sign-on in headless Chromium: sign in once for every application, sign out
everywhere.

Two applications of a team, A and B, run authorization code + PKCE against one deployment;
their redirect URIs and B's back-channel logout endpoint are a local relying party
(tests/support/relying_party.py). The person signs in with a passkey of the browser's
virtual authenticator. Every ID token is checked with the service's JWKS (PyJWT).
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import jwt
import pytest
import requests

from identityctl.oauth.claims import BACKCHANNEL_LOGOUT_EVENT
from identityctl.oauth.pkce import s256_challenge
from identityctl.services import catalog
from identityctl.services.accounts.passkeys.admin import list_credentials
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator
from tests.support.browser import PasskeyPage, needs_chromium, sign_in_with_password
from tests.support.oauth import query_of
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient
from tests.support.relying_party import RelyingParty, relying_party

pytestmark = needs_chromium


@dataclass
class App:
    name: str
    client_id: str
    redirect_uri: str
    display_name: str = ""


@dataclass
class Visit:
    """One authorization from a browser: what the client got, and the pages it went by."""

    back: dict[str, str]
    pages: list[str] = field(default_factory=list)
    verifier: str = ""
    nonce: str = ""

    @property
    def shown_a_page(self) -> bool:
        return any("/gate/" in url for url in self.pages)


@pytest.fixture
def rp() -> Iterator[RelyingParty]:
    with relying_party() as party:
        yield party


def make_app(name: str, rp: RelyingParty, **oauth: Any) -> App:
    redirect_uri = rp.url(f"/{name}/callback")
    document = catalog.applications.application_templates()["SPA"]
    document.pop("themeId", None)
    document["inboundAuthConfig"][0]["config"].update(redirectUris=[redirect_uri], **oauth)
    document["name"] = f"App {name} {uuid.uuid4().hex[:6]}"
    application = catalog.applications.create_application(document, origin=TEST_ORIGIN)[0]
    return App(name=name, client_id=catalog.applications.oauth_config(application)["clientId"],
               redirect_uri=redirect_uri, display_name=application["name"])


@pytest.fixture
def apps(service: Service, rp: RelyingParty) -> tuple[App, App]:
    return make_app("a", rp), make_app("b", rp, backchannelLogoutUri=rp.url("/logout/b"))


class Person:
    """A person with a passkey in a browser tab."""

    def __init__(self, service: Service, browser: Any, *, password: str | None = None) -> None:
        """With ``password``: a password, and the passkey not on this browser's
        authenticator (which then can make one for the person)."""
        self.service = service
        passkeys = PasskeyClient(service)
        self.user = passkeys.new_user(email=f"sso-{uuid.uuid4().hex[:8]}@example.com")
        authenticator = SoftAuthenticator()
        passkeys.enrolled(self.user, authenticator)
        self.tab = PasskeyPage(browser)
        self.password = password
        if password is None:
            self.tab.add_passkey(authenticator.credentials[0])
        else:
            directory.set_password(self.user.id, password, origin=RequestOrigin(actor="test"))

    def visit(self, app: App, *, sign_in: bool = False, **params: str) -> Visit:
        """authorize for ``app``; with ``sign_in``, sign in on the page (passkey, or the
        person's password)."""
        page = self.tab.page
        visit = Visit(back={}, verifier=secrets.token_urlsafe(48),
                      nonce=secrets.token_urlsafe(8))

        def seen(request: Any) -> None:
            if request.is_navigation_request():
                visit.pages.append(request.url)

        page.on("request", seen)
        query = urlencode({"response_type": "code", "client_id": app.client_id,
                           "redirect_uri": app.redirect_uri, "scope": "openid profile",
                           "state": "st", "nonce": visit.nonce,
                           "code_challenge": s256_challenge(visit.verifier),
                           "code_challenge_method": "S256", **params})
        try:
            page.goto(self.service.url(f"/oauth2/authorize?{query}"))
            if sign_in and self.password:
                sign_in_with_password(page, self.user.username, self.password)
            # else: the passkey from the username field's suggestions signs in (autofill)
            page.wait_for_url(app.redirect_uri + "*")
        finally:
            page.remove_listener("request", seen)
        visit.back = query_of(page.url)
        return visit


def tokens(service: Service, app: App, visit: Visit) -> tuple[dict[str, Any], dict[str, Any]]:
    """Exchange the visit's code: the token response and the verified ID token's claims."""
    answer = requests.post(service.url("/oauth2/token"), timeout=30, data={
        "grant_type": "authorization_code", "code": visit.back["code"],
        "redirect_uri": app.redirect_uri, "client_id": app.client_id,
        "code_verifier": visit.verifier})
    assert answer.status_code == 200, answer.text
    id_token = answer.json()["id_token"]
    claims = jwt.decode(id_token, signing_key(service, id_token),
                        algorithms=[service.config.oauth.signing_alg], audience=app.client_id,
                        issuer=service.config.issuer)
    assert claims["nonce"] == visit.nonce
    return answer.json(), claims


def signing_key(service: Service, token: str) -> Any:
    return jwt.PyJWKClient(service.url("/oauth2/jwks")).get_signing_key_from_jwt(token).key


def test_signed_in_at_a_the_person_is_signed_in_at_b_without_a_page(
        service: Service, browser: Any, apps: tuple[App, App]) -> None:
    a, b = apps
    person = Person(service, browser)
    at_a = person.visit(a, sign_in=True)
    assert at_a.shown_a_page
    _, claims_a = tokens(service, a, at_a)

    at_b = person.visit(b)
    assert not at_b.shown_a_page and "code" in at_b.back
    _, claims_b = tokens(service, b, at_b)
    assert claims_b["sub"] == claims_a["sub"] == person.user.id
    assert claims_b["auth_time"] == claims_a["auth_time"]  # the same sign-in
    assert claims_b["amr"] == claims_a["amr"] and "passkey" in claims_b["amr"]
    assert claims_b["sid"] != claims_a["sid"]  # each client its own session id

    # prompt=none: a code here; login_required in a browser that never signed in.
    assert "code" in person.visit(b, prompt="none").back
    stranger = Person(service, browser)
    refused = stranger.visit(b, prompt="none")
    assert refused.back["error"] == "login_required" and not refused.shown_a_page
    person.tab.screenshot("single-sign-on", "at-b-without-a-page")


def test_prompt_login_and_max_age_ask_again_and_move_auth_time(
        service: Service, browser: Any, apps: tuple[App, App]) -> None:
    a, b = apps
    person = Person(service, browser)
    _, first = tokens(service, a, person.visit(a, sign_in=True))
    time.sleep(1.1)  # auth_time counts seconds
    again = person.visit(b, sign_in=True, prompt="login")
    assert again.shown_a_page
    _, fresh = tokens(service, b, again)
    assert fresh["auth_time"] > first["auth_time"]
    time.sleep(1.1)
    aged = person.visit(a, sign_in=True, max_age="0")
    assert aged.shown_a_page
    _, latest = tokens(service, a, aged)
    assert latest["auth_time"] > fresh["auth_time"]
    # The newest sign-in is the session's now: B without a page, at the newest auth_time.
    _, at_b = tokens(service, b, person.visit(b))
    assert at_b["auth_time"] == latest["auth_time"]


def test_logging_out_at_a_signs_out_everywhere_and_tells_b_by_back_channel(
        service: Service, browser: Any, apps: tuple[App, App], rp: RelyingParty) -> None:
    a, b = apps
    person = Person(service, browser)
    tokens_a, claims_a = tokens(service, a, person.visit(a, sign_in=True))
    tokens_b, claims_b = tokens(service, b, person.visit(b))

    person.tab.page.goto(service.url("/oauth2/logout?" + urlencode(
        {"id_token_hint": tokens_a["id_token"]})))
    [logout_token] = rp.wait_for_logouts("b", 1)
    assert jwt.get_unverified_header(logout_token)["typ"] == "logout+jwt"
    logout = jwt.decode(logout_token, signing_key(service, logout_token),
                        algorithms=[service.config.oauth.signing_alg], audience=b.client_id,
                        issuer=service.config.issuer)
    assert logout["sub"] == person.user.id and logout["sid"] == claims_b["sid"]
    assert logout["events"] == {BACKCHANNEL_LOGOUT_EVENT: {}} and "nonce" not in logout
    assert logout["exp"] > time.time() and logout["jti"]

    # B's next prompt=none is login_required; its refresh token and access token are over.
    assert person.visit(b, prompt="none").back["error"] == "login_required"
    refreshed = requests.post(service.url("/oauth2/token"), timeout=30, data={
        "grant_type": "refresh_token", "refresh_token": tokens_b["refresh_token"],
        "client_id": b.client_id})
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant"
    userinfo = requests.get(service.url("/oauth2/userinfo"), timeout=30, headers={
        "Authorization": f"Bearer {tokens_b['access_token']}"})
    assert userinfo.status_code == 401
    time.sleep(2.5)  # a few delivery rounds: nothing more arrives
    assert rp.logout_tokens == {"b": [logout_token]}
    assert claims_a["sid"]  # A had no back-channel endpoint: nothing was sent for it


def test_the_account_page_manages_passkeys_and_signed_in_applications(
        service: Service, browser: Any, apps: tuple[App, App]) -> None:
    """Signed in at A, the person opens /account (single sign-on: no page), adds a passkey
    here and, with a one-time link, on another device, renames one, and signs A out."""
    a, _ = apps
    person = Person(service, browser, password="correct horse battery")
    tokens_a, _ = tokens(service, a, person.visit(a, sign_in=True))
    page = person.tab.page
    page.goto(service.url("/account"))
    page.locator("#username").filter(has_text=person.user.username).wait_for()
    person.tab.screenshot("account", "signed-in")

    page.get_by_role("button", name="Add a passkey on this device").click()
    page.get_by_role("status").filter(has_text="Passkey added").wait_for()
    assert len(list_credentials(person.user.id)) == 2
    page.get_by_role("button", name="Rename").first.click()
    page.get_by_role("dialog").get_by_label("New name").fill("Work laptop")
    page.get_by_role("dialog").get_by_role("button", name="Save").click()
    page.get_by_role("cell", name="Work laptop").wait_for()

    page.get_by_role("button", name="Add a passkey on another device").click()
    link = page.locator("#another-device a").get_attribute("href")
    person.tab.screenshot("account", "link-for-another-device")
    other_device = PasskeyPage(browser)
    try:
        other_device.page.goto(link)
        other_device.page.get_by_role("button", name="Create a passkey").click()
        other_device.page.locator("#done").wait_for()
        other_device.screenshot("account", "other-device-enrolled")
    finally:
        other_device.close()
    assert len(list_credentials(person.user.id)) == 3

    row = page.get_by_role("region", name="Signed in to").get_by_role("row").filter(
        has_text=a.display_name)
    row.get_by_role("button", name="Sign out").click()
    page.get_by_role("status").filter(has_text="Signed out of").wait_for()
    refreshed = requests.post(service.url("/oauth2/token"), timeout=30, data={
        "grant_type": "refresh_token", "refresh_token": tokens_a["refresh_token"],
        "client_id": a.client_id})
    assert refreshed.json()["error"] == "invalid_grant"
    person.tab.screenshot("account", "after-signing-out-a")
