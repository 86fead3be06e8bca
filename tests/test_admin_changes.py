"""Changes an AI assistant proposes over MCP (``admin.approve_mcp_changes``), applied only
when an admin approves the exact diff with a passkey.

The MCP Python SDK, signed in as an admin, proposes an application: it does not exist until
an admin approves it in Chromium (a CDP virtual authenticator answers the assertion). An
assertion over another digest, a replayed approval, an altered diff and an expired change
are refused; a change the deployment moved away from is refused with nothing half-written;
of two concurrent approvals one wins. The challenge is SHA-256(digest || nonce).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from identityctl.errors import Conflict, IdentityError
from identityctl.passkey import codec
from identityctl.services import catalog
from identityctl.services.admin import changes
from identityctl.services.catalog.applications import application_templates
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import webhooks
from identityctl.services.directory import roles
from identityctl.services.origin import RequestOrigin
from identityctl.store import audit, db
from identityctl.store import changes as store_changes
from identityctl.store.models import ProposedChange
from tests.conftest import Service, deployment_with
from tests.support.browser import needs_chromium
from tests.support.mcp_clients import admin_token, first_text, http_session, run
from tests.test_admin_api_users import Admin
from tests.test_admin_console import Console

MCP_CLIENT = "assistant-client"


@pytest.fixture
def approving(tmp_path: Path) -> Iterator[Service]:
    yield from deployment_with(tmp_path, {"approve_mcp_changes = false":
                                          "approve_mcp_changes = true"})


def spa(name: str) -> dict[str, Any]:
    """An SPA application as an assistant sends it: the template, a real theme."""
    template = application_templates()["SPA"]
    [theme] = [theme for theme in catalog.themes.list_themes() if theme["handle"] == "default"]
    client_id = name.lower().replace(" ", "-")
    oauth = template["inboundAuthConfig"][0]["config"]
    return {**template, "name": name, "themeId": theme["id"], "inboundAuthConfig": [
        {"type": "oauth2", "config": {**oauth, "clientId": client_id,
                                      "redirectUris": ["https://notes.example.com/cb"]}}]}


def client_ids() -> set[str]:
    return {catalog.applications.oauth_config(app)["clientId"]
            for app in catalog.applications.list_applications()}


def propose_over_mcp(service: Service, admin: Admin, tool: str,
                     arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a mutating tool as the admin's assistant; its answer (a proposal)."""
    token = admin_token(service, sub=admin.user.id, client_id=MCP_CLIENT)

    async def scenario() -> Any:
        async with http_session(service.url("/mcp"), token) as session:
            return await session.call_tool(tool, arguments)

    # On a thread of its own: the browser's driver runs an event loop on this one.
    with ThreadPoolExecutor(1) as thread:
        result = thread.submit(lambda: run(scenario())).result()
    assert result.is_error is True, first_text(result)  # not applied
    return {"text": first_text(result), **(result.structured_content or {})}


def proposed(service: Service, admin: Admin, name: str) -> dict[str, Any]:
    answer = propose_over_mcp(service, admin, "svc_create_application", spa(name))
    assert answer["approvalUrl"] == service.url(f"/admin#/changes/{answer['changeId']}")
    assert answer["changeId"] in answer["text"] and "passkey" in answer["text"]
    return answer


def assertion_for(admin: Admin, change_id: str,
                  **tamper: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The approval options of a change, and the admin's authenticator's answer to them
    (``tamper``: as SoftAuthenticator.get takes it)."""
    asked = admin.ok("POST", f"/changes/{change_id}/approval")
    credential = admin.authenticator.get(asked["publicKeyCredentialRequestOptions"],
                                         origin=admin.passkeys.origin, **tamper)
    return asked, {"publicKeyCredential": credential, "sessionToken": asked["sessionToken"],
                   "nonce": asked["nonce"]}


# --- the challenge --------------------------------------------------------------------------


def test_the_challenge_is_the_digest_and_a_fresh_nonce_hashed() -> None:
    document = {"set": {"themes": [{"handle": "dark", "displayName": "Dark"}]}, "remove": {}}
    diff = [{"section": "themes", "key": "dark", "action": "create", "before": None,
             "after": {"handle": "dark"}, "secretChanged": False}]
    digest = changes.change_digest(document, diff)
    canonical = json.dumps({"document": document, "diff": diff}, sort_keys=True,
                           separators=(",", ":")).encode()
    assert digest == hashlib.sha256(canonical).hexdigest()
    # The same content in another key order has the same digest; other content another one.
    assert changes.change_digest(dict(reversed(document.items())), diff) == digest
    assert changes.change_digest(document, [{**diff[0], "key": "light"}]) != digest
    nonce = bytes(range(32))
    challenge = changes.approval_challenge(digest, nonce)
    assert challenge == hashlib.sha256(bytes.fromhex(digest) + nonce).digest()
    assert len(challenge) == 32
    assert changes.approval_challenge(digest, bytes(32)) != challenge
    other = changes.change_digest(document, [])
    assert changes.approval_challenge(other, nonce) != challenge


# --- proposing and approving --------------------------------------------------------------


def test_an_assistant_proposes_and_only_a_passkey_approval_applies_it(
        approving: Service) -> None:
    service = approving
    admin = Admin(service)
    answer = proposed(service, admin, "Team notes")
    assert "team-notes" not in client_ids()  # nothing applied yet
    change = admin.ok("GET", f"/changes/{answer['changeId']}")
    assert change["state"] == "pending" and change["intact"] is True
    assert change["clientId"] == MCP_CLIENT and change["author"] == f"mcp:{admin.user.id}"
    assert [(item["section"], item["key"], item["action"]) for item in change["diff"]] == [
        ("applications", "team-notes", "create")]
    assert change["digest"] == answer["digest"]
    listed = admin.ok("GET", "/changes")
    assert [item["id"] for item in listed["items"]] == [change["id"]]

    # An assertion asked for another change's digest does not approve this one.
    other = proposed(service, admin, "Other notes")
    _, foreign = assertion_for(admin, other["changeId"])
    refused = admin.call("POST", f"/changes/{change['id']}/approve", foreign)
    assert refused.status_code == 400 and refused.json()["code"] == "approval_mismatch"

    hook = "https://hooks.example.com/changes"
    webhooks.add_subscription(url=hook, events=["change.*"], origin=RequestOrigin(actor="test"))
    asked, approval = assertion_for(admin, change["id"])
    challenge = codec.decode(asked["publicKeyCredentialRequestOptions"]["challenge"],
                             field="challenge")
    assert challenge == changes.approval_challenge(change["digest"],
                                                   codec.decode(asked["nonce"], field="nonce"))
    approved = admin.ok("POST", f"/changes/{change['id']}/approve", approval)
    assert approved["state"] == "approved" and approved["decidedBy"] == f"admin:{admin.user.id}"
    assert "team-notes" in client_ids()
    events = [event["event"] for event in audit.events(event=changes.APPROVE_EVENT)]
    assert events == [changes.APPROVE_EVENT]
    # Sent as a webhook, as every audit event is.
    assert [delivery["url"] for delivery in webhooks.deliveries()] == [hook]

    # The same approval again: its session is spent and the change is decided.
    replayed = admin.call("POST", f"/changes/{change['id']}/approve", approval)
    assert replayed.status_code == 409 and replayed.json()["code"] == "change_not_pending"


def test_a_replayed_assertion_with_a_fresh_session_is_refused(approving: Service) -> None:
    admin = Admin(approving)
    change_id = proposed(approving, admin, "Replay notes")["changeId"]
    _, first = assertion_for(admin, change_id)
    second, _ = assertion_for(admin, change_id)
    # The old signature with the new session: its challenge is not the new one.
    replay = {**first, "sessionToken": second["sessionToken"], "nonce": second["nonce"]}
    refused = admin.call("POST", f"/changes/{change_id}/approve", replay)
    assert refused.status_code == 400, refused.text
    assert "replay-notes" not in client_ids()


def test_an_approval_needs_the_person_verified_not_a_touch(approving: Service) -> None:
    """Approving is a person's decision: the deployment's "preferred" user verification (a
    touch of a key left in its port would do) is not enough for it."""
    admin = Admin(approving)
    change_id = proposed(approving, admin, "Touched notes")["changeId"]
    asked, approval = assertion_for(admin, change_id, uv=False)
    assert asked["publicKeyCredentialRequestOptions"]["userVerification"] == "required"
    refused = admin.call("POST", f"/changes/{change_id}/approve", approval)
    assert (refused.status_code, refused.json()["code"]) == (400, "user_verification_missing")
    assert "touched-notes" not in client_ids()
    assert admin.ok("GET", f"/changes/{change_id}")["state"] == "pending"
    assert audit.events(event=changes.APPROVE_EVENT) == []


def test_an_altered_diff_cannot_be_approved(approving: Service) -> None:
    admin = Admin(approving)
    change_id = proposed(approving, admin, "Quiet notes")["changeId"]
    _, approval = assertion_for(admin, change_id)
    row = ProposedChange.get_by_id(change_id)
    row.document["set"]["applications"][0]["name"] = "Loud notes"
    ProposedChange.update(document=row.document).where(
        ProposedChange.id == change_id).execute()
    assert admin.ok("GET", f"/changes/{change_id}")["intact"] is False
    refused = admin.call("POST", f"/changes/{change_id}/approve", approval)
    assert refused.status_code == 409 and refused.json()["code"] == "change_tampered"
    assert "quiet-notes" not in client_ids()
    assert admin.ok("GET", f"/changes/{change_id}")["state"] == "failed"


def test_an_expired_change_cannot_be_approved(approving: Service) -> None:
    admin = Admin(approving)
    change_id = proposed(approving, admin, "Late notes")["changeId"]
    ProposedChange.update(expires_at=time.time() - 1).where(
        ProposedChange.id == change_id).execute()
    assert admin.ok("GET", f"/changes/{change_id}")["state"] == "expired"
    refused = admin.call("POST", f"/changes/{change_id}/approval")
    assert refused.status_code == 409 and refused.json()["code"] == "change_not_pending"
    with pytest.raises(Conflict):
        changes.approve_on_host(ServiceContext.for_config(approving.config), change_id,
                                origin=RequestOrigin(actor="cli"))
    assert "late-notes" not in client_ids()


def test_a_change_the_deployment_moved_away_from_is_refused_whole(approving: Service) -> None:
    """A change of two entries whose second no longer applies as proposed: neither is
    written, the change fails, and the audit log has no approval."""
    ctx = ServiceContext.for_config(approving.config)
    document = spa("Moving notes")

    def make() -> None:
        catalog.themes.create_theme(handle="notes-theme", display_name="Notes",
                                    origin=RequestOrigin(actor="mcp:x"))
        catalog.applications.create_application(document, origin=RequestOrigin(actor="mcp:x"))

    change = changes.propose(ctx, summary="theme and application", make=make,
                             client_id=MCP_CLIENT, origin=RequestOrigin(actor="mcp:x"))
    assert {item["key"] for item in change.diff} == {"notes-theme", "moving-notes"}
    # Meanwhile somebody makes the application, otherwise.
    catalog.applications.create_application({**document, "description": "by hand"},
                                            origin=RequestOrigin(actor="test"))
    with pytest.raises(Conflict) as refused:
        changes.approve_on_host(ctx, change.id, origin=RequestOrigin(actor="cli"))
    assert refused.value.code == "change_conflict"
    assert "notes-theme" not in {theme["handle"] for theme in catalog.themes.list_themes()}
    made = catalog.applications.require_application_by_client_id("moving-notes")
    assert made["description"] == "by hand"
    assert changes.shown(changes.require_change(change.id))["state"] == "failed"
    outcomes = [event["outcome"] for event in audit.events(event=changes.APPROVE_EVENT)]
    assert outcomes == ["failure"]


def test_of_two_concurrent_approvals_one_wins(approving: Service) -> None:
    ctx = ServiceContext.for_config(approving.config)
    change = changes.propose(
        ctx, summary="create role", client_id=MCP_CLIENT, origin=RequestOrigin(actor="mcp:x"),
        make=lambda: roles.create_role(name="auditors", scopes=["audit"],
                                       origin=RequestOrigin(actor="mcp:x")))
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def approve() -> None:
        start.wait()
        try:
            changes.approve_on_host(ctx, change.id, origin=RequestOrigin(actor="cli"))
            outcomes.append("approved")
        except IdentityError as error:
            outcomes.append(error.code)
        finally:
            db.release_connection()

    threads = [threading.Thread(target=approve) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["approved", "change_not_pending"]
    assert [role.name for role in roles.list_roles()].count("auditors") == 1


def test_one_client_has_at_most_twenty_changes_waiting(approving: Service) -> None:
    """An assistant in a loop cannot bury the admins' queue (nor spend the server on diffs):
    its 21st pending change is refused; another client's queue is its own, and a decision
    makes room."""
    ctx = ServiceContext.for_config(approving.config)

    def propose(client_id: str, role: str) -> store_changes.ChangeRecord:
        return changes.propose(
            ctx, summary=f"create role {role}", client_id=client_id,
            origin=RequestOrigin(actor="mcp:x"),
            make=lambda: roles.create_role(name=role, scopes=["audit"],
                                           origin=RequestOrigin(actor="mcp:x")))

    waiting = [propose(MCP_CLIENT, f"role-{number}") for number in range(20)]
    with pytest.raises(Conflict) as refused:
        propose(MCP_CLIENT, "one-too-many")
    assert refused.value.code == "too_many_pending_changes"
    assert store_changes.pending_of(MCP_CLIENT, now=time.time()) == 20
    propose("another-client", "theirs")
    changes.reject(waiting[0].id, origin=RequestOrigin(actor="cli"))
    propose(MCP_CLIENT, "after-a-decision")


def test_tools_whose_change_is_no_configuration_are_refused(approving: Service) -> None:
    admin = Admin(approving)
    answer = propose_over_mcp(approving, admin, "grant_role",
                              {"user": admin.user.username, "role": "admin"})
    assert "cannot be proposed" in answer["text"]


def test_the_host_admin_lists_shows_approves_and_rejects(approving: Service) -> None:
    admin = Admin(approving)
    runner = CliRunner()

    def cli(*args: str) -> Any:
        return runner.invoke(cli_app, ["--config", str(approving.config_path), *args])

    kept = proposed(approving, admin, "Cli notes")["changeId"]
    dropped = proposed(approving, admin, "Dropped notes")["changeId"]
    assert "approve" in cli("change", "--help").output
    listed = cli("change", "list", "--json")
    assert listed.exit_code == 0, listed.output
    assert {item["id"] for item in json.loads(listed.output)} == {kept, dropped}
    shown = cli("change", "show", kept)
    assert shown.exit_code == 0 and "applications/cli-notes" in shown.output
    assert cli("change", "approve", kept).exit_code == 0
    assert "cli-notes" in client_ids()
    assert cli("change", "reject", dropped, "--reason", "no").exit_code == 0
    assert "dropped-notes" not in client_ids()
    [event] = audit.events(event=changes.APPROVE_EVENT)
    assert event["actor"] == "cli" and event["details"]["via"] == "cli"
    again = cli("change", "approve", dropped)
    assert again.exit_code != 0 and "rejected" in again.output


# --- in the console -----------------------------------------------------------------------


@needs_chromium
def test_an_admin_approves_a_proposed_application_in_the_console_with_a_passkey(
        browser: Any, approving: Service) -> None:
    service = approving
    admin = Admin(service)
    change_id = proposed(service, admin, "Console notes")["changeId"]
    assert "console-notes" not in client_ids()
    console = Console(browser, admin)
    page = console.page
    console.open("#/changes")
    page.get_by_role("heading", level=1, name="Changes").wait_for()
    page.get_by_role("link", name="create application").click()
    page.get_by_role("heading", level=1, name="Change: create application").wait_for()
    assert "applications/console-notes" in page.get_by_role("region",
                                                            name="What it changes").inner_text()
    assert page.url.endswith(f"/admin#/changes/{change_id}")
    console.shot("change")
    page.get_by_role("button", name="Approve with your passkey").click()
    page.get_by_text("The change was approved and applied.").wait_for()
    assert "console-notes" in client_ids()
    assert changes.require_change(change_id).state == "approved"
    console.shot("change-approved")
    console.close()


# --- the store ----------------------------------------------------------------------------


def test_a_decision_is_taken_once_and_pages_follow_on_this_database(store_url: str) -> None:
    now = time.time()
    made = [store_changes.create(summary=f"change {number}", document={"set": {}, "remove": {}},
                                 diff=[], digest="00" * 32, client_id=MCP_CLIENT, author="mcp:x",
                                 now=now + number, expires_at=now + 3600)
            for number in range(5)]
    first = made[0].id
    assert store_changes.decide(first, state=store_changes.APPROVED, by="cli", at=now,
                                open_until=now)
    assert not store_changes.decide(first, state=store_changes.REJECTED, by="cli", at=now)
    assert store_changes.require(first).state == store_changes.APPROVED
    late = made[1].id
    assert not store_changes.decide(late, state=store_changes.APPROVED, by="cli", at=now,
                                    open_until=now + 7200)
    paged, after = [], None
    while True:
        page = store_changes.page(limit=2, after=after)
        paged += [change.id for change in page]
        if len(page) < 2:
            break
        after = (page[-1].created_at, page[-1].id)
    assert paged == [change.id for change in reversed(made)]
    assert [change.id for change in store_changes.page(
        limit=10, state=store_changes.APPROVED)] == [first]
