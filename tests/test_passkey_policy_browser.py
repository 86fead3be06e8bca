"""The account page in Debian Chromium under an allow list of authenticators: the person's
passkey is shown with its authenticator's icon, and a key the deployment does not allow
(the CDP virtual authenticator's) is refused with the reason in the person's language."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Service, deployment_with
from tests.support.authenticator import SoftAuthenticator
from tests.support.browser import needs_chromium
from tests.test_account import Account
from tests.test_account_page import AccountPage

pytestmark = needs_chromium

UNIQKEY = "45e3057e-b2f9-48ed-912f-9b901e153b16"


@pytest.fixture
def approved_keys_only(tmp_path: Path) -> Iterator[Service]:
    yield from deployment_with(tmp_path, {'attestation = "none"': 'attestation = "direct"',
                                          "aaguid_allow = []": f'aaguid_allow = ["{UNIQKEY}"]'})


def test_a_key_the_organisation_did_not_approve_is_refused_in_plain_german(
        browser: Any, approved_keys_only: Service) -> None:
    me = Account(approved_keys_only, SoftAuthenticator(
        attestation="packed", aaguid=bytes.fromhex(UNIQKEY.replace("-", ""))))
    ui = AccountPage(browser, me, locale="de-DE")
    try:
        ui.open()
        row = ui.page.get_by_role("row").filter(has_text="Uniqkey")
        icon = row.locator("img.authenticator-icon")
        icon.wait_for()
        assert icon.get_attribute("src") == approved_keys_only.url(
            f"/authenticators/{UNIQKEY}/icon")
        # Loaded as an image under the page's CSP: it has a size.
        assert icon.evaluate("img => img.complete && img.naturalWidth > 0")

        ui.tab.cdp.send("WebAuthn.clearCredentials",
                        {"authenticatorId": ui.tab.authenticator_id})
        ui.press("Passkey auf diesem Gerät hinzufügen")
        refused = ui.page.locator("#feedback-passkeys.error")
        refused.wait_for()
        assert refused.inner_text() == ("Dieser Sicherheitsschlüssel ist hier nicht "
                                        "zugelassen. Verwenden Sie einen der Schlüssel, die "
                                        "Ihre Organisation freigegeben hat.")
        assert len(me.ok("GET", "/passkeys")["passkeys"]) == 1
        ui.shot("authenticator-refused")
    finally:
        ui.tab.close()
