"""The audit log: every sign-in, failure, credential change, token issue/revoke and
admin change leaves one event with actor, time, client address (where there was a request)
and outcome; `identityctl audit` reads it; retention purges it.

Events are read back with ``identityctl.store.audit.events``. Gaps found in other modules
are marked ``xfail(strict=True)`` with the reason, so that fixing them turns the suite red
until the marker goes.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from mcp import ClientSession

from identityctl.services.directory import users as directory
from identityctl.store import audit
from identityctl.store.models import AuditEvent
from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator, b64url
from tests.support.flows import FlowClient
from tests.support.mcp_clients import ADMIN_SUBJECT, call, mcp_session, run
from tests.support.oauth import OAuthDriver, basic_auth, register_client
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient
from tests.test_flow_execution import make_application

PASSWORD = "correct horse battery"
LOCAL = "127.0.0.1"  # the tests' client address (waitress on 127.0.0.1)
OUTCOMES = {"success", "failure", "denied", "throttled"}


@pytest.fixture
def passkeys(service: Service) -> PasskeyClient:
    return PasskeyClient(service)


@pytest.fixture
def rp(service: Service) -> OAuthDriver:
    return OAuthDriver(service)


def since_now() -> float:
    return time.time() - 0.001


def the_event(name: str, since: float, *, outcome: str = "success",
              where: Callable[[dict[str, Any]], bool] = lambda e: True) -> dict[str, Any]:
    """The one event ``name`` with ``outcome`` written since ``since`` (matching ``where``),
    with a time inside the test and an outcome from the documented set."""
    found = [e for e in audit.events(since=since, event=name, limit=1000)
             if e["outcome"] == outcome and where(e)]
    everything = [(e["event"], e["outcome"], e["actor"], e["clientAddress"])
                  for e in audit.events(since=since, limit=1000)]
    assert len(found) == 1, (name, outcome, everything)
    event = found[0]
    assert since <= event["at"] <= time.time() + 1
    assert event["outcome"] in OUTCOMES
    return event


def assert_request_event(event: dict[str, Any], *, actor: str, user_id: str | None) -> None:
    assert event["actor"] == actor, event
    assert event["userId"] == user_id, event
    assert event["clientAddress"] == LOCAL, event


# --- sign-ins, failures and credentials --------------------------------------------------------


def test_atomic_passkey_registration_sign_in_and_failure(passkeys: PasskeyClient) -> None:
    user = passkeys.new_user()
    authenticator = SoftAuthenticator()
    t0 = since_now()

    registered = passkeys.enrolled(user, authenticator)
    signed_in = passkeys.sign_in(authenticator, user.id)
    bad = passkeys.sign_in(authenticator, user.id, bad_signature=True)

    assert signed_in.status_code == 200 and bad.status_code == 400, bad.text
    added = the_event("passkey.register", t0)
    assert_request_event(added, actor=user.id, user_id=user.id)
    assert added["details"]["credentialId"] == registered["CredentialID"]
    success = the_event("passkey.authenticate", t0)
    assert_request_event(success, actor=user.id, user_id=user.id)
    failure = the_event("passkey.authenticate", t0, outcome="failure")
    assert_request_event(failure, actor=user.id, user_id=user.id)
    assert failure["details"]["code"] == "invalid_signature"


def test_a_refused_registration_is_a_failure_event(passkeys: PasskeyClient) -> None:
    user = passkeys.new_user()
    t0 = since_now()

    refused = passkeys.register(user, SoftAuthenticator(), challenge=b64url(b"x" * 32))

    assert refused.status_code == 400, refused.text
    failure = the_event("passkey.register", t0, outcome="failure")
    assert_request_event(failure, actor=user.id, user_id=user.id)
    assert failure["details"]["code"] == "challenge_mismatch"


def test_flow_password_sign_in_and_its_failure(service: Service) -> None:
    username = f"pw-{uuid.uuid4().hex[:8]}"
    user = directory.create_user(username=username, password=PASSWORD, origin=TEST_ORIGIN)
    application = make_application()
    flow = FlowClient(service, application["id"])
    t0 = since_now()

    flow.start()
    assert flow.act("password", username=username, password="wrong one")["flowStatus"] == \
        "INCOMPLETE"
    assert flow.act("password", username=username, password=PASSWORD)["flowStatus"] == \
        "COMPLETE"

    failure = the_event("flow.password", t0, outcome="failure")
    assert failure["clientAddress"] == LOCAL and failure["userId"] == user.id
    assert failure["actor"] == username  # who it claimed to be; no proof yet
    assert_request_event(the_event("flow.password", t0), actor=user.id, user_id=user.id)
    complete = the_event("flow.complete", t0)
    assert_request_event(complete, actor=user.id, user_id=user.id)
    assert complete["details"] == {"applicationId": application["id"], "amr": ["pwd"]}


def test_flow_passkey_sign_up_and_sign_in(service: Service) -> None:
    application = make_application()
    username = f"pk-{uuid.uuid4().hex[:8]}"
    signing_up = FlowClient(service, application["id"])
    t0 = since_now()

    signing_up.start("REGISTRATION")
    signing_up.act("signup", username=username, password=PASSWORD, email=f"{username}@x.io")
    assert signing_up.create_passkey()["flowStatus"] == "COMPLETE"
    user = directory.require_user(username)
    added = the_event("passkey.register", t0)
    assert_request_event(added, actor=user.id, user_id=user.id)

    t1 = since_now()
    signing_in = FlowClient(service, application["id"], authenticator=signing_up.authenticator)
    signing_in.start()
    signing_in.act("passkey", username=username)
    assert signing_in.use_passkey(bad_signature=True)["flowStatus"] == "INCOMPLETE"
    assert signing_in.use_passkey()["flowStatus"] == "COMPLETE"

    assert_request_event(the_event("passkey.authenticate", t1), actor=user.id, user_id=user.id)
    failure = the_event("passkey.authenticate", t1, outcome="failure")
    assert failure["clientAddress"] == LOCAL and failure["details"]["code"] == \
        "invalid_signature"
    complete = the_event("flow.complete", t1)
    assert_request_event(complete, actor=user.id, user_id=user.id)
    assert "passkey" in complete["details"]["amr"]


def test_credential_rename_and_removal_by_the_cli(passkeys: PasskeyClient,
                                                  cli: Callable[..., Any]) -> None:
    user = passkeys.new_user()
    authenticator = SoftAuthenticator()
    credential_id = passkeys.enrolled(user, authenticator)["CredentialID"]
    t0 = since_now()

    assert cli("passkey", "rename", user.id, credential_id, "Phone").exit_code == 0
    removed = cli("passkey", "delete", user.id, credential_id, "--yes")
    assert removed.exit_code == 0, removed.output

    renamed = the_event("passkey.rename", t0)
    deleted = the_event("passkey.delete", t0)
    for event in (renamed, deleted):
        assert event["actor"] == "cli" and event["userId"] == user.id, event
        assert event["details"] == {"credentialId": credential_id}
        assert event["clientAddress"] == ""  # no request: a local command


# --- tokens ------------------------------------------------------------------------------------


def test_code_exchange_refresh_and_client_credentials_are_audited(rp: OAuthDriver) -> None:
    client = register_client()
    authorization = rp.authorization(client)
    t0 = since_now()

    tokens = rp.tokens(authorization)
    refreshed = rp.refresh(client, tokens["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text
    m2m = register_client("M2M")
    issued = rp.service.http.post(rp.service.url("/oauth2/token"), timeout=30,
                                  data={"grant_type": "client_credentials"},
                                  headers={"Authorization": basic_auth(m2m.client_id,
                                                                       m2m.secret or "")})
    assert issued.status_code == 200, issued.text

    def grant(name: str) -> Callable[[dict[str, Any]], bool]:
        return lambda event: event["details"].get("grant") == name

    user_id = authorization.user.id
    assert_request_event(the_event("oauth.token", t0, where=grant("authorization_code")),
                         actor=client.client_id, user_id=user_id)
    assert_request_event(the_event("oauth.token", t0, where=grant("refresh_token")),
                         actor=client.client_id, user_id=user_id)
    assert_request_event(the_event("oauth.token", t0, where=grant("client_credentials")),
                         actor=m2m.client_id, user_id=None)


def test_the_authorization_and_its_hand_off_are_audited(rp: OAuthDriver) -> None:
    client = register_client()
    t0 = since_now()
    authorization = rp.authorization(client)
    assert_request_event(the_event("oauth.authorize", t0), actor=client.client_id,
                         user_id=authorization.user.id)


def test_a_replayed_code_is_a_denied_event(rp: OAuthDriver) -> None:
    client = register_client()
    authorization = rp.authorization(client)
    rp.tokens(authorization)
    t0 = since_now()
    assert rp.exchange(authorization).status_code == 400
    assert_request_event(the_event("oauth.code_reuse", t0, outcome="denied"),
                         actor=client.client_id, user_id=authorization.user.id)


def test_a_wrong_client_secret_is_a_failure_event(rp: OAuthDriver) -> None:
    m2m = register_client("M2M")
    t0 = since_now()
    refused = rp.service.http.post(rp.service.url("/oauth2/token"), timeout=30,
                                   data={"grant_type": "client_credentials"},
                                   headers={"Authorization": basic_auth(m2m.client_id, "no")})
    assert refused.status_code == 401
    event = the_event("oauth.client_auth", t0, outcome="failure")
    assert event["actor"] == m2m.client_id and event["clientAddress"] == LOCAL


def test_an_unknown_client_id_is_a_failure_event_as_a_wrong_secret_is(rp: OAuthDriver) -> None:
    # One rule for every credential attempt (services/attempts.py): audited alike.
    t0 = since_now()
    refused = rp.service.http.post(rp.service.url("/oauth2/token"), timeout=30,
                                   data={"grant_type": "client_credentials"},
                                   headers={"Authorization": basic_auth("nobody", "no")})
    assert refused.status_code == 401
    event = the_event("oauth.client_auth", t0, outcome="failure")
    assert event["actor"] == "nobody" and event["clientAddress"] == LOCAL
    assert event["details"]["code"] == "client_authentication_failed"


def test_a_refused_token_request_is_a_failure_event(rp: OAuthDriver) -> None:
    client = register_client()
    authorization = rp.authorization(client)
    t0 = since_now()
    refused = rp.exchange(authorization, code_verifier="x" * 43)
    assert refused.status_code == 400, refused.text
    event = the_event("oauth.token", t0, outcome="failure")
    assert_request_event(event, actor=client.client_id, user_id=None)
    assert event["details"]["grantType"] == "authorization_code"


def test_revoking_a_refresh_token_is_audited(rp: OAuthDriver) -> None:
    client = register_client()
    authorization = rp.authorization(client)
    tokens = rp.tokens(authorization)
    t0 = since_now()
    revoked = rp.client_post("/oauth2/revoke", client, {"token": tokens["refresh_token"]})
    assert revoked.status_code == 200, revoked.text
    event = the_event("oauth.revoke", t0)
    assert event["actor"] == client.client_id and event["userId"] == authorization.user.id


def test_a_revocation_event_names_the_client_address(rp: OAuthDriver) -> None:
    client = register_client()
    tokens = rp.tokens(rp.authorization(client))
    t0 = since_now()
    rp.client_post("/oauth2/revoke", client, {"token": tokens["refresh_token"]})
    assert the_event("oauth.revoke", t0)["clientAddress"] == LOCAL


# --- administration ------------------------------------------------------------------------


def test_cli_user_create_disable_and_app_create_are_audited(cli: Callable[..., Any]) -> None:
    username = f"cli-{uuid.uuid4().hex[:8]}"
    t0 = since_now()

    created = cli("user", "create", "--username", username, "--json")
    assert created.exit_code == 0, created.output
    user = directory.require_user(username)
    assert cli("user", "disable", username, "--json").exit_code == 0
    app = cli("app", "create", "--template", "Server", "--name", f"Backend {username}",
              "--redirect-uri", "https://backend.example/cb", "--json")
    assert app.exit_code == 0, app.output
    application_id = json.loads(app.stdout)["application"]["id"] \
        if "application" in json.loads(app.stdout) else json.loads(app.stdout)["id"]

    user_created = the_event("user.create", t0)
    status = the_event("user.status", t0)
    app_created = the_event("application.create", t0)
    for event in (user_created, status, app_created):
        assert event["actor"] == "cli", event
        assert event["clientAddress"] == "", event
    assert user_created["userId"] == status["userId"] == user.id
    assert status["details"].get("status") == "disabled", status
    assert app_created["details"]["id"] == application_id


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_mcp_admin_changes_are_audited_with_the_caller(service: Service,
                                                      transport: str) -> None:
    document = {"name": f"mcp app {uuid.uuid4().hex[:8]}", "templateId": "M2M"}
    t0 = since_now()

    async def scenario(session: ClientSession) -> dict[str, Any]:
        templates = (await call(session, "svc_get_application_templates"))["templates"]
        return await call(session, "svc_create_application",
                          {**templates["M2M"], "name": document["name"]})

    async def opened() -> dict[str, Any]:
        async with mcp_session(service, transport) as session:  # type: ignore[arg-type]
            return await scenario(session)

    created = run(opened())
    application_id = created.get("id") or created["application"]["id"]
    event = the_event("application.create", t0,
                      where=lambda e: e["details"].get("id") == application_id)
    expected = "mcp:stdio" if transport == "stdio" else f"mcp:{ADMIN_SUBJECT}"
    assert event["actor"] == expected


def test_mcp_changes_over_http_name_the_client_address_and_the_request(service: Service
                                                                        ) -> None:
    t0 = since_now()

    async def opened() -> dict[str, Any]:
        async with mcp_session(service, "http") as session:
            templates = (await call(session, "svc_get_application_templates"))["templates"]
            return await call(session, "svc_create_application",
                              {**templates["M2M"], "name": f"mcp {uuid.uuid4().hex[:8]}"})

    run(opened())
    event = the_event("application.create", t0)
    assert event["clientAddress"] == LOCAL and event["requestId"]


# --- reading and pruning the log ---------------------------------------------------------------


def test_identityctl_audit_filters_by_time_and_user_as_json(
        passkeys: PasskeyClient, cli: Callable[..., Any]) -> None:
    user = passkeys.new_user()
    other = passkeys.new_user()
    authenticator = SoftAuthenticator()
    passkeys.enrolled(user, authenticator)
    passkeys.enrolled(other, SoftAuthenticator())
    old = AuditEvent.create(event="user.update", outcome="success", actor="cli",
                            user_id=user.id, client_address="", details={},
                            at=time.time() - 3 * 3600)

    for args in (("audit", "--since", "1h", "--user", user.username, "--json"),
                 ("audit", "list", "--since", "1h", "--user", user.id, "--json")):
        listed = cli(*args)
        assert listed.exit_code == 0, (args, listed.output)
        events = json.loads(listed.stdout)
        assert events and {e["userId"] for e in events} == {user.id}, events
        assert "passkey.register" in {e["event"] for e in events}
        assert old.id not in {e["id"] for e in events}
        assert all({"at", "event", "outcome", "actor", "clientAddress"} <= set(e)
                   for e in events)

    table = cli("audit", "--since", "2026-01-01T00:00", "--user", user.username)
    assert table.exit_code == 0, table.output
    assert "Audit events" in table.stdout and "passkey" in table.stdout
    bad = cli("audit", "--since", "yesterday-ish", "--json")
    assert bad.exit_code == 1 and json.loads(bad.stdout)["error"]["code"] == "invalid_field"


def test_audit_purge_removes_only_events_past_the_retention(service: Service,
                                                            cli: Callable[..., Any]) -> None:
    days = service.config.security.audit_retention_days
    old = AuditEvent.create(event="user.update", outcome="success", actor="cli",
                            client_address="", details={}, at=time.time() - (days + 1) * 86400)
    recent = AuditEvent.create(event="user.update", outcome="success", actor="cli",
                               client_address="", details={},
                               at=time.time() - (days - 1) * 86400)

    purged = cli("audit", "purge", "--json")

    assert purged.exit_code == 0, purged.output
    assert json.loads(purged.stdout)["removed"] >= 1
    assert AuditEvent.get_or_none(AuditEvent.id == old.id) is None
    assert AuditEvent.get_or_none(AuditEvent.id == recent.id) is not None


def test_the_server_applies_the_retention_by_itself(tmp_path: Any) -> None:
    from identityctl.services.admin.bootstrap import open_store
    from identityctl.store import db
    from tests.conftest import start_service
    from tests.support.passkeys import second_instance

    running, stop = start_service(tmp_path)
    stop()
    days = running.config.security.audit_retention_days
    open_store(running.config, create=True)
    try:
        old = AuditEvent.create(event="user.update", outcome="success", actor="cli",
                                client_address="", details={},
                                at=time.time() - (days + 1) * 86400)
        with second_instance(running) as instance:  # `identityctl serve` in a process
            assert instance.get("/health").status_code == 200
            assert AuditEvent.get_or_none(AuditEvent.id == old.id) is None
    finally:
        db.close()
