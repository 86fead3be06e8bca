"""The admin API's records: applications, the audit log (pages and exports), operations and
configuration as code; called as automation calls it (a client_credentials token with the
admin scope) and as the console does (a person's destructive calls need a recent sign-in);
and each of identityctl's APIs (/mcp, the account API, the admin API) takes only tokens for
itself."""

from __future__ import annotations

import base64
import csv
import io
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from identityctl.security.tokens import ACCESS_TOKEN_TYP
from identityctl.services import catalog
from identityctl.services.accounts import federation
from identityctl.services.admin import records
from identityctl.services.admin.console import decode_cursor
from identityctl.services.directory import roles
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from identityctl.services.tokens import TokenService
from identityctl.store import audit, db, migrations, outbox
from identityctl.store.models import AuditEvent, SchemaVersion
from tests.conftest import Service
from tests.support.mcp_clients import admin_token as mcp_token
from tests.support.oauth import basic_auth

API = "/admin/api/v1"


@dataclass
class Caller:
    """Someone calling the admin API with one token."""

    service: Service
    token: str
    actor: str

    def call(self, method: str, path: str, body: Any = None, *,
             headers: dict[str, str] | None = None, **kwargs: Any) -> requests.Response:
        return self.service.http.request(
            method, self.service.url(API + path), json=body, timeout=30,
            headers={"Authorization": f"Bearer {self.token}", **(headers or {})}, **kwargs)

    def ok(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        answer = self.call(method, path, body, **kwargs)
        assert answer.status_code in (200, 201), (answer.status_code, answer.text)
        return answer.json()


@pytest.fixture
def automation(service: Service) -> Caller:
    """A confidential M2M application allowed the admin scope, with its token for the admin
    API (client_credentials, RFC 8707 resource)."""
    m2m = catalog.applications.application_templates()["M2M"] | {"name": "Provisioning"}
    m2m["inboundAuthConfig"][0]["config"]["scopes"] = ["admin"]
    created, secret = catalog.applications.create_application(m2m,
                                                              origin=RequestOrigin(actor="test"))
    client_id = catalog.applications.oauth_config(created)["clientId"]
    assert secret
    issued = service.http.post(service.url("/oauth2/token"), timeout=30, data={
        "grant_type": "client_credentials", "scope": "admin",
        "resource": service.config.admin_audience},
        headers={"Authorization": basic_auth(client_id, secret)})
    assert issued.status_code == 200, issued.text
    return Caller(service, issued.json()["access_token"], f"client:{client_id}")


def person(service: Service, *, signed_in_ago: float) -> Caller:
    """The console's token for a person holding a role with the admin scope, who signed in
    with a passkey ``signed_in_ago`` seconds ago."""
    user = directory.create_user(username=f"admin-{uuid.uuid4().hex[:8]}",
                                 origin=RequestOrigin(actor="test"))
    role = f"console-{uuid.uuid4().hex[:8]}"
    roles.create_role(name=role, scopes=["admin"], origin=RequestOrigin(actor="test"))
    roles.grant_role(user.id, role, origin=RequestOrigin(actor="test"))
    config = service.config
    token = TokenService(config.issuer).sign(
        {"sub": user.id, "aud": config.admin_audience, "scope": "openid admin",
         "client_id": "identityctl-admin", "amr": ["passkey"],
         "auth_time": int(time.time() - signed_in_ago)}, typ=ACCESS_TOKEN_TYP, ttl=300)
    return Caller(service, token, f"admin:{user.id}")


# --- applications ---------------------------------------------------------------------------


def test_automation_lists_creates_and_deletes_applications(automation: Caller) -> None:
    created = automation.call("POST", "/applications", {
        "template": "SPA", "name": "Shop",
        "oauth": {"redirectUris": ["https://shop.example/callback"]}},
        headers={"X-Request-ID": "create-shop"})
    assert created.status_code == 201, created.text
    shop = created.json()
    assert shop["clientSecret"] is None  # a public client has none
    server = automation.ok("POST", "/applications", {
        "template": "Server", "name": "Billing",
        "oauth": {"redirectUris": ["https://billing.example/callback"]}})
    assert len(server["clientSecret"]) >= 32
    assert "clientSecret" not in automation.ok("GET", f"/applications/{server['id']}")

    names, cursor = [], None
    while True:  # a page at a time: each application once, by name
        page = automation.ok("GET", "/applications", params={"limit": 1, "cursor": cursor})
        names += [app["name"] for app in page["items"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert names == sorted(names) and len(names) == len(set(names))
    assert {"Shop", "Billing", "Provisioning"} <= set(names)

    assert automation.call("DELETE", f"/applications/{shop['id']}").status_code == 204
    assert automation.call("GET", f"/applications/{shop['id']}").json()["code"] == \
        "application_not_found"
    done = [(event["event"], event["requestId"]) for event in audit.events(limit=50)
            if event["actor"] == automation.actor]
    assert ("application.create", "create-shop") in done
    assert "application.delete" in {name for name, _ in done}


def test_an_application_is_made_from_a_template_and_changed_in_part(automation: Caller) -> None:
    missing = automation.call("POST", "/applications", {"template": "SPA", "name": "No URI"})
    assert (missing.status_code, missing.json()["code"]) == (400, "missing_field")
    unknown = automation.call("POST", "/applications", {"template": "Kiosk", "name": "K"})
    assert unknown.json()["code"] == "invalid_field"
    device = automation.ok("POST", "/applications", {"template": "Device", "name": "TV"})
    changed = automation.ok("PATCH", f"/applications/{device['id']}", {
        "description": "Living room", "oauth": {"scopes": ["openid", "profile"]}})
    config = catalog.applications.oauth_config(changed)
    assert changed["description"] == "Living room" and config["scopes"] == ["openid", "profile"]
    assert config["grantTypes"] == catalog.applications.oauth_config(device)["grantTypes"]
    stray = automation.call("PATCH", f"/applications/{device['id']}", {"colour": "red"})
    assert stray.json()["code"] == "unknown_key"


def test_every_change_by_a_person_needs_a_recent_sign_in(service: Service,
                                                         automation: Caller) -> None:
    """A console token left open (or stolen) reads, but changes nothing once
    admin.step_up_seconds have passed: no credential with the admin scope minted, no role
    widened, nothing deleted. A dry run changes nothing and needs no fresh sign-in."""
    server = automation.ok("POST", "/applications", {
        "template": "Server", "name": "Old", "oauth": {"redirectUris": [
            "https://old.example/callback"]}})
    stale = person(service, signed_in_ago=service.config.admin.step_up_seconds + 60)
    assert stale.ok("GET", f"/applications/{server['id']}")["name"] == "Old"
    for odd in ("\u00b2", "\u0661", "-1", "201"):  # ASCII digits only, within 1..200
        assert stale.call("GET", f"/applications?limit={odd}").json()["code"] == "invalid_field"
    backdoor = {"template": "M2M", "name": "Backdoor", "oauth": {"scopes": ["admin"]}}
    for method, path, body in (
            ("DELETE", f"/applications/{server['id']}", None),
            ("POST", f"/applications/{server['id']}/secret", None),
            ("POST", "/applications", backdoor),
            ("PATCH", f"/applications/{server['id']}", {"description": "changed"}),
            ("POST", "/roles", {"name": "wide", "scopes": ["admin"]}),
            ("PATCH", "/roles/admin", {"scopes": ["admin", "system", "extra"]})):
        refused = stale.call(method, path, body)
        assert (refused.status_code, refused.json()["code"]) == (401, "sign_in_too_old")
        assert 'error="insufficient_user_authentication"' in \
            refused.headers["WWW-Authenticate"]
    fresh = person(service, signed_in_ago=5)
    rotated = fresh.ok("POST", f"/applications/{server['id']}/secret")["clientSecret"]
    assert catalog.applications.client_secret_matches(server, rotated)
    assert fresh.call("DELETE", f"/applications/{server['id']}").status_code == 204
    assert any(event["actor"] == fresh.actor
               for event in audit.events(event="application.delete", limit=5))


# --- the audit log --------------------------------------------------------------------------

T0 = 1_700_000_000.0


def fill_log() -> list[dict[str, Any]]:
    """60 events over 30 instants from T0 on (two at each: (at, id) decides their order), by
    three actors, about two users, of four kinds."""
    for number in range(60):
        audit.append(at=T0 + number // 2, event=("user.create", "user.delete", "oauth.token",
                                                 "userinfo.read")[number % 4],
                     outcome="success", actor=("=cmd|' /C calc'!A0", "admin:a", "client:c")[
                         number % 3], user_id=("u1", "u2", None)[number % 3],
                     client_address="127.0.0.1", details={"n": number}, request_id="")
    return audit.page(audit.AuditFilter(since=T0, until=T0 + 30), after=None, limit=1000)


def every_page(caller: Caller, **filters: Any) -> list[dict[str, Any]]:
    events, cursor = [], None
    while True:
        page = caller.ok("GET", "/audit", params={**filters, "limit": 7, "cursor": cursor})
        assert len(page["items"]) <= 7
        events += page["items"]
        cursor = page["next"]
        if cursor is None:
            return events


def test_audit_pages_hold_each_event_once_newest_first_and_filters_narrow_them(
        automation: Caller) -> None:
    logged = fill_log()
    assert len(logged) == 60
    assert [(e["at"], e["id"]) for e in logged] == sorted(
        ((e["at"], e["id"]) for e in logged), reverse=True)
    assert every_page(automation, since=T0, until=T0 + 30) == logged
    narrowed = {
        (("actor", "admin:a"),): lambda e: e["actor"] == "admin:a",
        (("subject", "u2"),): lambda e: e["userId"] == "u2",
        (("event", "user."),): lambda e: e["event"].startswith("user."),
        (("event", "user_"),): lambda e: False,  # a prefix, not a pattern: _ is a letter
        (("since", "2023-11-14T22:13:30Z"), ("until", str(T0 + 20))):
            lambda e: T0 + 10 <= e["at"] < T0 + 20,
        (("event", "user.delete"), ("actor", "client:c"), ("until", "2023-11-14T22:13:50Z")):
            lambda e: e["event"] == "user.delete" and e["actor"] == "client:c",
    }
    for filters, holds in narrowed.items():
        found = every_page(automation, **{"since": T0, "until": T0 + 30, **dict(filters)})
        assert found == [e for e in logged if holds(e)], filters
    for cursor in ("nonsense", "WyJ4Il0", "WzEuNSwieCJd"):  # not base64 JSON; ["x"]; [1.5,"x"]
        refused = automation.call("GET", "/audit", params={"cursor": cursor})
        assert (refused.status_code, refused.json()["code"]) == (400, "invalid_field")
    assert automation.call("GET", "/audit", params={"limit": 201}).status_code == 400
    for moment in ("Tuesday", "nan"):
        assert automation.call("GET", "/audit", params={"since": moment}).status_code == 400


def test_a_cursor_made_by_hand_is_refused_not_read(automation: Caller) -> None:
    """A cursor is opaque but only base64url JSON: one a caller wrote, whose position is of
    the wrong types or holds a number that is not finite (JSON's NaN), is 400 on every
    list, never a 500 from the query."""
    for path in ("/changes", "/audit", "/applications", "/users"):
        for position in ('["abc","x"]', '[{"a":1},"x"]', '[NaN,"x"]', '["abc",1]',
                         '[{"a":1},1]', '[NaN,1]', '[Infinity,1]', '[1.5,true]',
                         '[["a"],"x"]', '[{"a":1}]'):
            cursor = base64.urlsafe_b64encode(position.encode()).decode().rstrip("=")
            refused = automation.call("GET", path, params={"cursor": cursor})
            assert (refused.status_code, refused.json()["code"]) == (400, "invalid_field"), \
                (path, position, refused.text)


def test_the_audit_log_exports_as_json_lines_and_formula_safe_csv(automation: Caller) -> None:
    logged = fill_log()
    lines = automation.call("GET", "/audit/export", params={"since": T0, "until": T0 + 30})
    assert lines.headers["Content-Type"].startswith("application/x-ndjson")
    assert 'filename="audit.jsonl"' in lines.headers["Content-Disposition"]
    assert [json.loads(line) for line in lines.text.splitlines()] == logged
    table = automation.call("GET", "/audit/export",
                            params={"format": "csv", "since": T0, "until": T0 + 30,
                                    "subject": "u1"})
    assert table.headers["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(table.text)))
    assert [int(row["id"]) for row in rows] == [e["id"] for e in logged if e["userId"] == "u1"]
    # The actor a spreadsheet would run as a formula is text there.
    assert {row["actor"] for row in rows} == {"'=cmd|' /C calc'!A0"}
    assert rows[-1]["at"] == "2023-11-14T22:13:20+00:00"
    assert json.loads(rows[-1]["details"]) == {"n": 0}
    wrong = automation.call("GET", "/audit/export", params={"format": "xlsx"})
    assert (wrong.status_code, wrong.json()["code"]) == (400, "invalid_field")


# --- operations -----------------------------------------------------------------------------


def test_operations_show_version_health_outbox_sign_ins_and_webhook_failures(
        automation: Caller) -> None:
    today = time.time()
    for ago in (0, 0, 86400 * 3, 86400 * 20):
        audit.append(at=today - ago, event="session.start", outcome="success", actor="u",
                     user_id="u", client_address="", details={}, request_id="")
    failing = outbox.enqueue(kind="webhook", target="https://hooks.example/in",
                             payload={"event": "user.create"})
    outbox.retry_later(failing, at=today + 60, error="HTTP 500 from hooks.example")
    answer = automation.ok("GET", "/operations")
    assert answer["health"] == "ok" and answer["version"]
    assert answer["outbox"].get("webhook", 0) >= 1
    days = answer["signInsPerDay"]
    assert len(days) == 14 and days == sorted(days, key=lambda day: day["day"])
    assert days[-1]["count"] >= 2 and days[-4]["count"] >= 1
    assert [failure["lastError"] for failure in answer["webhookFailures"]] == [
        "HTTP 500 from hooks.example"]


# --- configuration as code ------------------------------------------------------------------


def test_configuration_is_exported_planned_then_applied(service: Service,
                                                        automation: Caller) -> None:
    stale = person(service, signed_in_ago=service.config.admin.step_up_seconds + 60)
    document = automation.ok("GET", "/configuration")
    assert document["kind"] == "Configuration"
    planned_role = {"name": "auditors", "description": "Read the log", "scopes": ["audit"]}
    wanted = {**document, "roles": [*document["roles"], planned_role]}
    plan = automation.ok("POST", "/configuration/plan", wanted)
    assert plan["dryRun"] is True
    assert [(c["section"], c["key"], c["action"]) for c in plan["changes"]] == [
        ("roles", "auditors", "create")]
    assert "auditors" not in {role.name for role in roles.list_roles()}  # a plan changes nothing
    assert stale.call("POST", "/configuration/apply", wanted).json()["code"] == "sign_in_too_old"
    applied = automation.ok("POST", "/configuration/apply", wanted)
    assert applied["dryRun"] is False and applied["changes"] == plan["changes"]
    assert "auditors" in {role.name for role in roles.list_roles()}
    assert automation.ok("POST", "/configuration/plan", wanted)["changes"] == []
    assert audit.events(event="role.create", limit=1)[0]["actor"] == automation.actor
    invalid = automation.call("POST", "/configuration/plan", {"kind": "Nonsense"})
    assert invalid.status_code == 400


def test_configuration_travels_as_yaml_or_as_the_text_the_console_sends(
        automation: Caller) -> None:
    exported = automation.call("GET", "/configuration", params={"format": "yaml"})
    assert exported.headers["Content-Type"].startswith("application/yaml")
    text = exported.text.replace("roles:\n", "roles:\n- name: auditors\n  scopes: [audit]\n", 1)
    assert records.parsed_document(exported.text) == automation.ok("GET", "/configuration")
    plan = automation.ok("POST", "/configuration/plan", data=text.encode(),
                         headers={"Content-Type": "application/yaml"})["changes"]
    assert [(c["section"], c["key"], c["action"]) for c in plan] == [
        ("roles", "auditors", "create")]
    # A file or a paste, as the console sends it: the document's text as a JSON string.
    assert automation.ok("POST", "/configuration/plan", text)["changes"] == plan
    assert automation.ok("POST", "/configuration/apply", data=text.encode(),
                         headers={"Content-Type": "application/yaml"})["changes"] == plan
    aliased = automation.call("POST", "/configuration/plan", "a: &x [1]\nb: *x\n")
    assert (aliased.status_code, aliased.json()["code"]) == (400, "malformed_document")
    assert "alias *x is refused" in aliased.json()["description"]
    broken = automation.call("POST", "/configuration/plan", data=b"roles: [\n",
                             headers={"Content-Type": "application/yaml"})
    assert broken.json()["code"] == "malformed_document"
    form = automation.call("POST", "/configuration/plan", data=b"kind=Configuration",
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert (form.status_code, form.json()["code"]) == (415, "unsupported_media_type")
    bad = automation.call("GET", "/configuration", params={"format": "xml"})
    assert bad.json()["code"] == "invalid_field"


def with_provider(document: dict[str, Any], handle: str,
                  reference: dict[str, str]) -> dict[str, Any]:
    """``document`` with a GitHub sign-in whose client secret ``reference`` names."""
    return {**document, "identityProviders": [*document["identityProviders"], {
        "kind": "github", "handle": handle, "clientId": "Iv1.console",
        "clientSecret": reference}]}


def test_a_document_sent_to_the_api_reads_no_host_file_nor_host_variable(
        automation: Caller, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Else its author copies a secret of the host (a signing key, the database's password)
    into an entry whose secret is sent elsewhere: the upstream provider's token endpoint."""
    host_secret = tmp_path / "signing-key.pem"
    host_secret.write_text("the host's own secret")
    document = automation.ok("GET", "/configuration")
    for reference in ({"file": str(host_secret)}, {"env": "HOME"},
                      {"env": "IDENTITYCTL_CLIENT_SECRETS"}):
        for path in ("/configuration/plan", "/configuration/apply"):
            refused = automation.call("POST", path, with_provider(document, "copy", reference))
            assert (refused.status_code, refused.json()["code"]) == (
                400, "secret_reference_not_allowed"), (reference, path, refused.text)
            assert "identityProviders[copy].clientSecret" in refused.json()["description"]
    assert automation.ok("GET", "/configuration") == document  # nothing written

    # The service's own secret variables are the network's to name.
    monkeypatch.setenv("IDENTITYCTL_IDP_SECRET_X", "the provider's secret")
    wanted = with_provider(document, "x", {"env": "IDENTITYCTL_IDP_SECRET_X"})
    plan = automation.ok("POST", "/configuration/plan", wanted)
    assert [(c["section"], c["key"], c["action"]) for c in plan["changes"]] == [
        ("identityProviders", "x", "create")]
    assert automation.ok("POST", "/configuration/apply", wanted)["changes"] == plan["changes"]
    assert federation.require_provider("x").client_secret == "the provider's secret"
    # A changed reference is the document's too.
    moved = with_provider(document, "x", {"env": "HOME"})
    refused = automation.call("POST", "/configuration/apply", moved)
    assert refused.json()["code"] == "secret_reference_not_allowed", refused.text
    assert federation.require_provider("x").client_secret == "the provider's secret"


def test_the_host_operator_names_a_file_which_a_document_from_the_api_may_keep(
        automation: Caller, cli: Callable[..., Any], tmp_path: Path) -> None:
    secret = tmp_path / "corp-secret"
    secret.write_text("read from the host's file\n")
    document = automation.ok("GET", "/configuration")
    host_document = tmp_path / "host.json"
    host_document.write_text(json.dumps(with_provider(document, "corp",
                                                      {"file": str(secret)})))
    applied = cli("apply", "-f", str(host_document))
    assert applied.exit_code == 0, applied.output
    assert federation.require_provider("corp").client_secret == "read from the host's file"
    # The reference, unchanged, in a document sent over the API is the host operator's.
    exported = automation.ok("GET", "/configuration")
    [corp] = [entry for entry in exported["identityProviders"] if entry["handle"] == "corp"]
    assert corp["clientSecret"] == {"file": str(secret)}
    wanted = {**exported, "roles": [*exported["roles"], {"name": "auditors",
                                                          "scopes": ["audit"]}]}
    applied_remotely = automation.ok("POST", "/configuration/apply", wanted)["changes"]
    assert [(c["section"], c["key"]) for c in applied_remotely] == [("roles", "auditors")]


# --- each API, its own audience -------------------------------------------------------------


def test_mcp_the_account_api_and_the_admin_api_each_take_only_their_own_tokens(
        service: Service, automation: Caller) -> None:
    config = service.config
    user = directory.create_user(username=f"someone-{uuid.uuid4().hex[:6]}",
                                 origin=RequestOrigin(actor="test"))
    account = TokenService(config.issuer).sign(
        {"sub": user.id, "aud": config.issuer, "scope": "openid account",
         "client_id": "identityctl-account", "auth_time": int(time.time())},
        typ=ACCESS_TOKEN_TYP, ttl=300)
    tokens = {"mcp": mcp_token(service), "account": account, "admin": automation.token}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "audience test", "version": "1"}}}
    calls = {
        "mcp": lambda headers: service.http.post(
            service.url("/mcp"), json=initialize, timeout=30,
            headers={**headers, "Accept": "application/json, text/event-stream"}),
        "account": lambda headers: service.http.get(service.url("/account/api/profile"),
                                                    headers=headers, timeout=30),
        "admin": lambda headers: service.http.get(service.url(f"{API}/applications"),
                                                  headers=headers, timeout=30),
    }
    for api, call in calls.items():
        for holder, token in tokens.items():
            answer = call({"Authorization": f"Bearer {token}"})
            if holder == api:
                assert answer.status_code == 200, (api, answer.text)
            else:
                assert answer.status_code == 401, (api, holder, answer.text)
                assert answer.json()["code"] == "invalid_token", (api, holder, answer.text)
                if api == "account":  # RFC 6750 §3.1: get a new token
                    assert answer.headers["WWW-Authenticate"] == \
                        'Bearer realm="identityctl", error="invalid_token"', (api, holder)


# --- the store ------------------------------------------------------------------------------


def test_audit_pages_follow_one_another_on_this_database(store_url: str) -> None:
    logged = fill_log()
    wanted = audit.AuditFilter(since=T0, until=T0 + 30, event_prefix="user.")
    paged, after = [], None
    while True:
        page = records.audit_page(wanted, limit=7, after=after)
        paged += page["items"]
        if page["next"] is None:
            break
        after = decode_cursor(page["next"])
    assert paged == [event for event in logged if event["event"].startswith("user.")]


def test_a_version_18_store_gains_the_audit_page_indexes(store_url: str) -> None:
    table = AuditEvent._meta.table_name
    for name in ("audit_event_at_id", "audit_event_actor_at_id", "audit_event_user_id_at_id",
                 "audit_event_event_at_id"):
        db.database.execute_sql(f'DROP INDEX "{name}"')
    for column in ("at", "event", "user_id"):  # as migration 1 made them then
        db.database.execute_sql(f'CREATE INDEX "{table}_{column}" ON "{table}" ("{column}")')
    SchemaVersion.delete().where(SchemaVersion.version > 18).execute()
    assert migrations.upgrade() == [f"{number}: {description}" for number, description, _
                                    in migrations.MIGRATIONS if number > 18]
    assert {tuple(index.columns) for index in db.database.get_indexes(table)} >= {
        ("at", "id"), ("actor", "at", "id"), ("user_id", "at", "id"), ("event", "at", "id")}
    assert not {("at",), ("event",), ("user_id",)} & {
        tuple(index.columns) for index in db.database.get_indexes(table)}
