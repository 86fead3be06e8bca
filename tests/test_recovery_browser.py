"""Recovery end to end in Debian Chromium with CDP virtual authenticators and a real SMTP
server: a person signs up (confirming their e-mail address), loses their phone, gets back
in by an e-mail code or a recovery code, creates a passkey on the new device and signs in
with it, and is told by e-mail; a new person joins through an invitation link without ever
having a password. Screenshots go to test-artifacts/recovery/.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from identityctl.services import catalog
from identityctl.services.accounts import recovery
from identityctl.services.context import ServiceContext
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator
from tests.support.browser import PasskeyPage, needs_chromium
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient
from tests.support.smtp import SmtpServer, code_in, text_of
from tests.test_hosted_ui import REDIRECT_URI, Browser

pytestmark = needs_chromium


@pytest.fixture
def shop(mailing: Service) -> dict[str, Any]:
    """A shop whose people sign up with a passkey only (and an e-mail address)."""
    document = catalog.applications.application_templates()["SPA"]
    document["inboundAuthConfig"][0]["config"]["redirectUris"] = [REDIRECT_URI]
    document.update(name="Shop", themeId=catalog.themes.list_themes()[0]["id"],
                    isRegistrationFlowEnabled=True,
                    registrationFlowId=catalog.flows.require_flow_by_handle(
                        "default-passkey-flow", "REGISTRATION")["id"])
    return catalog.applications.create_application(document, origin=TEST_ORIGIN)[0]


class Device:
    """One of the person's devices: its own browser and authenticator."""

    def __init__(self, browser: Any, service: Service, shop: dict[str, Any], name: str) -> None:
        self.tab = PasskeyPage(browser)
        self.ui = Browser(service, shop, self.tab, name)
        self.page = self.tab.page

    def shot(self, name: str) -> None:
        self.tab.screenshot("recovery", name)

    def recover(self) -> None:
        self.ui.authorize(scope="openid profile email")
        self.page.get_by_role("link", name="Lost your passkey or password?").click()
        self.page.get_by_label("Username or e-mail address").wait_for()


@pytest.fixture
def devices(browser: Any, mailing: Service, shop: dict[str, Any]) -> Iterator[list[Device]]:
    made: list[Device] = []

    def device(name: str) -> Device:
        made.append(Device(browser, mailing, shop, name))
        return made[-1]

    yield device  # type: ignore[misc]
    for each in made:
        each.tab.close()


def test_a_person_who_lost_their_phone_gets_back_in_by_e_mail_and_makes_a_new_passkey(
        devices: Any, smtp: SmtpServer) -> None:
    name = f"nora-{uuid.uuid4().hex[:6]}"
    address = f"{name}@example.com"

    phone = devices("phone")
    phone.ui.authorize(scope="openid profile email")
    phone.page.get_by_role("link", name="Create an account").click()
    phone.page.get_by_label("Username").fill(name)
    phone.page.get_by_label("Email").fill(address)
    phone.ui.click("Continue")  # the account and its passkey, then the code
    code_field = phone.page.get_by_label("Code from the e-mail")
    code_field.wait_for()
    # The code is needed to confirm (no "(optional)"); a wrong one keeps the sign-up's words.
    assert "(optional)" not in phone.page.locator("form#step").inner_text()
    code = code_in(smtp.mailbox.wait_for(address)[0])
    phone.page.get_by_label("Code from the e-mail").fill(f"{(int(code) + 1) % 10**6:06d}")
    phone.ui.click("Confirm")
    phone.page.get_by_role("alert").wait_for()
    assert f"We sent a code to {address}" in phone.page.locator("#notice").inner_text()
    phone.page.get_by_label("Code from the e-mail").fill(code)
    phone.shot("confirm-address")
    phone.ui.click("Confirm")
    signed_up = phone.ui.back_at_the_client()
    assert signed_up["email"] == address and signed_up["email_verified"] is True
    phone.tab.close()  # the phone, and its passkey, are gone

    laptop = devices("laptop")
    laptop.recover()
    laptop.shot("lost-passkey")
    laptop.page.get_by_label("Username or e-mail address").fill(address)
    laptop.ui.click("E-mail me a code")
    laptop.page.get_by_label("Code from the e-mail").wait_for()
    laptop.shot("code-sent")
    code = code_in(smtp.mailbox.wait_for(address, 2)[1])
    laptop.page.get_by_label("Code from the e-mail").fill(code)
    laptop.ui.click("Continue")
    laptop.ui.wait_for_step("Create a passkey")
    laptop.shot("new-passkey")
    laptop.ui.click("Create a passkey")
    recovered = laptop.ui.back_at_the_client()
    assert recovered["sub"] == signed_up["sub"]
    assert {"otp", "passkey"} <= set(recovered["amr"])

    notice = smtp.mailbox.wait_for(address, 3)[2]
    assert "was added to your account" in text_of(notice)

    laptop.ui.authorize(prompt="login")  # the new passkey, from the field's suggestions
    again = laptop.ui.back_at_the_client()
    assert again["sub"] == signed_up["sub"] and "passkey" in again["amr"]


def test_a_recovery_code_gets_a_person_back_in_without_e_mail(devices: Any,
                                                              mailing: Service) -> None:
    user = directory.create_user(username=f"otto-{uuid.uuid4().hex[:6]}", origin=TEST_ORIGIN)
    PasskeyClient(mailing).enrolled(user, SoftAuthenticator())  # on a phone now lost
    [code, *_] = recovery.new_recovery_codes(user.id, origin=RequestOrigin(actor="test"))

    laptop = devices("recovery-code")
    laptop.recover()
    laptop.page.get_by_label("Username or e-mail address").fill(user.username)
    laptop.page.get_by_label("Recovery code").fill(code.lower())
    laptop.ui.click("Use a recovery code")
    laptop.ui.wait_for_step("Create a passkey")
    laptop.ui.click("Create a passkey")
    assert laptop.ui.back_at_the_client()["sub"] == user.id
    assert recovery.recovery_codes_left(user.id) == 9


def test_an_invited_person_creates_their_first_passkey_and_signs_in(
        devices: Any, mailing: Service, smtp: SmtpServer) -> None:
    name = f"iris-{uuid.uuid4().hex[:6]}"
    user = directory.create_user(username=name, attributes={"email": f"{name}@example.com"},
                                 origin=TEST_ORIGIN)
    recovery.invite(ServiceContext.for_config(mailing.config), name, send_email=True,
                    origin=RequestOrigin(actor="test"))
    [invitation] = smtp.mailbox.wait_for(f"{name}@example.com")
    link = re.search(r"http\S+/account/enrol#[\w.-]+", text_of(invitation))
    assert link, text_of(invitation)

    device = devices("invited")
    device.page.goto(link.group(0))
    device.page.get_by_text(name).wait_for()
    device.shot("invitation")
    device.page.get_by_role("button", name="Create a passkey").click()
    device.page.locator("#done").wait_for()
    assert directory.require_user(user.id).password_hash is None

    device.ui.authorize()  # the passkey from the field's suggestions
    assert device.ui.back_at_the_client()["sub"] == user.id
