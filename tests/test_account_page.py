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

from identityctl.store import sessions
from tests.conftest import Service, start_service
from tests.support.authenticator import SoftAuthenticator
from tests.support.browser import PasskeyPage, needs_chromium
from tests.support.oauth import register_client
from tests.support.passkeys import PasskeyClient
from tests.support.smtp import SmtpServer, code_in
from tests.test_account import Account

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

    def wait_for_status(self, text: str) -> Any:
        said = self.page.get_by_role("status").filter(has_text=text)
        said.wait_for()
        return said

    def below(self, said: Any, control: Any) -> float:
        """How far under ``control`` the feedback ``said`` begins (px)."""
        return said.bounding_box()["y"] - (control.bounding_box()["y"]
                                           + control.bounding_box()["height"])

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

    # Renaming: a dialog of the page's own look that says the rule before the try.
    ui.press("Rename", row=first)
    dialog = ui.page.get_by_role("dialog", name="Rename passkey")
    dialog.get_by_text("A name has 1 to 64 characters.").wait_for()
    dialog.get_by_label("New name").fill("x" * 200)
    dialog.get_by_role("button", name="Save").click()
    dialog.locator(".feedback.error").filter(has_text="1 to 64 characters").wait_for()
    ui.shot("rename-too-long")
    dialog.get_by_label("New name").fill("Work laptop")
    dialog.get_by_role("button", name="Save").click()
    ui.page.get_by_role("cell", name="Work laptop").wait_for()
    assert ui.page.get_by_role("dialog").count() == 0

    # The passkey used to sign in was on the person's phone, not this computer: this
    # browser's authenticator keeps none (it would refuse a second for the same account).
    ui.tab.cdp.send("WebAuthn.clearCredentials", {"authenticatorId": ui.tab.authenticator_id})
    ui.press("Add a passkey on this device")
    said = ui.wait_for_status("Passkey added.")
    assert ui.below(said, ui.page.get_by_role("button", name="Add a passkey on another "
                                                            "device")) < 40
    [_, added] = ui.passkey_names()
    assert added.startswith("Passkey from ")  # this authenticator does not say its make
    ui.shot("two-passkeys")
    # Again: the device's refusal replaces the prompt's text, nothing stale beside it.
    ui.press("Add a passkey on this device")
    refused = ui.page.locator("#feedback-passkeys.error")
    refused.wait_for()
    assert refused.inner_text() == "This device already has a passkey for your account."

    ui.page.once("dialog", lambda dialog: dialog.accept())
    ui.press("Delete", row="Work laptop")
    ui.wait_for_status("Passkey deleted.")
    [left] = ui.passkey_names()
    assert left != "Work laptop"

    ui.page.once("dialog", lambda dialog: dialog.accept())
    ui.press("Delete", row=left)  # no password either: the only way to sign in
    ui.page.locator("#feedback-passkeys.error").filter(has_text="only way to sign in").wait_for()
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
        onward = other.page.get_by_role("link", name="Go to your account")
        assert onward.get_attribute("href") == service.url("/account")
        # The link worked once; a used one says where a new one comes from.
        other.page.goto(link)
        other.page.get_by_role("alert").filter(
            has_text="the person who invited you").wait_for()
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

    ui.page.get_by_role("region", name="Signed in to").get_by_role("row").filter(
        has_text=name).get_by_role("button", name="Sign out").click()
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

    # Every device the person is signed in on, this one marked; the others end together.
    devices = ui.page.get_by_role("region", name="Where you are signed in")
    assert devices.get_by_role("row").filter(has_text="this device").count() == 1
    assert devices.locator("tbody tr").count() == 4  # this browser, three sign-ins outside it
    ui.shot("devices")
    ui.press("Sign out of all other devices")
    ui.wait_for_status("Signed out on every other device.")
    assert devices.locator("tbody tr").count() == 1
    ui.press("Sign out everywhere")
    ui.page.wait_for_url("**/oauth2/logout**")
    assert sessions.open_session_ids(me.user.id) == []


def test_a_password_is_set_with_the_rules_shown(account_page: AccountPage) -> None:
    ui = account_page
    ui.open()
    ui.page.get_by_label("New password").fill("short")
    ui.press("Set a password")
    refused = ui.page.locator("#feedback-password.error").filter(has_text="at least 8 characters")
    refused.wait_for()
    ui.page.get_by_label("New password").fill("a long enough passphrase")
    ui.press("Set a password")
    said = ui.wait_for_status("Password saved.")
    assert refused.count() == 0  # the next action cleared the refusal
    # Said by the control, at phone width.
    assert 0 <= ui.below(said, ui.page.get_by_role("button", name="Set a password")) < 40
    assert said.get_attribute("aria-live") == "polite"
    assert ui.me.ok("GET", "/profile")["hasPassword"] is True


def test_a_german_browser_reads_the_account_page_in_german(browser: Any,
                                                           service: Service) -> None:
    ui = AccountPage(browser, Account(service), locale="de-DE")
    try:
        ui.open()
        assert ui.page.locator("html").get_attribute("lang") == "de"
        assert ui.page.get_by_role("heading", level=1).inner_text() == "Ihr Konto"
        assert ui.page.get_by_role("button", name="Umbenennen").is_visible()
        # The account application has its German name; a new passkey is named in German.
        ui.page.get_by_role("region", name="Wo Sie angemeldet sind").get_by_role(
            "cell", name="Ihr Konto").first.wait_for()
        ui.tab.cdp.send("WebAuthn.clearCredentials",
                        {"authenticatorId": ui.tab.authenticator_id})
        ui.press("Passkey auf diesem Gerät hinzufügen")
        ui.wait_for_status("Passkey hinzugefügt.")
        assert ui.passkey_names()[1].startswith("Passkey vom ")
        ui.shot("german")
    finally:
        ui.tab.close()


def test_recovery_codes_are_made_and_shown_once(account_page: AccountPage) -> None:
    ui = account_page
    ui.open()
    ui.press("Make recovery codes")
    said = ui.wait_for_status("Recovery codes made.")
    assert "old ones" not in said.inner_text()  # there were none
    assert len(ui.page.locator("#recovery-codes li").all_inner_texts()) == 10
    ui.shot("recovery-codes")
    ui.page.reload()
    ui.page.locator("#username").wait_for()
    assert ui.page.locator("#recovery-codes li").count() == 0  # not shown again
    ui.page.get_by_text("You have 10 unused recovery codes.").wait_for()
    ui.press("Make new recovery codes")
    ui.wait_for_status("New recovery codes made; the old ones no longer work.")


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


def test_an_address_is_confirmed_and_changed_on_a_desktop_with_a_code(
        browser: Any, mailing: Service, smtp: SmtpServer) -> None:
    """Someone who signed up before e-mail was set up confirms their address from the
    account page, then changes it: the new one counts once its code comes back. At desktop
    width, where no table breaks a word."""
    me = Account(mailing)
    address = me.user.attributes["email"]
    ui = AccountPage(browser, me, viewport={"width": 1280, "height": 900})
    try:
        ui.open()
        email = ui.page.get_by_role("region", name="E-mail address")
        email.get_by_text("not confirmed").wait_for()
        ui.press("Confirm")
        ui.wait_for_status(f"We sent a code to {address}.")
        email.get_by_label("Code from the e-mail").fill(code_in(smtp.mailbox.wait_for(address)[0]))
        ui.press("Confirm address")
        ui.wait_for_status(f"{address} is confirmed.")
        assert email.locator(".tag").inner_text() == "confirmed"

        new = f"new-{me.user.id[:8]}@example.test"
        ui.press("Change address")
        email.get_by_label("New e-mail address").fill(new)
        ui.press("Send a code")
        ui.wait_for_status(f"We sent a code to {new}.")
        ui.page.reload()  # the code waits for the person, the old address still theirs
        ui.page.locator("#username").wait_for()
        assert email.locator("#email-address").inner_text() == address
        email.get_by_label("Code from the e-mail").fill(code_in(smtp.mailbox.wait_for(new)[0]))
        ui.press("Confirm address")
        ui.wait_for_status(f"{new} is confirmed.")
        assert email.locator("#email-address").inner_text() == new
        ui.shot("email-changed")

        # Headings, dates and addresses stay whole: each on one line.
        broken = ui.page.evaluate("""() => [...document.querySelectorAll(
            ".account th, .account .nowrap")].filter((cell) => {
              const range = document.createRange();
              range.selectNodeContents(cell);
              return cell.textContent.trim() && range.getClientRects().length > 1;
            }).map((cell) => cell.textContent)""")
        assert broken == []
    finally:
        ui.tab.close()
