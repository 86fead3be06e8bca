"""An authenticator app in Debian Chromium: set up on the account page (the QR code shown,
the app's code typed back), then a password sign-in on another browser that asks for the
app's code. Screenshots go to test-artifacts/totp/."""

from __future__ import annotations

import time
from typing import Any

from identityctl.security import totp
from identityctl.services.directory import users as directory
from tests.conftest import Service
from tests.support.browser import PasskeyPage, needs_chromium, sign_in_with_password
from tests.support.origins import TEST_ORIGIN
from tests.test_account_page import AccountPage
from tests.test_flow_execution import PASSWORD

pytestmark = needs_chromium


def test_an_app_is_set_up_on_the_account_page_and_asked_for_at_the_next_password_sign_in(
        browser: Any, service: Service) -> None:
    from tests.test_account import Account

    me = Account(service)
    me.user = directory.set_password(me.user.id, PASSWORD, origin=TEST_ORIGIN)
    ui = AccountPage(browser, me)
    try:
        ui.open()
        app_part = ui.page.get_by_role("region", name="Authenticator app")
        app_part.get_by_role("button", name="Set up an authenticator app").click()
        qr = ui.page.get_by_role("img", name="QR code for your authenticator app")
        qr.wait_for()
        assert qr.get_attribute("src").startswith("data:image/svg+xml")
        secret = ui.page.locator("#totp-secret").inner_text()
        ui.shot("totp-setup")
        ui.page.get_by_label("Code from your authenticator app").fill(
            totp.code_at(secret, time.time()))
        ui.press("Turn on")
        ui.wait_for_status("Your authenticator app is set up.")
        assert ui.me.ok("GET", "/profile")["totpEnrolled"] is True
    finally:
        ui.tab.close()

    other = PasskeyPage(browser)  # another browser: no session, no passkey
    try:
        page = other.page
        page.goto(service.url("/account"))
        sign_in_with_password(page, me.user.username, PASSWORD)
        code = page.get_by_label("Code from your authenticator app")
        code.wait_for()
        assert code.get_attribute("autocomplete") == "one-time-code"
        assert "Lost your phone?" in page.locator("#notice").inner_text()
        other.screenshot("totp", "code-step")
        code.fill("000000" if totp.code_at(secret, time.time() + 30) != "000000" else "111111")
        page.get_by_role("button", name="Continue", exact=True).click()
        page.get_by_text("That code is not right").wait_for()
        page.get_by_label("Code from your authenticator app").fill(
            totp.code_at(secret, time.time() + 30))
        page.get_by_role("button", name="Continue", exact=True).click()
        page.locator("#username").filter(has_text=me.user.username).wait_for()
    finally:
        other.close()
