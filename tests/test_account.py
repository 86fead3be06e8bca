"""The person's own account API (/account/api), as the account page calls it.

The account page is the built-in public client `identityctl-account`; its access token
carries scope `account` and every call acts for the token's own user. Changing credentials
needs a recent sign-in (RFC 9470 step-up).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from identityctl.services.accounts.account import ACCOUNT_CLIENT_ID
from identityctl.services.accounts.email_codes import CODES_PER_HOUR
from identityctl.store import audit
from identityctl.store.directory import UserRecord
from tests.conftest import Service, deployment_with
from tests.support.authenticator import SoftAuthenticator
from tests.support.oauth import OAuthDriver, RegisteredClient, register_client
from tests.support.passkeys import PasskeyClient, assert_error
from tests.support.smtp import SmtpServer, code_in, text_of


class Account:
    """A person with a passkey and the account page's access token."""

    def __init__(self, service: Service,
                 authenticator: SoftAuthenticator | None = None) -> None:
        self.service, self.rp = service, OAuthDriver(service)
        self.passkeys = PasskeyClient(service)
        self.user: UserRecord = self.passkeys.new_user(
            email=f"me-{uuid.uuid4().hex[:8]}@example.com")
        self.authenticator = authenticator or SoftAuthenticator()
        self.passkeys.enrolled(self.user, self.authenticator)
        self.client = RegisteredClient(application_id="", client_id=ACCOUNT_CLIENT_ID,
                                       secret=None, redirect_uri=service.url("/account"),
                                       auth_method="none")
        self.token = self.sign_in(self.client, scope="openid profile email account")[
            "access_token"]

    def sign_in(self, client: RegisteredClient, **params: Any) -> dict[str, Any]:
        return self.rp.tokens(self.rp.authorization(
            client, person=(self.user, self.authenticator), **params))

    def call(self, method: str, path: str, body: Any = None, *,
             token: str | None = None) -> requests.Response:
        return self.service.http.request(
            method, self.service.url("/account/api" + path), json=body, timeout=30,
            headers={"Authorization": f"Bearer {token or self.token}"})

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        answer = self.call(method, path, body)
        assert answer.status_code in (200, 201, 202, 204), answer.text
        return answer.json() if answer.content else None


@pytest.fixture
def me(service: Service) -> Account:
    return Account(service)


def test_the_account_api_acts_for_the_tokens_own_user_only(me: Account) -> None:
    profile = me.ok("GET", "/profile")
    assert profile["id"] == me.user.id and profile["username"] == me.user.username
    assert me.call("GET", "/profile").headers["Cache-Control"] == "no-store"
    other = me.sign_in(register_client("SPA"), scope="openid")  # no account scope
    assert_error(me.call("GET", "/profile", token=other["access_token"]), 403,
                 "insufficient_scope")
    assert_error(me.service.http.get(me.service.url("/account/api/passkeys"), timeout=30),
                 401, "missing_token")
    stranger = Account(me.service)
    [theirs] = stranger.ok("GET", "/passkeys")["passkeys"]
    assert_error(me.call("DELETE", f"/passkeys/{theirs['credentialId']}"), 404,
                 "credential_not_found")


def test_passkeys_are_listed_renamed_added_and_deleted_but_never_the_last(me: Account) -> None:
    [only] = me.ok("GET", "/passkeys")["passkeys"]
    assert_error(me.call("DELETE", f"/passkeys/{only['credentialId']}"), 409, "last_credential")
    assert me.ok("PATCH", f"/passkeys/{only['credentialId']}", {"name": "Laptop"})[
        "name"] == "Laptop"

    started = me.ok("POST", "/passkeys/start", {})
    phone = SoftAuthenticator()
    made = phone.create(started["publicKeyCredentialCreationOptions"], origin=me.passkeys.origin)
    added = me.ok("POST", "/passkeys/finish", {"sessionToken": started["sessionToken"],
                                              "publicKeyCredential": made,
                                              "credentialName": "Phone"})
    assert added["CredentialName"] == "Phone"
    assert me.call("DELETE", f"/passkeys/{only['credentialId']}").status_code == 204
    assert [key["name"] for key in me.ok("GET", "/passkeys")["passkeys"]] == ["Phone"]
    assert {event["event"] for event in audit.events(user_id=me.user.id)} >= {
        "passkey.register", "passkey.rename", "passkey.delete"}


def test_another_device_adds_a_passkey_with_a_one_time_link(me: Account) -> None:
    link = me.ok("POST", "/passkeys/link", {})
    assert link["qrCode"].startswith("data:image/svg+xml")
    parts = urlsplit(link["url"])
    assert parts.path == "/account/enrol" and parts.fragment and not parts.query
    post = me.service.post
    started = post("/account/api/enrol/start", {"link": parts.fragment})
    assert started.status_code == 200, started.text
    assert started.json()["username"] == me.user.username
    assert_error(post("/account/api/enrol/start", {"link": parts.fragment}), 401, "link_used")
    other_device = SoftAuthenticator()
    made = other_device.create(started.json()["publicKeyCredentialCreationOptions"],
                               origin=me.passkeys.origin)
    finished = post("/account/api/enrol/finish", {
        "link": parts.fragment, "sessionToken": started.json()["sessionToken"],
        "publicKeyCredential": made})
    assert finished.status_code == 201, finished.text
    assert len(me.ok("GET", "/passkeys")["passkeys"]) == 2
    assert me.passkeys.sign_in(other_device, me.user.id).status_code == 200
    # A link is the person's own: another person's ceremony does not finish with it.
    stranger = Account(me.service)
    theirs = stranger.ok("POST", "/passkeys/start", {})
    assert_error(post("/account/api/enrol/finish", {
        "link": parts.fragment, "sessionToken": theirs["sessionToken"],
        "publicKeyCredential": SoftAuthenticator().create(
            theirs["publicKeyCredentialCreationOptions"], origin=me.passkeys.origin)}),
        403, "token_for_another_user")


def test_ending_a_session_makes_that_clients_refresh_fail(me: Account) -> None:
    app = register_client("SPA")
    tokens = me.sign_in(app, scope="openid")
    [session] = [entry for entry in me.ok("GET", "/sessions")["sessions"]
                 if entry["clientId"] == app.client_id]
    assert session["address"] == "127.0.0.1" and session["signedInAt"]
    assert me.call("DELETE", f"/sessions/{session['id']}").status_code == 204
    assert me.rp.refresh(app, tokens["refresh_token"]).json()["error"] == "invalid_grant"
    assert_error(me.call("DELETE", "/sessions/not-mine"), 404, "session_not_found")


def test_consents_are_listed_and_revoked(me: Account) -> None:
    app = register_client("SPA")
    tokens = me.sign_in(app, scope="openid profile")
    [consent] = [grant for grant in me.ok("GET", "/consents")["consents"]
                 if grant["clientId"] == app.client_id]
    assert consent["scopes"] == ["openid", "profile"]
    assert me.call("DELETE", "/consents", None).status_code == 400  # which one?
    revoked = me.service.http.delete(
        me.service.url("/account/api/consents"), params={"clientId": app.client_id},
        headers={"Authorization": f"Bearer {me.token}"}, timeout=30)
    assert revoked.status_code == 204, revoked.text
    assert me.rp.userinfo(tokens["access_token"]).status_code == 401


def test_the_password_is_set_with_the_policy(me: Account) -> None:
    assert_error(me.call("PUT", "/password", {"password": "short"}), 400, "weak_password")
    assert me.call("PUT", "/password", {"password": "a long enough passphrase"}
                   ).status_code == 204
    assert me.ok("GET", "/profile")["hasPassword"] is True


@pytest.fixture
def short_window(tmp_path: Path) -> Iterator[Service]:
    yield from deployment_with(tmp_path, {"enrolment_window = 300": "enrolment_window = 1"})


def test_changing_credentials_needs_a_recent_sign_in(short_window: Service) -> None:
    me = Account(short_window)
    time.sleep(1.5)
    for method, path, body in (("POST", "/passkeys/start", {}),
                               ("POST", "/passkeys/link", {}),
                               ("PUT", "/password", {"password": "a long enough passphrase"}),
                               ("POST", "/totp", {}), ("DELETE", "/totp", None)):
        refused = me.call(method, path, body)
        assert_error(refused, 401, "sign_in_too_old")
        assert refused.headers["WWW-Authenticate"] == (
            'Bearer error="insufficient_user_authentication", max_age=1')
    assert me.call("GET", "/passkeys").status_code == 200  # reading needs no fresh sign-in


def test_an_address_is_confirmed_and_changed_with_a_code_sent_there(mailing: Service,
                                                                     smtp: SmtpServer) -> None:
    """The person's own address is confirmed with a code sent there; a new one replaces it
    only once its code comes back, and the old address is told."""
    me = Account(mailing)
    address = me.user.attributes["email"]
    assert me.ok("GET", "/profile")["emailVerified"] is False
    assert me.ok("POST", "/email/code", {"address": address})["address"] == address
    code = code_in(smtp.mailbox.wait_for(address)[0])
    assert_error(me.call("POST", "/email/confirm", {"code": f"{(int(code) + 1) % 10 ** 6:06d}"}),
                 400, "email_code_invalid")
    assert me.ok("POST", "/email/confirm", {"code": code}) == {"address": address,
                                                               "emailVerified": True}
    assert me.ok("GET", "/profile")["emailVerified"] is True
    assert_error(me.call("POST", "/email/confirm", {"code": code}), 400, "email_code_not_sent")

    new = f"new-{uuid.uuid4().hex[:8]}@example.test"
    me.ok("POST", "/email/code", {"address": new})
    waiting = me.ok("GET", "/profile")
    assert waiting["attributes"]["email"] == address  # the old one stays until the code
    assert waiting["emailPending"]["address"] == new
    me.ok("POST", "/email/confirm", {"code": code_in(smtp.mailbox.wait_for(new)[0])})
    changed = me.ok("GET", "/profile")
    assert changed["attributes"]["email"] == new and changed["emailVerified"] is True
    assert changed["emailPending"] is None
    assert new in text_of(smtp.mailbox.wait_for(address, 2)[1])  # the old address is told
    assert {event["event"] for event in audit.events(user_id=me.user.id)} >= {
        "email.code_sent", "email.verified", "user.update"}

    assert_error(me.call("POST", "/email/code", {"address": "two@example.test, x@y.test"}),
                 400, "invalid_email")
    for count in range(CODES_PER_HOUR):  # so many codes an hour per person, then no more
        me.ok("POST", "/email/code", {"address": f"more-{count}@example.test"})
    assert_error(me.call("POST", "/email/code", {"address": "one-more@example.test"}), 429,
                 "too_many_codes")


def test_changing_the_address_needs_a_recent_sign_in_and_a_deployment_that_mails(
        short_window: Service) -> None:
    me = Account(short_window)
    assert_error(me.call("POST", "/email/code", {"address": me.user.attributes["email"]}),
                 400, "email_not_configured")
    time.sleep(1.5)
    assert_error(me.call("POST", "/email/code", {"address": "other@example.test"}), 401,
                 "sign_in_too_old")


def test_a_passkey_is_named_after_its_authenticator_and_renamed_within_the_length_rule(
        me: Account) -> None:
    started = me.ok("POST", "/passkeys/start", {})
    google = SoftAuthenticator(aaguid=uuid.UUID("ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4").bytes)
    made = google.create(started["publicKeyCredentialCreationOptions"], origin=me.passkeys.origin)
    added = me.service.http.post(
        me.service.url("/account/api/passkeys/finish"), timeout=30,
        json={"sessionToken": started["sessionToken"], "publicKeyCredential": made},
        headers={"Authorization": f"Bearer {me.token}", "Accept-Language": "de-DE"})
    assert added.status_code == 201, added.text
    assert added.json()["CredentialName"] == "Passkey im Google Password Manager"

    key = added.json()["CredentialID"]
    refused = me.call("PATCH", f"/passkeys/{key}", {"name": "x" * 200})
    assert_error(refused, 400, "invalid_field")
    assert "'name'" in refused.json()["description"] and "1 to 64" in refused.json()[
        "description"]
    assert_error(me.call("PATCH", f"/passkeys/{key}", {"name": "  "}), 400, "missing_field")
    assert me.ok("PATCH", f"/passkeys/{key}", {"name": "y" * 64})["name"] == "y" * 64


def test_consents_say_what_each_scope_allows(me: Account) -> None:
    app = register_client("SPA")
    me.sign_in(app, scope="openid email")
    [consent] = [grant for grant in me.ok("GET", "/consents")["consents"]
                 if grant["clientId"] == app.client_id]
    assert consent["scopeDescriptions"] == ["Know who you are (your account id)",
                                            "See your e-mail address"]
