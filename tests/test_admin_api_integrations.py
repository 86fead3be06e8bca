"""The admin API's integrations: roles, identity providers, resource servers and webhooks
(with their deliveries and a redeliver), called as the console calls them. Removing one
needs a recent sign-in; a secret is answered once and never again; a refused input names
its field; every change is audited with the admin as its actor."""

from __future__ import annotations

import time
from typing import Any

import requests

from identityctl.services.accounts import federation
from identityctl.services.delivery import webhooks
from identityctl.services.directory import roles
from identityctl.services.origin import RequestOrigin
from identityctl.store import audit, db, outbox
from identityctl.store.webhooks import WEBHOOK
from tests.conftest import Service
from tests.test_admin_api_records import Caller, person
from tests.test_webhooks import Receiver


def fresh_and_stale(service: Service) -> tuple[Caller, Caller]:
    """An admin who just signed in, and one whose sign-in is too old for a removal."""
    return (person(service, signed_in_ago=0),
            person(service, signed_in_ago=service.config.admin.step_up_seconds + 60))


def refused(answer: requests.Response, status: int, code: str, field: str = "") -> None:
    assert (answer.status_code, answer.json()["code"]) == (status, code), answer.text
    if field:  # the field it names
        assert f"'{field}'" in answer.json()["description"], answer.text


def removed_after_step_up(admin: Caller, stale: Caller, path: str, event: str) -> None:
    """A removal with a stale sign-in is refused (RFC 9470), then made and audited."""
    too_old = stale.call("DELETE", path)
    assert (too_old.status_code, too_old.json()["code"]) == (401, "sign_in_too_old")
    assert 'error="insufficient_user_authentication"' in too_old.headers["WWW-Authenticate"]
    since = time.time() - 1
    assert admin.call("DELETE", path).status_code == 204
    assert [e["actor"] for e in audit.events(since=since, event=event)] == [admin.actor]


def test_roles_are_listed_with_their_members_created_changed_and_deleted(
        service: Service) -> None:
    admin, stale = fresh_and_stale(service)
    made = admin.call("POST", "/roles", {"name": "editors", "scopes": ["notes:write"],
                                         "description": "Write notes"})
    assert made.status_code == 201, made.text
    role = made.json()
    roles.grant_role(admin.actor.removeprefix("admin:"), "editors",
                     origin=RequestOrigin(actor="test"))
    listed = {item["name"]: item for item in admin.ok("GET", "/roles")["items"]}
    assert listed["editors"]["members"] == 1 and listed["editors"]["scopes"] == ["notes:write"]

    changed = admin.ok("PATCH", f"/roles/{role['id']}", {"scopes": ["notes:read",
                                                                    "notes:write"]})
    assert changed["scopes"] == ["notes:read", "notes:write"]
    assert changed["description"] == "Write notes"  # what the body left out stays
    refused(admin.call("PATCH", "/roles/editors", {"scopes": "notes:read"}), 400,
            "invalid_field", "scopes")
    refused(admin.call("POST", "/roles", {"scopes": ["a"]}), 400, "missing_field", "name")
    refused(admin.call("POST", "/roles", {"name": "x", "scope": ["a"]}), 400, "unknown_key",
            "scope")

    removed_after_step_up(admin, stale, f"/roles/{role['id']}", "role.delete")
    assert "editors" not in {item["name"] for item in admin.ok("GET", "/roles")["items"]}


def test_an_identity_provider_keeps_its_secret_unshown_and_unchanged_by_an_edit(
        service: Service) -> None:
    admin, stale = fresh_and_stale(service)
    secret = "github-secret-only-given-once"
    made = admin.call("POST", "/identity-providers", {
        "kind": "github", "clientId": "Iv1.team", "clientSecret": secret, "name": "GitHub"})
    assert made.status_code == 201, made.text
    assert secret not in made.text
    provider = made.json()
    assert provider["callbackUri"] == service.url("/gate/federated")
    listed = admin.call("GET", "/identity-providers")
    assert secret not in listed.text
    assert listed.json()["callbackUri"] == service.url("/gate/federated")
    assert [item["handle"] for item in listed.json()["items"]] == ["github"]

    renamed = admin.ok("PATCH", f"/identity-providers/{provider['id']}",
                       {"name": "GitHub (team)"})
    assert (renamed["name"], renamed["clientId"]) == ("GitHub (team)", "Iv1.team")
    assert federation.require_provider("github").client_secret == secret
    admin.ok("PATCH", "/identity-providers/github", {"clientSecret": "a-new-secret"})
    assert federation.require_provider("github").client_secret == "a-new-secret"

    refused(admin.call("POST", "/identity-providers", {"kind": "github", "handle": "gh2",
                                                       "clientSecret": "s"}),
            400, "invalid_field", "clientId")
    refused(admin.call("POST", "/identity-providers", {"kind": "saml", "clientId": "c",
                                                       "clientSecret": "s"}),
            400, "invalid_field", "kind")
    refused(admin.call("PATCH", "/identity-providers/github", {"kind": "oidc"}), 400,
            "unknown_key", "kind")
    refused(admin.call("PATCH", "/identity-providers/github", {"scopes": "read:user"}), 400,
            "invalid_field", "scopes")
    removed_after_step_up(admin, stale, "/identity-providers/github",
                          "identity_provider.delete")
    assert admin.ok("GET", "/identity-providers")["items"] == []


def test_a_resource_server_is_registered_its_scopes_replaced_and_removed(
        service: Service) -> None:
    admin, stale = fresh_and_stale(service)
    made = admin.call("POST", "/resource-servers", {
        "identifier": "https://notes.example.com/mcp", "scopes": ["notes:read"],
        "name": "Team notes"})
    assert made.status_code == 201, made.text
    server = made.json()
    changed = admin.ok("PATCH", f"/resource-servers/{server['id']}",
                       {"scopes": ["notes:read", "notes:write"]})
    assert (changed["scopes"], changed["name"]) == (["notes:read", "notes:write"],
                                                     "Team notes")
    assert admin.ok("GET", "/resource-servers")["items"] == [changed]
    refused(admin.call("POST", "/resource-servers", {"identifier": "notes",
                                                     "scopes": ["n"]}),
            400, "invalid_field", "identifier")
    refused(admin.call("PATCH", f"/resource-servers/{server['id']}", {"name": "x"}), 400,
            "missing_field", "scopes")
    removed_after_step_up(admin, stale, f"/resource-servers/{server['id']}",
                          "resource_server.delete")


def given_up(subscription_id: str, url: str, body: dict[str, Any]) -> str:
    """A delivery the outbox gave up on (written so, in one transaction, so that the
    service's deliverer never tries it)."""
    with db.transaction():
        delivery = outbox.enqueue(kind=WEBHOOK, target=url,
                                  payload={"subscriptionId": subscription_id, "body": body})
        outbox.give_up(delivery, error="HTTP 500 from the receiver")
    return delivery


def test_a_webhook_shows_its_secret_once_and_a_delivery_given_up_is_sent_again(
        service: Service) -> None:
    admin, stale = fresh_and_stale(service)
    receiver = Receiver()
    made = admin.call("POST", "/webhooks", {"url": receiver.url, "events": ["role.*"],
                                            "description": "Roles to the wiki"})
    assert made.status_code == 201, made.text
    subscription = made.json()
    receiver.secret = subscription["secret"]
    assert subscription["secret"].startswith("whsec_")
    listed = admin.call("GET", "/webhooks")
    assert subscription["secret"] not in listed.text
    assert [item["id"] for item in listed.json()["items"]] == [subscription["id"]]
    refused(admin.call("POST", "/webhooks", {"url": "ftp://hooks.example", "events": ["*"]}),
            400, "invalid_field", "url")
    refused(admin.call("POST", "/webhooks", {"url": receiver.url}), 400, "missing_field",
            "events")

    event = {"type": "role.create", "timestamp": "2026-11-01T12:00:00+00:00",
             "data": {"role": "editors"}}
    failed = given_up(subscription["id"], receiver.url, event)
    deliveries = admin.ok("GET", "/webhook-deliveries", params={"limit": 5})["items"]
    assert {"id": failed, "state": "given up", "attempts": 1,
            "lastError": "HTTP 500 from the receiver"}.items() <= deliveries[0].items()

    since = time.time() - 1
    again = admin.call("POST", f"/webhook-deliveries/{failed}/redeliver")
    assert again.status_code == 201, again.text
    receiver.wait_for(1)
    [(webhook_id, payload)] = receiver.received
    assert (webhook_id, payload) == (again.json()["id"], event)  # the same event, anew
    [redelivered] = audit.events(since=since, event="webhook.redeliver")
    assert redelivered["actor"] == admin.actor
    assert redelivered["details"]["delivery"] == failed
    # Sent (or still queued): not sent again by hand.
    refused(admin.call("POST", f"/webhook-deliveries/{again.json()['id']}/redeliver"), 409,
            "webhook_delivery_not_given_up")
    assert admin.call("POST", "/webhook-deliveries/nothing/redeliver").json()["code"] == \
        "webhook_delivery_not_found"
    refused(admin.call("GET", "/webhook-deliveries", params={"limit": 0}), 400,
            "invalid_field", "limit")

    removed_after_step_up(admin, stale, f"/webhooks/{subscription['id']}", "webhook.delete")
    assert webhooks.list_subscriptions() == []
    # Its deliveries given up cannot be sent again: the subscription is gone.
    assert admin.call("POST", f"/webhook-deliveries/{failed}/redeliver").json()["code"] == \
        "webhook_not_found"


def test_every_integrations_route_is_in_the_served_openapi_document(service: Service) -> None:
    paths = service.get("/openapi.json").json()["paths"]
    for path, methods in {
            "/roles": {"get", "post"}, "/roles/{role_id}": {"patch", "delete"},
            "/identity-providers": {"get", "post"},
            "/identity-providers/{provider_id}": {"patch", "delete"},
            "/resource-servers": {"get", "post"},
            "/resource-servers/{server_id}": {"patch", "delete"},
            "/webhooks": {"get", "post"}, "/webhooks/{webhook_id}": {"delete"},
            "/webhook-deliveries": {"get"},
            "/webhook-deliveries/{delivery_id}/redeliver": {"post"}}.items():
        assert methods <= set(paths["/admin/api/v1" + path]), path
