"""Who may grant what: roles carry scopes, users hold roles.

A scope some role carries reaches a token only through a person holding such a role; `init`
makes `admin` carrying `system`, so nobody can hand an assistant the administration of the
service unless given that role. The checks run on the real server over HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from identityctl.errors import Conflict
from identityctl.oauth.pkce import s256_challenge
from identityctl.services.directory import roles, users
from identityctl.services.origin import RequestOrigin
from identityctl.store import audit
from tests.conftest import Service
from tests.support.oauth import OAuthDriver, assert_oauth_error, query_of, register_client
from tests.support.origins import TEST_ORIGIN

PKCE = {"code_challenge": s256_challenge("v" * 43), "code_challenge_method": "S256"}


def test_init_makes_the_admin_role_carrying_the_console_and_mcp_scopes(
        service: Service) -> None:
    [admin] = [role for role in roles.list_roles() if role.name == "admin"]
    assert admin.scopes == [service.config.admin.required_scope,
                            service.config.mcp.required_scope]


def test_a_person_without_the_role_cannot_grant_its_scope(service: Service) -> None:
    rp = OAuthDriver(service)
    client = register_client("Server", scopes=["openid", "system"])
    link = rp.gate_link(client, scope="openid system", state="s1", **PKCE)
    user, assertion = rp.signed_in_user()
    handed = rp.callback(link["authId"], assertion)
    back = query_of(handed.json()["redirect_uri"])
    assert back["error"] == "access_denied" and back["state"] == "s1"
    assert "holds no role that allows 'system'" in back["error_description"]
    [event] = [e for e in audit.events(event="oauth.authorize") if e["outcome"] == "denied"]
    assert event["userId"] == user.id


def test_scopes_no_role_carries_are_granted_by_anyone(service: Service) -> None:
    rp = OAuthDriver(service)
    client = register_client("Server", scopes=["openid", "orders:read"])
    tokens = rp.tokens(rp.authorization(client, scope="openid orders:read"))
    assert tokens["scope"] == "openid orders:read"


def test_a_role_made_for_a_scope_protects_it_from_then_on(service: Service) -> None:
    rp = OAuthDriver(service)
    client = register_client("Server", scopes=["openid", "orders:write"])
    roles.create_role(name="orders-admin", scopes=["orders:write"],
                      origin=RequestOrigin(actor="test"))
    link = rp.gate_link(client, scope="openid orders:write", **PKCE)
    _, assertion = rp.signed_in_user()
    back = query_of(rp.callback(link["authId"], assertion).json()["redirect_uri"])
    assert back["error"] == "access_denied"
    tokens = rp.tokens(rp.authorization(client, scope="openid orders:write",
                                        roles=("orders-admin",)))
    assert tokens["scope"] == "openid orders:write"


def test_a_refresh_is_refused_once_the_person_lost_the_role(service: Service) -> None:
    rp = OAuthDriver(service)
    client = register_client("Server", scopes=["openid", "system"])
    authorization = rp.authorization(client, scope="openid system", roles=("admin",),
                                     resource=service.config.mcp_audience)
    tokens = rp.tokens(authorization)
    subject = rp.verified(tokens["access_token"], audience=service.config.mcp_audience)["sub"]
    refreshed = rp.refresh(client, tokens["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text
    successor = users.create_user(username=f"successor-{subject[:8]}",
                                  origin=RequestOrigin(actor="test"))
    roles.grant_role(successor.id, "admin",
                     origin=RequestOrigin(actor="test"))  # never the last administrator
    roles.revoke_role(subject, "admin", origin=RequestOrigin(actor="test"))
    assert_oauth_error(rp.refresh(client, refreshed.json()["refresh_token"]), 400,
                       "invalid_grant", "scope_not_held")


def test_roles_from_the_cli(cli: Callable[..., Any], service: Service) -> None:
    created = cli("user", "create", "--username", "grace", "--role", "admin", "--json")
    assert created.exit_code == 0, created.output
    assert json.loads(created.output)["roles"] == ["admin"]
    made = cli("role", "create", "auditors", "--scope", "audit:read", "--json")
    assert made.exit_code == 0, made.output
    assert cli("role", "grant", "auditors", "grace").exit_code == 0
    listed = json.loads(cli("role", "list", "--json").output)
    assert {role["name"]: role["scopes"] for role in listed} == {
        "admin": ["admin", "system"], "auditors": ["audit:read"]}
    shown = json.loads(cli("user", "show", "grace", "--json").output)
    assert shown["roles"] == ["admin", "auditors"]
    assert cli("role", "revoke", "auditors", "grace").exit_code == 0
    again = cli("role", "revoke", "auditors", "grace", "--json")
    assert again.exit_code == 1 and json.loads(again.output)["error"]["code"] == "role_not_held"
    missing = cli("role", "grant", "nobody-role", "grace", "--json")
    assert json.loads(missing.output)["error"]["code"] == "role_not_found"


def test_the_administrator_role_is_never_left_without_a_holder(cli: Callable[..., Any],
                                                               service: Service) -> None:
    """Nobody could open the console or the admin API again: the role 'admin' cannot be
    deleted, nor taken from the last person holding it."""
    assert cli("user", "create", "--username", "solo-admin", "--json").exit_code == 0
    holders = [user for user in json.loads(cli("user", "list", "--json").output)
               if "admin" in user.get("roles", [])]
    for holder in holders:
        cli("role", "revoke", "admin", holder["username"])
    assert cli("role", "grant", "admin", "solo-admin").exit_code == 0
    refused = cli("role", "revoke", "admin", "solo-admin")
    assert refused.exit_code != 0 and "only administrator" in refused.output
    deleted = cli("role", "delete", "admin", "--yes")
    assert deleted.exit_code != 0 and "built in" in deleted.output
    solo = users.require_user("solo-admin")
    for going_away in (lambda: users.set_status(solo.id, "disabled", origin=TEST_ORIGIN),
                       lambda: users.set_status(solo.id, "locked", origin=TEST_ORIGIN),
                       lambda: users.delete_user(solo.id, origin=TEST_ORIGIN)):
        with pytest.raises(Conflict) as refused:
            going_away()
        assert refused.value.code == "last_admin"
    kept = roles.require_role("admin").scopes
    with pytest.raises(Conflict) as narrowed:  # its scopes are what lets its holders in
        roles.update_role("admin", scopes=[], origin=TEST_ORIGIN)
    assert narrowed.value.code == "built_in_role" and roles.require_role("admin").scopes == kept
    roles.update_role("admin", scopes=[*kept, "reports"], origin=TEST_ORIGIN)  # adding is fine
    for holder in holders:
        assert cli("role", "grant", "admin", holder["username"]).exit_code == 0
