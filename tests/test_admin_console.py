"""The admin console (/admin) in Debian Chromium with a CDP virtual authenticator.

An admin with a passkey opens the console, signs in through the hosted page (the passkey
answers by itself, as on the account page), finds a person among 10,000 and ends their
session, creates an application and sees its secret once, and deletes it after a fresh
passkey sign-in (step-up). A person without the admin role gets a plain refusal. axe-core
scans the users page. Screenshots go to test-artifacts/admin/.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from identityctl import i18n
from identityctl.security.usernames import username_key
from identityctl.services import catalog
from identityctl.services.directory import roles, users
from identityctl.services.directory.users import DEFAULT_OU, DEFAULT_USER_TYPE
from identityctl.services.origin import RequestOrigin
from identityctl.store import audit, db, directory, sessions
from identityctl.store.models import User, new_id
from identityctl.ui import admin_page
from identityctl.ui.pages import PAGE_CSP
from tests.conftest import Service, deployment_with
from tests.support.browser import ARTIFACTS, PasskeyPage, needs_chromium
from tests.support.origins import TEST_ORIGIN
from tests.support.texts import STATIC, python_texts, script_texts
from tests.test_accessibility import AXE
from tests.test_account import Account
from tests.test_admin_api_users import Admin

#: The console's own scripts and the sign-in it shares with the account page.
CONSOLE_SCRIPTS = (*sorted(STATIC.glob("admin*.js")), STATIC / "client-page.js")
SEEDED = 10_000
#: The console's sign-in may be no older than this for a destructive change (step-up).
STEP_UP_SECONDS = 3


class Console:
    """The admin's browser, holding their passkey, on the console."""

    def __init__(self, browser: Any, admin: Admin, **context_options: Any) -> None:
        self.admin = admin
        self.tab = PasskeyPage(browser, **context_options)
        self.tab.add_passkey(admin.authenticator.credentials[0])
        self.page = self.tab.page
        self.refused_by_csp: list[str] = []
        self.page.on("console", lambda message: self.refused_by_csp.append(message.text)
                     if "Content Security Policy" in message.text else None)

    def open(self, fragment: str = "", *, heading: str | None = None) -> None:
        """Open the console at ``fragment``, signed in; then wait for the page titled
        ``heading`` when given."""
        self.page.goto(self.admin.service.url("/admin" + fragment))
        self.page.locator("#signed-in-as").filter(has_text="Grace Hopper").wait_for()
        if heading is not None:
            self.page.get_by_role("heading", level=1, name=heading).wait_for()

    def area(self, name: str) -> None:
        self.page.get_by_role("navigation").get_by_role("link", name=name).click()
        self.page.get_by_role("heading", level=1, name=name).wait_for()

    def wait_for_status(self, text: str) -> None:
        self.page.get_by_role("status").filter(has_text=text).wait_for()

    def shot(self, name: str) -> None:
        self.tab.screenshot("admin", name)

    def close(self) -> None:
        assert self.refused_by_csp == []
        self.tab.close()


def seed_users(count: int) -> None:
    """``count`` people named member-00000..., written in one statement per thousand (a
    directory the size of a team's, made in a second)."""
    person = directory.find_user_type(DEFAULT_USER_TYPE)
    unit = directory.find_ou(DEFAULT_OU)
    assert person and unit
    rows = []
    for number in range(count):
        name = f"member-{number:05d}"
        attributes = {"email": f"{name}@example.com"}
        rows.append({"id": new_id(), "username": name, "username_key": username_key(name),
                     "user_handle": secrets.token_urlsafe(32), "attributes": attributes,
                     "email_key": directory.email_key(attributes), "user_type": person["id"],
                     "ou": unit["id"]})
    with db.transaction():
        for start in range(0, count, 1000):
            User.insert_many(rows[start:start + 1000]).execute()


@pytest.fixture
def step_up_service(tmp_path: Path) -> Iterator[Service]:
    yield from deployment_with(tmp_path, {"step_up_seconds = 300":
                                          f"step_up_seconds = {STEP_UP_SECONDS}"})


def test_the_console_page_is_a_shell_under_the_hosted_pages_policy(service: Service) -> None:
    page = service.get("/admin", headers={"Accept-Language": "de"})
    assert page.status_code == 200
    assert page.headers["Content-Security-Policy"] == PAGE_CSP
    assert "frame-ancestors 'none'" in PAGE_CSP and "'unsafe-inline'" not in PAGE_CSP
    assert page.headers["Cache-Control"] == "no-store"
    # No script but from files of this origin; the one script element without a source is
    # the message catalog, a data block the CSP does not run.
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", page.text) == [
        '<script type="application/json" id="messages">']
    assert " style=" not in page.text and "<style" not in page.text
    assert 'href="#admin">Zum Inhalt springen</a>' in page.text  # the skip link, in German
    assert f'data-resource="{service.config.admin_audience}"' in page.text
    for name in ("client-page.js", "admin.js", "admin-users.js", "admin-records.js",
                 "admin.css"):
        assert service.get(f"/gate/static/{name}").status_code == 200


def test_every_text_of_the_console_is_in_german() -> None:
    texts = script_texts(CONSOLE_SCRIPTS) | python_texts([Path(admin_page.__file__)])
    assert sorted(texts - i18n.catalog("de").keys()) == []


@needs_chromium
def test_an_admin_finds_a_person_among_many_and_ends_their_session(
        browser: Any, service: Service) -> None:
    seed_users(SEEDED)
    person = Account(service)  # signed in on their account page: a live browser session
    assert sessions.open_session_ids(person.user.id)
    console = Console(browser, Admin(service))
    page = console.page
    console.open()
    page.get_by_role("heading", level=1, name="Users").wait_for()

    # Every member: 25 a page, Next and Previous by cursor.
    search = page.get_by_role("searchbox", name="Find a user")
    search.fill("member-")
    search.press("Enter")
    page.get_by_role("link", name="member-00000").wait_for()
    assert page.locator("tbody tr").count() == 25
    page.get_by_role("button", name="Next page").click()
    page.get_by_role("link", name="member-00025").wait_for()
    page.get_by_text("Page 2").wait_for()
    console.shot("users-page-2")
    page.get_by_role("button", name="Previous page").click()
    page.get_by_role("link", name="member-00000").wait_for()
    assert page.get_by_role("button", name="Previous page").is_disabled()

    # The one person, by their e-mail address, then their page.
    search.fill(person.user.attributes["email"])
    search.press("Enter")
    page.get_by_role("link", name=person.user.username).click()
    page.get_by_role("heading", level=1, name=person.user.username).wait_for()
    assert page.url.endswith(f"/admin#/users/{person.user.id}")
    details = page.get_by_role("region", name="Details")
    assert "not confirmed" in details.inner_text()
    sessions_part = page.get_by_role("region", name="Sessions")
    assert sessions_part.locator("tbody tr").count() == 1
    console.shot("user")
    sessions_part.get_by_role("button", name="End session").click()
    console.wait_for_status("ended.")
    assert sessions.open_session_ids(person.user.id) == []
    assert sessions_part.get_by_text("None.").is_visible()

    # The invitation: a one-time link the person opens on their device.
    page.get_by_role("button", name="Invite", exact=True).click()
    page.get_by_role("img", name="QR code of the link").wait_for()
    link = page.locator("#invitation-link").get_attribute("href")
    assert link and link.startswith(service.url("/account/enrol#"))
    console.shot("invited")
    console.close()


@needs_chromium
def test_an_application_shows_its_secret_once_and_is_deleted_after_a_step_up(
        browser: Any, step_up_service: Service) -> None:
    service = step_up_service
    console = Console(browser, Admin(service))
    page = console.page
    console.open("#/applications", heading="Applications")
    page.get_by_label("Name", exact=True).fill("Team wiki")
    page.get_by_label("Template").select_option("Server")
    page.get_by_label("Redirect URI").fill("https://wiki.example.com/callback")
    page.get_by_role("button", name="Create application").click()
    page.get_by_role("heading", name="Team wiki was created.").wait_for()
    secret = page.locator("#new-client-secret").inner_text()
    client_id = page.locator("#new-client-id").inner_text()
    [made] = [app for app in catalog.applications.list_applications()
              if app["name"] == "Team wiki"]
    assert catalog.applications.oauth_config(made)["clientId"] == client_id
    assert len(secret) >= 32 and secret not in json.dumps(made)
    console.shot("application-secret")
    # Shown once: the list, drawn anew, holds the application and never its secret.
    console.area("Users")
    console.area("Applications")
    row = page.get_by_role("row").filter(has_text="Team wiki")
    row.wait_for()
    assert secret not in page.content()

    # The sign-in is older than the step-up allows: deleting signs in again with the
    # passkey (max_age=0), then deletes.
    time.sleep(STEP_UP_SECONDS + 1)
    page.once("dialog", lambda dialog: dialog.accept())
    signed_in_again = []
    page.on("request", lambda request: signed_in_again.append(request.url)
            if "/oauth2/authorize" in request.url and "max_age=0" in request.url else None)
    row.get_by_role("button", name="Delete").click()
    console.wait_for_status("Team wiki was deleted.")
    assert signed_in_again
    assert page.url.endswith("/admin#/applications")
    assert [app for app in catalog.applications.list_applications()
            if app["name"] == "Team wiki"] == []
    console.close()


def fits_the_width(page: Any) -> bool:
    """Nothing on the page is wider than the window: no sideways scrolling on a phone."""
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@needs_chromium
def test_an_admin_edits_a_person_and_gives_and_takes_a_role_at_a_phones_width(
        browser: Any, service: Service) -> None:
    seed_users(60)
    users.create_ou(handle="staff", name="Staff", origin=RequestOrigin(actor="test"))
    users.create_user_type(name="employee", ou="staff", origin=RequestOrigin(actor="test"), schema={
        "email": {"type": "string"}, "badge": {"type": "number"}})
    roles.create_role(name="editors", scopes=["edit"], origin=RequestOrigin(actor="test"))
    bob = users.create_user(username="bob", attributes={"email": "bob@example.com"},
                            origin=TEST_ORIGIN)
    console = Console(browser, Admin(service))  # a phone's width
    page = console.page
    console.open()
    page.locator("tbody tr").first.wait_for()
    assert fits_the_width(page)
    page.goto(service.url(f"/admin#/users/{bob.id}"))
    page.get_by_role("heading", level=1, name="bob").wait_for()
    assert fits_the_width(page)

    page.get_by_text("Change the details").click()
    page.get_by_label("User type").select_option("employee")
    page.get_by_label("badge").fill("7")  # the new type's schema asks for it
    page.get_by_label("Organization unit").select_option("staff")
    page.get_by_role("button", name="Save changes").click()
    page.get_by_role("status").filter(has_text="The changes to bob were saved.").wait_for()
    moved = users.require_user(bob.id)
    assert (moved.user_type, moved.attributes) == ("employee", {"email": "bob@example.com",
                                                               "badge": 7})
    assert directory.find_ou("staff")["id"] == moved.ou_id
    console.shot("user-edited")

    part = page.get_by_role("region", name="Roles")
    part.get_by_label("Give a role").select_option("editors")
    part.get_by_role("button", name="Give", exact=True).click()
    console.wait_for_status("bob now holds the role editors.")
    assert [role.name for role in roles.roles_of(bob.id)] == ["editors"]
    assert fits_the_width(page)
    part.get_by_role("button", name="Take away").click()
    console.wait_for_status("bob no longer holds the role editors.")
    assert roles.roles_of(bob.id) == []
    console.close()


@needs_chromium
def test_an_application_is_edited_and_gets_a_new_secret_shown_once(
        browser: Any, service: Service) -> None:
    server = catalog.applications.application_templates()["Server"] | {"name": "Team wiki"}
    server.pop("themeId")  # the default theme
    server["inboundAuthConfig"][0]["config"]["redirectUris"] = ["https://wiki.example.com/callback"]
    made, _ = catalog.applications.create_application(server, origin=RequestOrigin(actor="test"))
    console = Console(browser, Admin(service))  # a phone's width
    page = console.page
    console.open("#/applications")
    page.get_by_role("link", name="Team wiki").click()
    page.get_by_role("heading", level=1, name="Team wiki").wait_for()
    assert fits_the_width(page)

    uris = page.get_by_label("Redirect URIs")
    uris.fill("not a uri")
    page.get_by_role("button", name="Save changes").click()
    page.locator("#feedback-application.error, .feedback.error").first.wait_for()
    assert catalog.applications.oauth_config(catalog.applications.require_application(
        made["id"]))["redirectUris"] == ["https://wiki.example.com/callback"]
    uris.fill("https://wiki.example.com/callback\nhttps://wiki.example.com/again")
    page.get_by_label("Scopes").fill("openid profile email")
    page.get_by_label("Passkeys only").check()
    page.get_by_role("button", name="Save changes").click()
    console.wait_for_status("The changes to Team wiki were saved.")
    assert catalog.applications.require_application(made["id"])["passkeysOnly"] is True
    saved = catalog.applications.oauth_config(catalog.applications.require_application(
        made["id"]))
    assert saved["redirectUris"] == ["https://wiki.example.com/callback",
                                     "https://wiki.example.com/again"]
    assert saved["scopes"] == ["openid", "profile", "email"]

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Make a new secret").click()
    page.get_by_role("heading", name="Team wiki has a new secret.").wait_for()
    secret = page.locator("#new-client-secret").inner_text()
    assert len(secret) >= 32
    assert audit.events(event="application.secret_rotated", limit=1)[0]["actor"] == \
        f"admin:{console.admin.user.id}"
    console.shot("application-edited")
    console.area("Applications")
    page.get_by_role("link", name="Team wiki").wait_for()
    assert fits_the_width(page) and secret not in page.content()
    console.close()


@needs_chromium
def test_a_configuration_document_is_planned_as_a_diff_and_applied(
        browser: Any, service: Service) -> None:
    console = Console(browser, Admin(service))
    page = console.page
    console.open("#/configuration", heading="Configuration")
    with page.expect_download() as exported:
        page.get_by_role("button", name="Download as YAML").click()
    text = Path(exported.value.path()).read_text()
    assert text.startswith("apiVersion: identityctl/v1")
    changed = text.replace("roles:\n", "roles:\n- name: auditors\n  scopes: [audit]\n", 1)
    page.get_by_label("Or paste the document").fill(changed)
    page.get_by_role("button", name="Show what would change").click()
    plan = page.get_by_role("region", name="Roles", exact=True)
    plan.get_by_text("auditors").wait_for()
    assert "1 to create, 0 to change, 0 to delete." in plan.inner_text()
    assert "auditors" not in {role.name for role in roles.list_roles()}  # a plan changes nothing
    console.shot("configuration-plan")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Apply these changes").click()
    console.wait_for_status("The document was applied.")
    assert "auditors" in {role.name for role in roles.list_roles()}
    assert "1 created" in page.get_by_role("region", name="Roles", exact=True).inner_text()
    console.close()


@needs_chromium
def test_the_audit_log_is_filtered_and_exported_and_operations_draw_the_sign_ins(
        browser: Any, service: Service) -> None:
    console = Console(browser, Admin(service))
    page = console.page
    console.open("#/audit", heading="Audit log")
    page.get_by_role("textbox", name="Event").fill("session.")
    page.get_by_role("button", name="Filter").click()
    # The unfiltered page shows session.start among others: wait for the filtered one.
    page.wait_for_function("() => { const events = [...document.querySelectorAll("
                           "'tbody td:nth-child(2)')].map((cell) => cell.textContent);"
                           " return events.length > 0"
                           " && events.every((event) => event === 'session.start'); }")
    assert set(page.locator("tbody td:nth-child(2)").all_inner_texts()) == {"session.start"}
    assert "event=session." in page.url
    with page.expect_download() as exported:
        page.get_by_role("button", name="Export as CSV").click()
    lines = Path(exported.value.path()).read_text().splitlines()
    assert lines[0].startswith("id,at,event") and all(",session." in line for line in lines[1:])
    console.shot("audit")

    console.area("Operations")
    chart = page.get_by_role("img", name=re.compile(r"^Sign-ins per day: \d+ in 14 days"))
    chart.wait_for()
    assert chart.locator("rect").count() >= 1  # today's sign-ins, at least the admin's
    assert page.locator("#health").inner_text() == "ok"
    console.shot("operations")
    console.close()


@needs_chromium
def test_a_person_without_the_admin_role_gets_a_plain_refusal(
        browser: Any, service: Service) -> None:
    person = Account(service)
    tab = PasskeyPage(browser)
    tab.add_passkey(person.authenticator.credentials[0])
    try:
        tab.page.goto(service.url("/admin"))
        # The hosted sign-in says it first, and sends the browser back with access_denied.
        tab.page.get_by_role("link", name="Return to the application").click()
        tab.page.get_by_role("heading", level=1,
                             name="You cannot use the admin console").wait_for()
        said = tab.page.locator("main").inner_text()
        assert "administrator role" in said
        for word in ("access_denied", "scope", "not_an_admin", "403", "identityctl role"):
            assert word not in said
        assert tab.page.get_by_role("navigation").is_hidden()
        assert tab.page.get_by_role("link", name="Go to your account").get_attribute(
            "href") == service.url("/account")
        tab.screenshot("admin", "refused")
    finally:
        tab.close()


@needs_chromium
@pytest.mark.skipif(not AXE.exists(), reason="axe-core is not installed (./scripts/test.sh "
                                             "runs npm ci in tests/node)")
@pytest.mark.parametrize(("scheme", "locale", "heading"),
                         [("light", "en-US", "Users"), ("dark", "de-DE", "Benutzer")])
def test_the_users_page_has_no_accessibility_violations(
        browser: Any, service: Service, scheme: str, locale: str, heading: str) -> None:
    seed_users(60)
    console = Console(browser, Admin(service), color_scheme=scheme, locale=locale,
                      bypass_csp=True)
    page = console.page
    page.goto(service.url("/admin"))
    page.get_by_role("heading", level=1, name=heading).wait_for()
    page.locator("tbody tr").first.wait_for()
    page.evaluate(AXE.read_text())
    found = page.evaluate("async () => (await axe.run(document, "
                          "{resultTypes: ['violations']})).violations")
    (ARTIFACTS / "admin").mkdir(parents=True, exist_ok=True)
    console.shot(f"users-{scheme}")
    assert [(item["id"], [node["target"] for node in item["nodes"]][:3])
            for item in found] == []
    # The keyboard's first stop is the skip link: seen when focused, it lands on the content.
    skip = page.locator(".skip-link")
    assert skip.evaluate("link => link === document.querySelector('a[href], button, input')")
    skip.focus()
    assert skip.bounding_box()["y"] >= 0
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "admin"
    console.close()


def test_the_console_writes_what_it_shows_as_text_never_as_markup() -> None:
    # Names, attributes, audit details and proposed diffs come from other people (and from
    # an assistant): they reach the page through textContent and attributes only.
    for path in CONSOLE_SCRIPTS:
        script = path.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                     "eval(", "new Function"):
            assert sink not in script, f"{path.name} uses {sink}"
