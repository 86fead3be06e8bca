"""The admin API (/admin/api/v1): who may call it, and the people an admin looks after.

The console is the built-in public client `identityctl-admin`; its access token is for the
admin API's own audience (RFC 8707 `resource`), carries the admin scope, and is a person's
who holds the role `admin` and signed in with a passkey. Destructive calls need a recent
sign-in (RFC 9470 step-up), as the account API's credential changes do.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from identityctl.security.tokens import ACCESS_TOKEN_TYP
from identityctl.services.accounts.account import ACCOUNT_CLIENT_ID
from identityctl.services.admin.console import ADMIN_CLIENT_ID
from identityctl.services.directory import roles as roles_service
from identityctl.services.directory import users as directory_service
from identityctl.services.origin import RequestOrigin
from identityctl.services.tokens import TokenService
from identityctl.store import audit, db
from identityctl.store import recovery as recovery_store
from identityctl.store.directory import UserRecord
from tests.conftest import Service, deployment_with, pg_server_url, start_service
from tests.support.authenticator import SoftAuthenticator
from tests.support.oauth import OAuthDriver, RegisteredClient, query_of, register_client
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient, assert_error
from tests.support.postgres import empty_database
from tests.support.smtp import SmtpServer, text_of

API = "/admin/api/v1"


class Admin:
    """A person holding ``roles`` (the admin role unless told), with a passkey, signed in
    on the admin console: its access token."""

    def __init__(self, service: Service, *, roles: tuple[str, ...] = ("admin",)) -> None:
        self.service, self.rp = service, OAuthDriver(service)
        self.passkeys = PasskeyClient(service)
        self.user: UserRecord = self.passkeys.new_user(
            email=f"admin-{uuid.uuid4().hex[:8]}@example.com", given_name="Grace",
            family_name="Hopper")
        for role in roles:
            roles_service.grant_role(self.user.id, role, origin=RequestOrigin(actor="test"))
        self.authenticator = SoftAuthenticator()
        self.passkeys.enrolled(self.user, self.authenticator)
        self.console = RegisteredClient(application_id="", client_id=ADMIN_CLIENT_ID,
                                        secret=None, redirect_uri=service.url("/admin"),
                                        auth_method="none")
        self.token = self.sign_in(self.console, scope="openid profile admin",
                                  resource=service.config.admin_audience)["access_token"]

    def sign_in(self, client: RegisteredClient, **params: Any) -> dict[str, Any]:
        return self.rp.tokens(self.rp.authorization(
            client, person=(self.user, self.authenticator), **params))

    def call(self, method: str, path: str, body: Any = None, *, token: str | None = None,
             params: dict[str, Any] | None = None) -> requests.Response:
        return self.service.http.request(
            method, self.service.url(API + path), json=body, params=params, timeout=30,
            headers={"Authorization": f"Bearer {token or self.token}"})

    def ok(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        answer = self.call(method, path, body, params=params or None)
        assert answer.status_code in (200, 201, 204), answer.text
        return answer.json() if answer.content else None


@pytest.fixture
def service(tmp_path: Path, store_url: str) -> Iterator[Service]:
    """Every deployment here runs on SQLite and on PostgreSQL (when CI provides one): the
    search's keyset queries must find the same people on both."""
    running, stop = start_service(tmp_path, database_url=store_url)
    yield running
    stop()


@pytest.fixture
def admin(service: Service) -> Admin:
    return Admin(service)


def test_the_console_signs_in_as_a_passkey_admin_and_sees_who_it_is(admin: Admin) -> None:
    me = admin.ok("GET", "/me")
    assert me["id"] == admin.user.id and me["displayName"] == "Grace Hopper"
    assert me["actor"] == f"admin:{admin.user.id}" and "passkey" in me["amr"]
    assert me["stepUpUntil"] == me["authTime"] + admin.service.config.admin.step_up_seconds
    assert admin.call("GET", "/me").headers["Cache-Control"] == "no-store"
    assert "admin" in roles_service.require_role("admin").scopes


def test_only_a_token_for_the_admin_api_is_accepted(admin: Admin) -> None:
    service = admin.service
    assert_error(service.http.get(service.url(f"{API}/me"), timeout=30), 401, "missing_token")
    account = RegisteredClient(application_id="", client_id=ACCOUNT_CLIENT_ID, secret=None,
                               redirect_uri=service.url("/account"), auth_method="none")
    for_account = admin.sign_in(account, scope="openid account")["access_token"]
    assert_error(admin.call("GET", "/me", token=for_account), 401, "invalid_token")
    assert_error(admin.call("GET", "/me", token=admin.passkeys.admin_token()), 401,
                 "invalid_token")  # /mcp's (and the issuer's), as `identityctl token` mints
    # The admin API's audience without its scope: RFC 6750's insufficient_scope.
    refused = admin.call("GET", "/me", token=admin.sign_in(
        admin.console, scope="openid", resource=service.config.admin_audience)["access_token"])
    assert_error(refused, 403, "insufficient_scope")
    assert refused.headers["WWW-Authenticate"] == \
        'Bearer error="insufficient_scope", scope="admin"'


def test_a_person_without_the_admin_role_gets_a_plain_refusal(service: Service) -> None:
    rp = OAuthDriver(service)
    console = RegisteredClient(application_id="", client_id=ADMIN_CLIENT_ID, secret=None,
                               redirect_uri=service.url("/admin"), auth_method="none")
    # A person holding no role carrying the scope is not granted it.
    link = rp.gate_link(console, scope="openid admin", code_challenge="x" * 43,
                        code_challenge_method="S256", resource=service.config.admin_audience)
    _, assertion = rp.signed_in_user()
    refused = query_of(rp.callback(link["authId"], assertion).json()["redirect_uri"])
    assert refused["error"] == "access_denied"
    assert refused["error_description"] == "Your account holds no role that allows 'admin'. " \
        "Ask an administrator to give you one."
    # And an admin whose role was taken away is refused at once, not when the token expires.
    former, successor = Admin(service), Admin(service)
    assert successor.user.id != former.user.id  # never the last administrator
    roles_service.revoke_role(former.user.id, "admin", origin=RequestOrigin(actor="test"))
    body = assert_error(former.call("GET", "/users"), 403, "not_an_admin")
    assert body["description"] == "You do not hold the admin role; ask an administrator for it."


def console_token(admin: Admin, *, amr: list[str], signed_in_ago: float = 0) -> str:
    """A console token for ``admin``, signed with the deployment's key as a sign-in
    ``signed_in_ago`` seconds ago by ``amr`` (RFC 8176) would make it."""
    config = admin.service.config
    return TokenService(config.issuer).sign(
        {"sub": admin.user.id, "aud": config.admin_audience, "client_id": ADMIN_CLIENT_ID,
         "scope": "openid admin", "auth_time": int(time.time() - signed_in_ago), "amr": amr},
        typ=ACCESS_TOKEN_TYP, ttl=60)


def test_a_sign_in_without_our_own_passkey_is_refused(admin: Admin) -> None:
    """A password is no passkey; nor is an upstream provider's word that its user held a key
    (``hwk``, ``swk``: an authenticator app's push is one), which is not ours to vouch for
    and which its silent single sign-on would give without anyone present."""
    directory_service.set_password(admin.user.id, "a long enough passphrase",
                                   origin=RequestOrigin(actor="test"))
    for amr in (["pwd"], ["hwk"], ["swk"], ["fed", "hwk"]):
        refused = admin.call("GET", "/me", token=console_token(admin, amr=amr))
        assert_error(refused, 403, "passkey_required")


def test_a_disabled_admins_token_is_refused(admin: Admin) -> None:
    Admin(admin.service)  # another administrator: the last one cannot be disabled
    directory_service.set_status(admin.user.id, "disabled", origin=RequestOrigin(actor="test"))
    assert_error(admin.call("GET", "/users"), 401, "user_inactive")


def test_people_are_found_by_username_or_address_prefix_or_id_a_page_at_a_time(
        admin: Admin) -> None:
    for number in range(5):
        directory_service.create_user(username=f"zed{number}",
                                      attributes={"email": f"Z{number}@Example.com"},
                                      origin=TEST_ORIGIN)
    directory_service.create_user(username="yolanda", attributes={"email": "zed@example.org"},
                                  origin=TEST_ORIGIN)
    first = admin.ok("GET", "/users", q="ZED", limit="2")
    assert [item["username"] for item in first["items"]] == ["zed0", "zed1"]
    pages = [first]
    while pages[-1]["next"]:
        pages.append(admin.ok("GET", "/users", q="ZED", limit="2",
                              cursor=pages[-1]["next"]))
    assert [item["username"] for page in pages for item in page["items"]] == [
        "zed0", "zed1", "zed2", "zed3", "zed4", "yolanda"]  # usernames, then addresses
    [found] = admin.ok("GET", "/users", q="z3@example")["items"]
    assert found == {"id": found["id"], "username": "zed3", "email": "Z3@example.com",
                     "emailVerified": False, "userType": "person", "ou": "default",
                     "state": "active", "createdAt": found["createdAt"], "passkeys": 0}
    assert admin.ok("GET", "/users", q=found["id"])["items"] == [found]
    assert_error(admin.call("GET", "/users", params={"limit": "500"}), 400, "invalid_field")
    assert_error(admin.call("GET", "/users", params={"cursor": "bm90IG1pbmU"}), 400,
                 "invalid_field")


def found_by_prefixes(admin: Admin) -> None:
    """A prefix's people are found by comparing keys bytewise: a prefix ending in ``z`` or
    ``9``, or in ``_``, is a range whose end (``{``, ``:``, a backquote) a language's
    collation sorts before letters and digits, and after ``-`` and ``.``."""
    for username in ("liz", "lizzy", "bob-x", "bob.x", "bob_x", "user90"):
        directory_service.create_user(username=username,
                                      attributes={"email": f"{username}@example.com"},
                                      origin=TEST_ORIGIN)
    for prefix, usernames in (("liz", ["liz", "lizzy"]), ("bob_", ["bob_x"]),
                              ("user9", ["user90"]), ("bob", ["bob-x", "bob.x", "bob_x"])):
        page = admin.ok("GET", "/users", q=prefix)
        assert [item["username"] for item in page["items"]] == usernames, prefix


def test_a_prefix_ending_in_any_character_finds_just_its_people(admin: Admin) -> None:
    found_by_prefixes(admin)


@pytest.mark.postgres
def test_a_prefix_is_found_alike_in_a_database_with_a_languages_collation(
        tmp_path: Path) -> None:
    server_url = pg_server_url()
    with empty_database(server_url, prefix="identityctl_icu", options=(
            "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'und' LOCALE 'C.UTF-8'")) as url:
        running, stop = start_service(tmp_path, database_url=url)
        try:
            found_by_prefixes(Admin(running))
        finally:
            stop()


def test_a_persons_page_shows_passkeys_sessions_consents_and_recent_events(
        admin: Admin) -> None:
    app = register_client("SPA")
    admin.sign_in(app, scope="openid profile")
    person = admin.ok("GET", f"/users/{admin.user.id}")
    assert person["roles"] == ["admin"] and person["attributes"]["given_name"] == "Grace"
    [passkey] = person["passkeys"]
    assert set(passkey) == {"id", "name", "authenticator", "icon", "iconDark", "createdAt",
                            "lastUsedAt"}
    assert person["passkeys"] and person["sessions"][0]["address"] == "127.0.0.1"
    assert {consent["clientId"] for consent in person["consents"]} >= {app.client_id}
    assert "passkey.register" in {event["event"] for event in person["recentEvents"]}
    assert_error(admin.call("GET", "/users/nobody"), 404, "user_not_found")


def test_an_admin_creates_invites_disables_and_enables_a_person(admin: Admin) -> None:
    made = admin.call("POST", "/users", {"username": "bob", "email": "bob@example.com"})
    assert made.status_code == 201, made.text
    bob = made.json()
    assert bob["username"] == "bob" and bob["email"] == "bob@example.com"
    invited = admin.ok("POST", f"/users/{bob['id']}/invite", {"sendEmail": False})
    assert invited["link"].startswith(admin.service.url("/account/enrol#"))
    assert invited["qrSvg"].startswith("data:image/svg+xml")
    assert admin.ok("PATCH", f"/users/{bob['id']}", {"state": "disabled"})["state"] == "disabled"
    assert admin.ok("PATCH", f"/users/{bob['id']}", {"state": "active"})["state"] == "active"
    assert_error(admin.call("PATCH", f"/users/{bob['id']}", {"state": "gone"}), 400,
                 "invalid_field")
    assert_error(admin.call("POST", "/users", {"username": "Bob"}), 409, "username_taken")
    events = audit.events(user_id=bob["id"])
    assert {event["event"] for event in events} >= {"user.create", "user.invite",
                                                     "user.status"}
    assert {event["actor"] for event in events} == {f"admin:{admin.user.id}"}
    assert all(event["requestId"] for event in events)


def test_an_admin_changes_a_persons_type_unit_and_attributes_and_grants_roles(
        admin: Admin) -> None:
    directory_service.create_ou(handle="staff", name="Staff", origin=RequestOrigin(actor="test"))
    directory_service.create_user_type(name="employee", ou="staff",
                                       origin=RequestOrigin(actor="test"), schema={
        "email": {"type": "string"}, "badge": {"type": "number", "required": True}})
    roles_service.create_role(name="editors", scopes=["edit"], origin=RequestOrigin(actor="test"))
    bob = directory_service.create_user(username="bob", attributes={"email": "bob@example.com"},
                                        origin=TEST_ORIGIN)
    choices = admin.ok("GET", "/directory")
    assert {"name": "employee", "schema": {"email": {"type": "string"}, "badge": {
        "type": "number", "required": True}}} in choices["userTypes"]
    assert {"staff", "default"} <= set(choices["organizationUnits"])
    assert {"admin", "editors"} <= set(choices["roles"])

    # The new type's schema asks for a badge: refused by name, nothing changes.
    refused = admin.call("PATCH", f"/users/{bob.id}", {"userType": "employee"})
    assert_error(refused, 400, "invalid_field")
    assert "attributes.badge" in refused.json()["description"]
    assert directory_service.require_user(bob.id).user_type == "person"
    moved = admin.ok("PATCH", f"/users/{bob.id}", {
        "userType": "employee", "ou": "staff",
        "attributes": {"email": "bob@example.com", "badge": 7}})
    assert (moved["userType"], moved["ou"], moved["attributes"]["badge"]) == \
        ("employee", "staff", 7)
    assert_error(admin.call("PATCH", f"/users/{bob.id}", {"ou": "nowhere"}), 404,
                 "ou_not_found")
    assert_error(admin.call("PATCH", f"/users/{bob.id}", {"userType": "robot"}), 404,
                 "user_type_not_found")

    assert admin.call("PUT", f"/users/{bob.id}/roles/editors").status_code == 204
    assert admin.call("PUT", f"/users/{bob.id}/roles/editors").status_code == 204  # as before
    assert admin.ok("GET", f"/users/{bob.id}")["roles"] == ["editors"]
    assert_error(admin.call("PUT", f"/users/{bob.id}/roles/nobody"), 404, "role_not_found")
    assert admin.call("DELETE", f"/users/{bob.id}/roles/editors").status_code == 204
    assert_error(admin.call("DELETE", f"/users/{bob.id}/roles/editors"), 409, "role_not_held")
    assert admin.ok("GET", f"/users/{bob.id}")["roles"] == []
    events = audit.events(user_id=bob.id)
    assert {"user.update", "role.grant", "role.revoke"} <= {event["event"] for event in events}
    assert {event["actor"] for event in events if event["event"] != "user.create"} == \
        {f"admin:{admin.user.id}"}


def test_ending_a_persons_sessions_signs_them_out(admin: Admin) -> None:
    app = register_client("SPA")
    user, cookie, _ = admin.rp.session_sign_in(app)
    [session] = admin.ok("GET", f"/users/{user.id}")["sessions"]
    assert_error(admin.call("DELETE", f"/users/{user.id}/sessions/not-one"), 404,
                 "session_not_found")
    assert admin.call("DELETE", f"/users/{user.id}/sessions/{session['id']}").status_code == 204
    assert admin.ok("GET", f"/users/{user.id}")["sessions"] == []
    # The browser's cookie no longer signs it in: authorize sends it to the sign-in page.
    admin.rp.gate_link(app, session=cookie, code_challenge="x" * 43,
                       code_challenge_method="S256")
    # Every session at once: the admin's own here, so their console's token ends with it.
    assert admin.ok("DELETE", f"/users/{admin.user.id}/sessions") == {"ended": 1}
    assert_error(admin.call("GET", "/me"), 401, "invalid_token")


def test_deleting_a_person_and_resetting_passkeys_need_a_recent_sign_in(
        short_step_up: Service) -> None:
    admin, people = Admin(short_step_up), PasskeyClient(short_step_up)
    doomed, lost_laptop = people.new_user(), people.new_user()
    people.enrolled(lost_laptop, SoftAuthenticator())
    time.sleep(3.5)
    for method, path in (("DELETE", f"/users/{doomed.id}"),
                         ("DELETE", f"/users/{lost_laptop.id}/passkeys")):
        refused = admin.call(method, path)
        assert_error(refused, 401, "sign_in_too_old")
        assert refused.headers["WWW-Authenticate"] == \
            'Bearer error="insufficient_user_authentication", max_age=3'
    # Signing in again (the console re-authorizes with max_age=0) lets the change through.
    admin.token = admin.sign_in(admin.console, scope="openid admin", max_age="0",
                                resource=short_step_up.config.admin_audience)["access_token"]
    assert admin.call("DELETE", f"/users/{doomed.id}").status_code == 204
    assert admin.ok("DELETE", f"/users/{lost_laptop.id}/passkeys") == {"deleted": 1}
    assert admin.ok("GET", f"/users/{lost_laptop.id}")["passkeys"] == []


@pytest.fixture
def short_step_up(tmp_path: Path) -> Iterator[Service]:
    # Three seconds: a new sign-in and the change after it fit in them on a busy machine too.
    yield from deployment_with(tmp_path, {"step_up_seconds = 300": "step_up_seconds = 3"})


def test_changing_or_inviting_a_person_needs_a_recent_sign_in(admin: Admin) -> None:
    """A PATCH sets the address recovery mail goes to, or locks the person out; an
    invitation adds a passkey to their account: a console token whose sign-in is older
    than the step-up window does neither."""
    bob = directory_service.create_user(username="bob", attributes={"email": "bob@example.com"},
                                        origin=TEST_ORIGIN)
    stale = console_token(admin, amr=["passkey"],
                          signed_in_ago=admin.service.config.admin.step_up_seconds + 60)
    assert admin.call("GET", f"/users/{bob.id}", token=stale).status_code == 200
    for method, path, body in (
            ("PATCH", f"/users/{bob.id}", {"state": "disabled"}),
            ("PATCH", f"/users/{bob.id}", {"attributes": {"email": "mallory@example.com"}}),
            ("PATCH", f"/users/{bob.id}", {"ou": "default"}),
            ("PUT", f"/users/{bob.id}/roles/admin", None),
            ("DELETE", f"/users/{admin.user.id}/roles/admin", None),
            ("POST", f"/users/{bob.id}/invite", {"sendEmail": False})):
        refused = admin.call(method, path, body, token=stale)
        assert_error(refused, 401, "sign_in_too_old")
        assert 'error="insufficient_user_authentication"' in \
            refused.headers["WWW-Authenticate"]
    unchanged = directory_service.require_user(bob.id)
    assert unchanged.status == "active" and unchanged.attributes["email"] == "bob@example.com"
    assert audit.events(user_id=bob.id, event="user.invite") == []
    assert roles_service.roles_of(bob.id) == []


def test_an_administrators_invitation_is_never_handed_to_the_caller(admin: Admin) -> None:
    """A link shown to the caller would let one admin token (an application's, a console's)
    enrol a passkey on another administrator's account, and so become them."""
    other = Admin(admin.service)  # their address is not confirmed
    _, robot_token = automation(admin)
    for token in (robot_token, admin.token):
        for send_email in (False, True):
            refused = admin.call("POST", f"/users/{other.user.id}/invite",
                                 {"sendEmail": send_email}, token=token)
            assert_error(refused, 403, "admin_invite_by_email")
    assert audit.events(user_id=other.user.id, event="user.invite") == []


def test_an_administrators_invitation_goes_only_to_their_confirmed_address(
        mailing: Service, smtp: SmtpServer) -> None:
    admin, other = Admin(mailing), Admin(mailing)
    address = other.user.attributes["email"]
    with db.transaction():
        recovery_store.mark_verified(other.user.id, address)
    invited = admin.ok("POST", f"/users/{other.user.id}/invite", {"sendEmail": True})
    assert invited["link"] is None and invited["qrSvg"] is None
    assert invited["emailedTo"] == address
    [invitation] = smtp.mailbox.wait_for(address)
    assert mailing.url("/account/enrol#") in text_of(invitation)
    assert smtp.mailbox.to(admin.user.attributes["email"]) == []


def test_a_client_that_registered_itself_cannot_ask_for_the_admin_scope(
        open_registration: Service) -> None:
    """The admin scope is identityctl's own: no self-registered client may ask for it."""
    registered = open_registration.post("/oauth2/register", {
        "client_name": "Wants the console", "redirect_uris": ["http://127.0.0.1:8400/cb"],
        "scope": "openid admin"})
    assert (registered.status_code, registered.json()["code"]) == (400, "scope_not_allowed")


def automation(admin: Admin) -> tuple[RegisteredClient, str]:
    """An application granted the admin scope, and its client_credentials token for the
    admin API."""
    robot = register_client("M2M", scopes=["admin"])
    answered = admin.rp.client_post("/oauth2/token", robot, {
        "grant_type": "client_credentials", "scope": "admin",
        "resource": admin.service.config.admin_audience})
    assert answered.status_code == 200, answered.text
    return robot, answered.json()["access_token"]


def test_an_application_with_the_admin_scope_acts_for_itself_without_step_up(
        admin: Admin) -> None:
    robot, token = automation(admin)
    assert admin.call("GET", "/me", token=token).json()["actor"] == f"client:{robot.client_id}"
    doomed = PasskeyClient(admin.service).new_user()
    assert admin.call("DELETE", f"/users/{doomed.id}", token=token).status_code == 204
    assert audit.events(user_id=doomed.id, event="user.delete")[0]["actor"] == \
        f"client:{robot.client_id}"


def test_every_admin_route_is_in_the_served_openapi_document(service: Service) -> None:
    paths = service.get("/openapi.json").json()["paths"]
    for path in ("/me", "/users", "/users/{user_id}", "/users/{user_id}/invite",
                 "/users/{user_id}/sessions", "/users/{user_id}/sessions/{session_id}",
                 "/users/{user_id}/passkeys", "/users/{user_id}/roles/{role}", "/directory"):
        assert API + path in paths, path
