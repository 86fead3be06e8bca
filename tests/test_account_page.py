"""The account page (/account) in Debian Chromium with a CDP virtual authenticator.

A person with a passkey opens the page, signs in through the hosted page (the passkey from
the username field's suggestions), and manages their passkeys, sessions, password and
consents; a second browser context is their other device. Screenshots go to
test-artifacts/account/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import Service, start_service
from tests.support.authenticator import SoftAuthenticator
from tests.support.browser import PasskeyPage, needs_chromium
from tests.test_account import Account
from tests.test_oauth_helpers import register_client
from tests.test_passkey_helpers import PasskeyClient

pytestmark = needs_chromium


class AccountPage:
    """The person's browser, holding their passkey, on their account page."""

    def __init__(self, browser: Any, me: Account, **context_options: Any) -> None:
        self.me = me
        self.tab = PasskeyPage(browser, **context_options)
        self.tab.add_passkey(me.authenticator.credentials[0])
        self.page = self.tab.page

    def open(self) -> None:
        self.page.goto(self.me.service.url("/account"))
        self.page.locator("#username").filter(has_text=self.me.user.username).wait_for()

    def press(self, label: str, *, row: str | None = None) -> None:
        scope = self.page.get_by_role("row").filter(has_text=row) if row else self.page
        scope.get_by_role("button", name=label, exact=True).click()

    def passkey_names(self) -> list[str]:
        passkeys = self.page.get_by_role("region", name="Passkeys")
        return passkeys.locator("tbody td:first-child").all_inner_texts()

    def wait_for_status(self, text: str) -> None:
        self.page.get_by_role("status").filter(has_text=text).wait_for()

    def shot(self, name: str) -> None:
        self.tab.screenshot("account", name)


@pytest.fixture
def account_page(browser: Any, service: Service) -> Iterator[AccountPage]:
    opened = AccountPage(browser, Account(service))
    yield opened
    opened.tab.close()


def test_passkeys_are_renamed_added_here_and_deleted_but_never_the_last(
        account_page: AccountPage) -> None:
    ui = account_page
    ui.open()
    ui.shot("account")
    [first] = ui.passkey_names()

    ui.page.once("dialog", lambda dialog: dialog.accept("Work laptop"))
    ui.press("Rename", row=first)
    ui.page.get_by_role("cell", name="Work laptop").wait_for()

    # The passkey used to sign in was on the person's phone, not this computer: this
    # browser's authenticator keeps none (it would refuse a second for the same account).
    ui.tab.cdp.send("WebAuthn.clearCredentials", {"authenticatorId": ui.tab.authenticator_id})
    ui.press("Add a passkey on this device")
    ui.wait_for_status("Passkey added.")
    assert len(ui.passkey_names()) == 2
    ui.shot("two-passkeys")

    ui.page.once("dialog", lambda dialog: dialog.accept())
    ui.press("Delete", row="Work laptop")
    ui.wait_for_status("Passkey deleted.")
    [left] = ui.passkey_names()
    assert left != "Work laptop"

    ui.page.once("dialog", lambda dialog: dialog.accept())
    ui.press("Delete", row=left)  # no password either: the only way to sign in
    ui.page.get_by_role("alert").filter(has_text="only way to sign in").wait_for()
    assert ui.passkey_names() == [left]
    ui.shot("last-passkey-kept")


def test_another_device_adds_a_passkey_from_the_link_on_the_account_page(
        account_page: AccountPage, browser: Any, service: Service) -> None:
    ui = account_page
    ui.open()
    ui.press("Add a passkey on another device")
    code = ui.page.get_by_role("img", name="QR code of the link")
    code.wait_for()
    link = ui.page.locator("#another-device a").get_attribute("href")
    assert link and link.startswith(service.url("/account/enrol#"))
    ui.shot("link-for-another-device")

    other = PasskeyPage(browser)  # the person's phone: a browser of its own, no session
    try:
        other.page.goto(link)
        other.page.get_by_text(ui.me.user.username).wait_for()
        other.screenshot("account", "other-device")
        other.page.get_by_role("button", name="Create a passkey").click()
        other.page.locator("#done").wait_for()
        other.screenshot("account", "other-device-done")
        # The link worked once.
        other.page.goto(link)
        other.page.get_by_role("alert").filter(has_text="used already").wait_for()
    finally:
        other.close()
    ui.page.reload()  # signs in again through the browser's session, without a page
    ui.page.locator("#username").wait_for()
    assert len(ui.passkey_names()) == 2


def test_signing_out_of_an_application_ends_its_refresh_and_a_consent_is_revoked(
        account_page: AccountPage) -> None:
    ui, me = account_page, account_page.me
    ui.open()
    # The same passkey signs below outside the browser: its counter goes on from the
    # browser's copy (a counter going back would look like a clone).
    me.authenticator.credentials[0].sign_count += 100
    app = register_client("SPA")
    tokens = me.sign_in(app, scope="openid profile")
    ui.page.reload()
    ui.page.locator("#username").wait_for()
    application = me.ok("GET", "/sessions")["sessions"]
    [name] = {entry["application"] for entry in application
              if entry["clientId"] == app.client_id}
    ui.shot("sessions-and-consents")

    ui.press("Sign out", row=name)
    ui.wait_for_status(f"Signed out of {name}.")
    assert me.rp.refresh(app, tokens["refresh_token"]).json()["error"] == "invalid_grant"

    again = me.sign_in(app, scope="openid profile")
    ui.page.reload()
    ui.page.locator("#username").wait_for()
    consents = ui.page.get_by_role("region", name="Applications you allowed")
    consents.get_by_role("row").filter(has_text=name).get_by_role("button",
                                                                   name="Revoke").click()
    ui.wait_for_status(f"{name} no longer has access.")
    assert me.rp.userinfo(again["access_token"]).status_code == 401


def test_a_password_is_set_with_the_rules_shown(account_page: AccountPage) -> None:
    ui = account_page
    ui.open()
    ui.page.get_by_label("New password").fill("short")
    ui.press("Set a password")
    ui.page.get_by_role("alert").filter(has_text="at least 8 characters").wait_for()
    ui.page.get_by_label("New password").fill("a long enough passphrase")
    ui.press("Set a password")
    ui.wait_for_status("Password saved.")
    assert ui.me.ok("GET", "/profile")["hasPassword"] is True


def test_a_german_browser_reads_the_account_page_in_german(browser: Any,
                                                           service: Service) -> None:
    ui = AccountPage(browser, Account(service), locale="de-DE")
    try:
        ui.open()
        assert ui.page.locator("html").get_attribute("lang") == "de"
        assert ui.page.get_by_role("heading", level=1).inner_text() == "Ihr Konto"
        assert ui.page.get_by_role("button", name="Umbenennen").is_visible()
        ui.shot("german")
    finally:
        ui.tab.close()


def test_recovery_codes_are_made_and_shown_once(account_page: AccountPage) -> None:
    ui = account_page
    ui.open()
    ui.press("Make recovery codes")
    ui.wait_for_status("New recovery codes made")
    assert len(ui.page.locator("#recovery-codes li").all_inner_texts()) == 10
    ui.shot("recovery-codes")
    ui.page.reload()
    ui.page.locator("#username").wait_for()
    assert ui.page.locator("#recovery-codes li").count() == 0  # not shown again
    ui.page.get_by_text("You have 10 unused recovery codes.").wait_for()


def test_the_account_page_signs_in_where_every_request_must_be_pushed(
        browser: Any, tmp_path: Path) -> None:
    """oauth.require_pushed_authorization_requests: the page pushes its own request
    (RFC 9126) before it sends the browser to sign in."""
    running, stop = start_service(tmp_path, settings={
        "require_pushed_authorization_requests = false":
            "require_pushed_authorization_requests = true"})
    passkeys = PasskeyClient(running)
    person = SimpleNamespace(service=running, user=passkeys.new_user(),
                             authenticator=SoftAuthenticator())
    passkeys.enrolled(person.user, person.authenticator)
    opened = AccountPage(browser, person)  # type: ignore[arg-type]
    try:
        opened.open()
    finally:
        opened.tab.close()
        stop()
