"""The device authorization grant (RFC 8628): a TV or a command-line tool, played by
openid-client (npm), shows a code; the person opens /device on their phone (Debian Chromium
with a CDP virtual authenticator), signs in with a passkey and approves, or denies; the
device's polling gets its tokens, or access_denied.

Every answer RFC 8628 §3.5 names is checked over HTTP: authorization_pending, slow_down,
expired_token, access_denied, and a device code used twice. User codes are short, without
look-alikes, and a person typing wrong ones is stopped after a few."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from identityctl.oauth.grants.device_code import (
    USER_CODE_ALPHABET,
    normalized_user_code,
    readable_user_code,
)
from identityctl.services import catalog
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from identityctl.store.models import DeviceAuthorization
from tests.conftest import Service, start_service
from tests.support.browser import PasskeyPage, needs_chromium
from tests.support.oauth import (
    OAuthDriver,
    RegisteredClient,
    assert_oauth_error,
    register_client,
)
from tests.support.openid_client import needs_openid_client, step
from tests.support.origins import TEST_ORIGIN
from tests.test_account import Account
from tests.test_oauth_server import allow_only

GRANT = "urn:ietf:params:oauth:grant-type:device_code"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    """Devices poll every second here (5 by default)."""
    running, stop = start_service(tmp_path, settings={
        "device_poll_interval = 5": "device_poll_interval = 1"})
    yield running
    stop()


def television() -> RegisteredClient:
    return register_client("SPA", grantTypes=[GRANT, "refresh_token"],
                           scopes=["openid", "profile"])


def start_device(service: Service, device: RegisteredClient, **form: str) -> Any:
    return OAuthDriver(service).client_post("/oauth2/device_authorization", device,
                                            {"scope": "openid profile", **form})


def poll(service: Service, device: RegisteredClient, device_code: str) -> Any:
    return OAuthDriver(service).client_post("/oauth2/token", device, {
        "grant_type": GRANT, "device_code": device_code})


class Polling(threading.Thread):
    """The device, polling with openid-client until it has an answer."""

    def __init__(self, service: Service, device: RegisteredClient,
                 authorization: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.service, self.device, self.authorization = service, device, authorization
        self.result: dict[str, Any] = {}

    def run(self) -> None:
        self.result = step(self.service.config.issuer, self.device.client_id, "device_poll",
                           authorization=self.authorization, seconds=90)


def started_and_polling(service: Service, device: RegisteredClient,
                        scope: str) -> tuple[dict[str, Any], Polling]:
    """openid-client starts the device's sign-in and polls for it in a thread."""
    started = step(service.config.issuer, device.client_id, "device_start",
                   parameters={"scope": scope})
    assert "error" not in started, started
    polling = Polling(service, device, started)
    polling.start()
    return started, polling


class Phone:
    """The person's phone: their passkey in Chromium, on the page the device's QR code
    names."""

    def __init__(self, browser: Any, person: Account) -> None:
        self.tab = PasskeyPage(browser)
        self.tab.add_passkey(person.authenticator.credentials[0])
        self.page = self.tab.page

    def open(self, url: str) -> None:
        self.page.goto(url)

    def shot(self, name: str) -> None:
        self.tab.screenshot("device", name)


@pytest.fixture
def phone(browser: Any, service: Service) -> Iterator[tuple[Phone, Account]]:
    person = Account(service)
    opened = Phone(browser, person)
    yield opened, person
    opened.tab.close()


@needs_chromium
@needs_openid_client
def test_a_tv_signs_in_when_the_person_approves_on_their_phone(
        service: Service, phone: tuple[Phone, Account]) -> None:
    device, (handset, person) = television(), phone
    started, polling = started_and_polling(service, device, "openid profile")
    assert started["verification_uri"] == service.config.base_url + "/device"
    assert started["verification_uri_complete"].endswith(f"?user_code={started['user_code']}")

    handset.open(started["verification_uri_complete"])  # what the QR code carries
    code_field = handset.page.get_by_label("Code shown on your device")
    assert code_field.input_value() == started["user_code"]
    handset.shot("code")
    handset.page.get_by_role("button", name="Continue").click()
    name = catalog.applications.require_application(device.client_id)["name"]
    question = handset.page.get_by_text(f"Sign in to {name} on your device?")
    question.wait_for()  # signed in with the passkey on the way
    assert handset.page.get_by_text(f"Signed in as {person.user.username}").is_visible()
    assert handset.page.get_by_text(started["user_code"], exact=False).count() == 1
    handset.shot("question")
    handset.page.get_by_role("button", name="Allow").click()
    handset.page.get_by_text("is signed in on your device").wait_for()
    handset.shot("done")

    polling.join(timeout=90)
    tokens = polling.result
    assert "error" not in tokens, tokens
    claims = jwt.decode(tokens["access_token"], options={"verify_signature": False})
    assert claims["sub"] == person.user.id and claims["client_id"] == device.client_id
    assert tokens["claims"]["sub"] == person.user.id and tokens["refresh_token"]


@needs_chromium
@needs_openid_client
def test_a_denial_on_the_phone_is_access_denied_on_the_tv(
        service: Service, phone: tuple[Phone, Account]) -> None:
    device, (handset, _) = television(), phone
    started, polling = started_and_polling(service, device, "openid")
    handset.open(service.config.base_url + "/device")  # typed, not scanned
    code_field = handset.page.get_by_label("Code shown on your device")
    code_field.fill("BBBB-BBBB")  # a typo first
    handset.page.get_by_role("button", name="Continue").click()
    handset.page.get_by_role("alert").filter(has_text="That code is not valid").wait_for()
    assert "user_code" not in handset.page.get_by_role("alert").inner_text()  # plain words
    handset.shot("wrong-code")
    handset.page.get_by_label("Code shown on your device").fill(
        started["user_code"].lower().replace("-", " "))  # as people type it
    handset.page.get_by_role("button", name="Continue").click()
    handset.page.get_by_role("button", name="Deny").click()
    handset.page.get_by_text("The device was not signed in").wait_for()
    polling.join(timeout=90)
    assert polling.result["error"]["error"] == "access_denied", polling.result


def test_each_poll_answer_of_rfc_8628(service: Service) -> None:
    device = television()
    started = start_device(service, device).json()
    assert set(started) == {"device_code", "user_code", "verification_uri",
                            "verification_uri_complete", "expires_in", "interval"}
    assert started["interval"] == 1 and started["expires_in"] == 600  # whole seconds
    code = started["device_code"]
    assert_oauth_error(poll(service, device, code), 400, "authorization_pending")
    assert_oauth_error(poll(service, device, code), 400, "slow_down")  # at once again
    time.sleep(1.1)  # the interval is 6 s now: still too soon
    assert_oauth_error(poll(service, device, code), 400, "slow_down")
    assert_oauth_error(poll(service, device, "no-such-code"), 400, "invalid_grant",
                       "device_code_invalid")
    assert_oauth_error(poll(service, television(), code), 400, "invalid_grant",
                       "device_code_invalid")  # another device's code

    person = Account(service)
    asked = person.ok("GET", f"/device?userCode={started['user_code']}")
    assert asked["signedInAs"] == person.user.username  # the page says who answers
    assert person.ok("POST", "/device", {"userCode": started["user_code"],
                                         "decision": "allow"}) == {"approved": True}
    issued = poll(service, device, code)
    assert issued.status_code == 200, issued.text
    assert_oauth_error(poll(service, device, code), 400, "invalid_grant", "device_code_used")
    assert person.call("POST", "/device", {"userCode": started["user_code"],
                                           "decision": "deny"}).status_code == 400

    late = start_device(service, device).json()
    DeviceAuthorization.update(expires_at=time.time() - 1).where(
        DeviceAuthorization.user_code == normalized_user_code(late["user_code"])).execute()
    assert_oauth_error(poll(service, device, late["device_code"]), 400, "expired_token")


def test_a_client_needs_the_grant_and_the_scope(service: Service) -> None:
    assert_oauth_error(start_device(service, register_client("SPA")), 400,
                       "unauthorized_client", "grant_not_allowed")
    assert_oauth_error(start_device(service, television(), scope="openid admin"), 400,
                       "invalid_scope", "scope_not_allowed")


def test_a_person_without_the_role_cannot_approve(service: Service) -> None:
    from identityctl.services.directory import roles

    roles.create_role(name="tv-admin", scopes=["tv:admin"], origin=TEST_ORIGIN)
    device = register_client("SPA", grantTypes=[GRANT], scopes=["openid", "tv:admin"])
    started = start_device(service, device, scope="openid tv:admin").json()
    answered = Account(service).ok("POST", "/device", {"userCode": started["user_code"],
                                                       "decision": "allow"})
    assert answered["approved"] is False and "role" in answered["reason"]
    assert_oauth_error(poll(service, device, started["device_code"]), 400, "access_denied")


def test_a_person_whose_type_the_application_no_longer_allows_gets_no_tokens(
        service: Service) -> None:
    """services.directory.may_use at the poll too: an approval given while the person's
    type was allowed issues nothing once the application no longer allows it."""
    device = television()
    started = start_device(service, device).json()
    assert Account(service).ok("POST", "/device", {"userCode": started["user_code"],
                                                   "decision": "allow"}) == {"approved": True}
    directory.create_user_type(name="contractor", origin=RequestOrigin(actor="test"))
    allow_only(device, "contractor")
    assert_oauth_error(poll(service, device, started["device_code"]), 400, "invalid_grant",
                       "user_type_not_allowed")


def test_wrong_codes_are_stopped_after_a_few(service: Service) -> None:
    person = Account(service)
    limit = service.config.security.max_failures_per_account
    for _ in range(limit):
        wrong = person.call("GET", "/device?userCode=BCDF-GHJK")
        assert wrong.status_code == 400 and wrong.json()["code"] == "user_code_invalid"
    stopped = person.call("GET", "/device?userCode=BCDF-GHJK")
    assert stopped.status_code == 429 and stopped.json()["code"] == "too_many_attempts"


def test_user_codes_are_short_and_without_look_alikes() -> None:
    assert not set(USER_CODE_ALPHABET) & set("AEIOUY01")  # no words, no O/0 or I/1
    assert readable_user_code("BCDFGHJK") == "BCDF-GHJK"
    assert normalized_user_code("bcdf ghjk") == normalized_user_code("BCDF-GHJK") == "BCDFGHJK"
    for typo in ("BCDF-GHJ", "BCDF-GHJKL", "BCDF-GH0K", "", None, 12345678):
        assert normalized_user_code(typo) is None


def test_discovery_offers_the_device_grant(service: Service) -> None:
    metadata = service.get("/.well-known/openid-configuration").json()
    assert metadata["device_authorization_endpoint"] == \
        service.config.base_url + "/oauth2/device_authorization"
    assert GRANT in metadata["grant_types_supported"]


def test_an_older_deployment_gains_the_device_page_and_keeps_its_changes(
        service: Service) -> None:
    from identityctl.services.admin import bootstrap

    account = catalog.applications.require_application_by_client_id("identityctl-account")
    settings = catalog.applications.oauth_config(account)
    own = "https://intranet.example/account-callback"  # an admin's addition
    catalog.applications.update_application({
        **account, "inboundAuthConfig": [{"type": "oauth2", "config": {
        **settings, "redirectUris": [service.url("/account"), own]}}]}, origin=TEST_ORIGIN)
    assert bootstrap.seed(service.config) == [
        "application 'identityctl-account' (its new redirect URIs)"]
    assert catalog.applications.oauth_config(catalog.applications.require_application_by_client_id(
        "identityctl-account"))["redirectUris"] == [service.url("/account"), own,
                                                    service.url("/device")]
    assert bootstrap.seed(service.config) == []


@needs_chromium
def test_the_device_page_speaks_german_to_a_german_phone(browser: Any,
                                                         service: Service) -> None:
    tab = PasskeyPage(browser, locale="de-DE")
    try:
        tab.page.goto(service.url("/device?user_code=BCDF-GHJK"))
        assert tab.page.get_by_label("Code, den Ihr Gerät anzeigt").input_value() == \
            "BCDF-GHJK"
        tab.page.get_by_role("heading", name="Auf einem Gerät anmelden").wait_for()
        tab.screenshot("device", "code-de")
    finally:
        tab.close()
