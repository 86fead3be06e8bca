"""Headless Debian Chromium with a CDP virtual authenticator, for the hosted pages.

Playwright drives the system's Chromium (``./scripts/test.sh`` installs it with apt); tests
that need it are skipped with the reason when it is missing. A virtual authenticator
(CDP ``WebAuthn.addVirtualAuthenticator``) answers the pages' passkey ceremonies; a passkey
the software authenticator enrolled over HTTP can be handed to it (``add_passkey``), so a
test can prepare a user fast and still sign in in the browser with a real signature.
"""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from tests.support.authenticator import StoredCredential

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed "
                                    "(./scripts/test.sh installs it with apt)")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]
PHONE = {"width": 390, "height": 844}
ARTIFACTS = Path(__file__).resolve().parent.parent.parent / "test-artifacts"
AXE = Path(__file__).resolve().parent.parent / "node" / "node_modules" / "axe-core" / "axe.min.js"
AXE_MISSING = "axe-core is not installed (./scripts/test.sh runs npm ci in tests/node)"


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless Chromium (Playwright's sync API: use it from this thread only)."""
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, headless=True,
                                          args=CHROMIUM_FLAGS)
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def another_chromium(browser: Any, *flags: str) -> Iterator[Any]:
    """A second Chromium from ``browser``'s Playwright (one per thread), with ``flags``
    besides the usual ones."""
    launched = browser.browser_type.launch(executable_path=CHROMIUM, headless=True,
                                           args=[*CHROMIUM_FLAGS, *flags])
    try:
        yield launched
    finally:
        launched.close()


class PasskeyPage:
    """A phone-sized page whose browser has a virtual platform authenticator."""

    def __init__(self, browser: Any, **context_options: Any) -> None:
        """``context_options``: Playwright's, e.g. ``locale="de-DE"`` (the browser's
        language, its Accept-Language) or another ``viewport``."""
        self.context = browser.new_context(**{"viewport": PHONE, **context_options})
        self.page = self.context.new_page()
        self.cdp = self.context.new_cdp_session(self.page)
        self.cdp.send("WebAuthn.enable", {"enableUI": False})
        self.authenticator_id = self.cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
            "protocol": "ctap2", "transport": "internal", "hasResidentKey": True,
            "hasUserVerification": True, "isUserVerified": True,
            "automaticPresenceSimulation": True}})["authenticatorId"]

    def add_passkey(self, credential: StoredCredential) -> None:
        """Give the authenticator a discoverable passkey the software authenticator made."""
        key = credential.private_key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption())
        self.cdp.send("WebAuthn.addCredential", {
            "authenticatorId": self.authenticator_id, "credential": {
                "credentialId": base64.b64encode(credential.credential_id).decode(),
                "isResidentCredential": True, "rpId": credential.rp_id,
                "privateKey": base64.b64encode(key).decode(),
                "userHandle": base64.b64encode(credential.user_handle).decode(),
                "signCount": credential.sign_count}})

    def screenshot(self, folder: str, name: str) -> None:
        (ARTIFACTS / folder).mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / folder / f"{name}.png"), full_page=True)

    def without_autofill(self) -> None:
        """From the next page on, the browser offers no passkey autofill (as one without
        conditional mediation): only a press signs in."""
        self.page.add_init_script(
            "PublicKeyCredential.isConditionalMediationAvailable = async () => false;")

    def close(self) -> None:
        self.context.close()


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's violations on ``page`` as drawn. The hosted pages' CSP allows no injected
    script: the page's context must bypass it (``bypass_csp=True``)."""
    page.evaluate(AXE.read_text())
    return page.evaluate("async () => (await axe.run(document, "
                         "{resultTypes: ['violations']})).violations")


def sign_in_with_password(page: Any, username: str, password: str) -> None:
    """The hosted page's way in with a password: the username, Continue (which finds no
    passkey for it here, or remembers the password), then the password."""
    page.get_by_label("Username").fill(username)
    page.get_by_role("button", name="Continue", exact=True).click()
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in", exact=True).click()


def not_now(page: Any) -> None:
    """A person without a passkey signed in another way: the page offers to create one
    (the automatic upgrade's visible step, docs/hosted-ui.md); they decline."""
    page.get_by_role("button", name="Not now", exact=True).click()
