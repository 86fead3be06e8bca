"""The passkey lifecycle in Debian Chromium (WebAuthn Level 3), with a CDP virtual
authenticator, a real SMTP server and the real service: the automatic upgrade to a passkey
after a password sign-in, the Signal API calls of the hosted and account pages (observed by
wrapping the browser's own functions, which still run), and a related origin signing in
with the rp_id's passkey. Screenshots go to test-artifacts/passkey-lifecycle/."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests

from identityctl.services import catalog
from identityctl.store import passkeys as passkey_store
from tests.conftest import QUICK_DELIVERIES, Service, free_port, start_service
from tests.support.authenticator import SoftAuthenticator
from tests.support.browser import (
    PasskeyPage,
    another_chromium,
    needs_chromium,
    sign_in_with_password,
)
from tests.support.https import Answer, https_publisher
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient
from tests.support.smtp import SmtpServer, text_of
from tests.test_hosted_ui import REDIRECT_URI, Browser
from tests.test_recovery import PASSWORD, new_person

pytestmark = needs_chromium

#: Records, through a binding of the test, what the page asks of WebAuthn: each create's
#: mediation and each Signal API call's options. The browser's functions still run.
OBSERVER = """
(() => {
  const record = (name, options) => window.recordWebAuthn(name, options);
  if (typeof window.PublicKeyCredential === "function") {
    for (const name of ["signalUnknownCredential", "signalAllAcceptedCredentials",
                        "signalCurrentUserDetails"]) {
      const original = PublicKeyCredential[name];
      if (typeof original !== "function") continue;
      PublicKeyCredential[name] = (options) => {
        record(name, options);
        return original.call(PublicKeyCredential, options);
      };
    }
  }
  if (navigator.credentials) {
    const create = navigator.credentials.create.bind(navigator.credentials);
    navigator.credentials.create = (options) => {
      record("create", { mediation: options.mediation || "required" });
      return create(options);
    };
  }
})();
"""


@pytest.fixture
def shop(mailing: Service) -> dict[str, Any]:
    document = catalog.applications.application_templates()["SPA"]
    document["inboundAuthConfig"][0]["config"]["redirectUris"] = [REDIRECT_URI]
    document.pop("themeId", None)
    document.update(name="Lifecycle shop")
    return catalog.applications.create_application(document, origin=TEST_ORIGIN)[0]


def authenticator_credentials(tab: PasskeyPage) -> list[dict[str, Any]]:
    return tab.cdp.send("WebAuthn.getCredentials",
                        {"authenticatorId": tab.authenticator_id})["credentials"]


def dropped_by_the_authenticator(tab: PasskeyPage) -> bool:
    """Whether the authenticator comes to hold no passkey (it acts on a signal in its own
    time: asked again until it has, or a generous while has passed)."""
    for _ in range(100):
        if not authenticator_credentials(tab):
            return True
        tab.page.wait_for_timeout(100)
    return False


def observed(tab: PasskeyPage) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    tab.page.expose_function("recordWebAuthn", lambda name, options: calls.append(
        (name, options)))
    tab.page.add_init_script(OBSERVER)
    return calls


def test_a_password_sign_in_gets_a_passkey_and_the_devices_learn_what_the_service_forgot(
        browser: Any, mailing: Service, smtp: SmtpServer, shop: dict[str, Any]) -> None:
    person = new_person()
    tab = PasskeyPage(browser)
    calls = observed(tab)
    ui = Browser(mailing, shop, tab, "lifecycle")
    page = tab.page
    try:
        # 1. A password sign-in: the page asks for a passkey. Where the browser has
        # Conditional Create the password manager is asked first (this Chromium's virtual
        # authenticator is no password manager: it makes none), then the visible step.
        ui.authorize()
        sign_in_with_password(page, person.username, PASSWORD)
        page.get_by_role("button", name="Not now").wait_for()
        page.get_by_role("heading", name="Sign in faster next time").wait_for()
        # Past the opening step a reload (the language switcher) would lose the sign-in.
        assert page.locator("form.languages").is_hidden()
        tab.screenshot("passkey-lifecycle", "upgrade-offered")
        can_create_silently = page.evaluate(
            "async () => !!(PublicKeyCredential.getClientCapabilities &&"
            " (await PublicKeyCredential.getClientCapabilities()).conditionalCreate)")
        assert [options["mediation"] for name, options in calls if name == "create"] == (
            ["conditional"] if can_create_silently else [])
        ui.click("Create a passkey")
        claims = ui.back_at_the_client()
        assert claims["amr"] == ["pwd"]  # the sign-in was the password's
        [stored] = passkey_store.list_credentials(person.id)
        notice = smtp.mailbox.wait_for(person.attributes["email"])[0]
        assert stored.name in text_of(notice) and "when you signed in" in text_of(notice)

        # 2. The account page tells the browser which passkeys still count and the names.
        calls.clear()
        page.goto(mailing.url("/account"))
        page.locator("#username").filter(has_text=person.username).wait_for()
        page.get_by_role("cell", name=stored.name).wait_for()
        expected_user = {"rpId": "localhost", "userId": person.user_handle}
        assert ("signalAllAcceptedCredentials", {
            **expected_user, "allAcceptedCredentialIds": [stored.credential_id]}) in calls
        assert ("signalCurrentUserDetails", {**expected_user, "name": person.username,
                                             "displayName": person.username}) in calls

        # 3. Deleted here: the browser is told that none is accepted any more, and its
        # authenticator drops the passkey.
        [held] = authenticator_credentials(tab)
        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("row").filter(has_text=stored.name).get_by_role(
            "button", name="Delete").click()
        page.get_by_role("status").filter(has_text="Passkey deleted.").wait_for()
        assert ("signalAllAcceptedCredentials", {
            **expected_user, "allAcceptedCredentialIds": []}) in calls
        assert dropped_by_the_authenticator(tab)

        # 4. A device that still offers it (one that missed the signal): signing in with
        # it, the service does not know it, and the page tells the browser to forget it.
        tab.cdp.send("WebAuthn.clearCredentials", {"authenticatorId": tab.authenticator_id})
        tab.cdp.send("WebAuthn.addCredential", {"authenticatorId": tab.authenticator_id,
                                                "credential": held})
        calls.clear()
        ui.authorize(prompt="login")  # autofill: the authenticator answers with its passkey
        page.get_by_role("alert").filter(has_text="not registered here").wait_for()
        tab.screenshot("passkey-lifecycle", "unknown-passkey")
        assert ("signalUnknownCredential", {"rpId": "localhost",
                                            "credentialId": stored.credential_id}) in calls
    finally:
        tab.close()


# --- related origins ---------------------------------------------------------------------------


WELL_KNOWN = "/.well-known/webauthn"


@contextmanager
def rp_id_host(service_url: str, directory: Path) -> Iterator[list[str]]:
    """https://localhost (port 443), where a browser fetches the rp_id's
    /.well-known/webauthn: it forwards that path to the service and records each fetch."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", 443))
        except OSError as refused:
            pytest.skip(f"https://localhost needs port 443 on 127.0.0.1: {refused}")
    fetched: list[str] = []

    def forward() -> Answer:
        fetched.append(WELL_KNOWN)
        answer = requests.get(service_url + WELL_KNOWN, timeout=10)
        return answer.status_code, {name: answer.headers[name] for name in (
            "Content-Type", "Cache-Control")}, answer.content

    with https_publisher(directory, port=443) as publisher:
        publisher.routes[WELL_KNOWN] = forward
        yield fetched


#: A page of the other origin signing in with the rp_id's passkey, over the atomic API.
SIGN_IN = """
async () => {
  const post = (path, body) => fetch(path, { method: "POST", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json" } }).then((answer) => answer.json());
  const started = await post("/auth/passkey/start", { relyingPartyId: "localhost" });
  let credential;
  try {
    credential = await navigator.credentials.get({ publicKey:
      PublicKeyCredential.parseRequestOptionsFromJSON(
        started.publicKeyCredentialRequestOptions) });
  } catch (refused) {
    return { refused: refused.name };
  }
  return post("/auth/passkey/finish", { sessionToken: started.sessionToken,
    publicKeyCredential: credential.toJSON(), skipAssertion: true });
}
"""


def test_a_related_origin_signs_in_with_the_rp_ids_passkey(browser: Any,
                                                           tmp_path: Path) -> None:
    """rp_id localhost; the same service reached as http://a.localhost:PORT is a related
    origin, http://b.localhost:PORT is not. Chromium fetches https://localhost/.well-known/
    webauthn (the service's answer, forwarded) before it lets a.localhost use the passkey,
    and the service accepts the ceremony's origin because it is in related_origins."""
    port = free_port()
    related, unlisted = f"http://a.localhost:{port}", f"http://b.localhost:{port}"
    service, stop = start_service(tmp_path, port=port, settings={
        "related_origins = []": f'related_origins = ["{related}"]', **QUICK_DELIVERIES})
    try:
        passkeys = PasskeyClient(service)
        user, device = passkeys.new_user(), SoftAuthenticator()
        passkeys.enrolled(user, device)
        # The test's own CA is not the browser's: certificate errors are ignored (for the
        # browser's own fetch of /.well-known/webauthn too, which a context option is not).
        with rp_id_host(service.base_url, tmp_path) as fetched, \
                another_chromium(browser, "--ignore-certificate-errors") as trusting:
            tab = PasskeyPage(trusting, bypass_csp=True)
            tab.add_passkey(device.credentials[0])
            try:
                tab.page.goto(related + "/")
                signed_in = tab.page.evaluate(SIGN_IN)
                assert signed_in["id"] == user.id, signed_in
                assert WELL_KNOWN in fetched
                tab.page.goto(unlisted + "/")
                assert tab.page.evaluate(SIGN_IN) == {"refused": "SecurityError"}
            finally:
                tab.close()
    finally:
        stop()
