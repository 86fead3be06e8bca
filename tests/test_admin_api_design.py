"""The admin API's design: themes (and the preview of the hosted sign-in page in a theme not
yet saved) and flows (with their graph), through the catalog services the CLI and MCP call;
a refused flow names its node in a sentence, a refused preview is refused as a save is."""

from __future__ import annotations

from typing import Any

from identityctl.services.admin.design import flow_graph
from identityctl.store import audit
from tests.conftest import Service
from tests.test_admin_api_records import person

HOSTILE = "red; background: url(https://evil.example/x)"


def _stale(service: Service) -> Any:
    return person(service, signed_in_ago=service.config.admin.step_up_seconds + 60)


def test_a_theme_is_created_changed_and_deleted_after_a_step_up(service: Service) -> None:
    admin = person(service, signed_in_ago=0)
    made = admin.call("POST", "/themes", {"handle": "shop", "displayName": "Shop", "theme": {
        "colorSchemes": {"light": {"primary": "#0a7d38"}}}})
    assert made.status_code == 201, made.text
    theme = made.json()
    assert "shop" in [item["handle"] for item in admin.ok("GET", "/themes")["items"]]
    changed = admin.ok("PATCH", f"/themes/{theme['id']}", {
        "description": "Green", "theme": {"colorSchemes": {"light": {"primary": "teal"}},
                                          "branding": {"productName": "Shop"}}})
    assert changed["description"] == "Green" and changed["displayName"] == "Shop"
    assert changed["theme"]["colorSchemes"]["light"]["primary"] == "teal"
    assert admin.ok("GET", "/themes/shop")["id"] == theme["id"]  # by handle too
    stray = admin.call("PATCH", f"/themes/{theme['id']}", {"colour": "red"})
    assert stray.json()["code"] == "unknown_key"
    taken = admin.call("POST", "/themes", {"handle": "shop", "displayName": "Again"})
    assert (taken.status_code, taken.json()["code"]) == (409, "theme_exists")

    refused = _stale(service).call("DELETE", f"/themes/{theme['id']}")
    assert (refused.status_code, refused.json()["code"]) == (401, "sign_in_too_old")
    assert admin.call("DELETE", f"/themes/{theme['id']}").status_code == 204
    assert admin.call("GET", f"/themes/{theme['id']}").json()["code"] == "theme_not_found"
    done = [event["event"] for event in audit.events(limit=50) if event["actor"] == admin.actor]
    assert {"theme.create", "theme.update", "theme.delete"} <= set(done)


def test_the_preview_is_checked_as_a_save_and_only_for_an_admin(service: Service) -> None:
    admin = person(service, signed_in_ago=0)
    shown = admin.ok("POST", "/theme-preview", {
        "colorSchemes": {"light": {"primary": "teal"}, "dark": {"primary": "#8ea2ff"}},
        "typography": {"borderRadius": "2px"}, "branding": {"productName": "Shop"}})
    assert "--color-primary: teal;" in shown["stylesheet"]
    assert "prefers-color-scheme: dark" in shown["stylesheet"]
    assert "--border-radius: 2px;" in shown["stylesheet"]
    assert shown["branding"] == {"productName": "Shop"}

    # Abuse: a value that would smuggle a rule (or an image from elsewhere) into the page.
    bad = {"colorSchemes": {"light": {"primary": HOSTILE}}}
    previewed = admin.call("POST", "/theme-preview", bad)
    theme = admin.ok("POST", "/themes", {"handle": "plain", "displayName": "Plain"})
    saved = admin.call("PATCH", f"/themes/{theme['id']}", {"theme": bad})
    for refused in (previewed, saved):
        assert refused.status_code == 400
        body = refused.json()
        assert body["code"] == "invalid_field"
        assert body["message"].startswith("The light colour 'primary': ")
        assert "theme.colorSchemes.light.primary" in body["description"]
    assert previewed.json() == saved.json()  # one rule, one answer

    # No one but an admin renders a theme: no token, or a token for another API.
    anonymous = service.http.post(service.url("/admin/api/v1/theme-preview"), timeout=30,
                                  json={"colorSchemes": {"light": {"primary": "teal"}}})
    assert (anonymous.status_code, anonymous.json()["code"]) == (401, "missing_token")


def test_flows_are_listed_by_type_drawn_edited_and_refused_by_node(service: Service) -> None:
    admin = person(service, signed_in_ago=0)
    signing_in = admin.ok("GET", "/flows", params={"flowType": "AUTHENTICATION"})["items"]
    assert signing_in and {item["flowType"] for item in signing_in} == {"AUTHENTICATION"}
    assert admin.call("GET", "/flows", params={"flowType": "SHOP"}).status_code == 400
    [basic] = [item for item in signing_in if item["handle"] == "default-basic-flow"]
    flow = admin.ok("GET", f"/flows/{basic['id']}")
    layers = {node["id"]: node["layer"] for node in flow["graph"]["nodes"]}
    assert layers["start"] == 0 and layers["end"] == max(layers.values())
    assert {"from": "credentials_auth", "to": "prompt_credentials",
            "kind": "onIncomplete"} in flow["graph"]["edges"]

    document = {key: flow[key] for key in ("handle", "name", "flowType", "nodes")}
    broken = [dict(node) for node in document["nodes"]]
    for node in broken:
        if node["id"] == "credentials_auth":
            node["onSuccess"] = "nowhere"
    refused = admin.call("PUT", f"/flows/{basic['id']}", {**document, "nodes": broken})
    assert refused.status_code == 400
    assert refused.json()["code"] == "invalid_flow"
    assert refused.json()["message"] == ("The node 'credentials_auth': points to unknown node "
                                         "'nowhere'.")
    typo = [{**node, "onSucess": node["onSuccess"]} if node["id"] == "sso_check" else node
            for node in document["nodes"]]
    unknown = admin.call("PUT", f"/flows/{basic['id']}", {**document, "nodes": typo}).json()
    assert unknown["code"] == "unknown_key"
    assert unknown["message"].startswith("The node 'sso_check': unknown key")
    renamed = admin.ok("PUT", f"/flows/{basic['id']}", {**document, "name": "Passwords"})
    assert renamed["name"] == "Passwords" and renamed["graph"]["nodes"]
    moved = admin.call("PUT", f"/flows/{basic['id']}", {**document, "flowType": "RECOVERY"})
    assert moved.json()["code"] == "invalid_field"

    made = admin.call("POST", "/flows", {**document, "handle": "shop-sign-in"})
    assert made.status_code == 201, made.text
    copy = made.json()
    assert copy["graph"] == renamed["graph"]
    assert _stale(service).call("DELETE", f"/flows/{copy['id']}").json()["code"] == \
        "sign_in_too_old"
    assert admin.call("DELETE", f"/flows/{copy['id']}").status_code == 204
    assert admin.call("GET", f"/flows/{copy['id']}").json()["code"] == "flow_not_found"
    done = {event["event"] for event in audit.events(limit=50) if event["actor"] == admin.actor}
    assert {"flow.update", "flow.create", "flow.delete"} <= done


def _task(node_id: str, on_success: str, **more: str) -> dict[str, Any]:
    return {"id": node_id, "type": "TASK_EXECUTION", "onSuccess": on_success,
            "executor": {"name": "PasskeyAuthExecutor", "mode": "verify"}, **more}


def test_a_graph_is_layered_by_the_longest_path_and_a_way_back_is_drawn_not_counted() -> None:
    nodes = [
        {"id": "end", "type": "END"},
        {"id": "start", "type": "START", "onSuccess": "ask"},
        {"id": "ask", "type": "PROMPT", "prompts": [
            {"action": {"ref": "short", "nextNode": "check"}},
            {"action": {"ref": "long", "nextNode": "first"}}]},
        _task("first", "second"),
        _task("second", "check"),
        _task("check", "end", onIncomplete="ask", onFailure="end"),
    ]
    graph = flow_graph(nodes)
    placed = {node["id"]: (node["layer"], node["row"]) for node in graph["nodes"]}
    # check comes after the longer way (ask -> first -> second -> check), not after ask.
    assert placed == {"start": (0, 0), "ask": (1, 0), "check": (4, 0), "first": (2, 0),
                      "second": (3, 0), "end": (5, 0)}
    assert graph["nodes"][0]["id"] == "start"
    assert next(node for node in graph["nodes"] if node["id"] == "check")["executor"] == \
        "PasskeyAuthExecutor (verify)"
    assert {(edge["from"], edge["to"], edge["kind"]) for edge in graph["edges"]} == {
        ("start", "ask", "onSuccess"), ("ask", "check", "action"), ("ask", "first", "action"),
        ("first", "second", "onSuccess"), ("second", "check", "onSuccess"),
        ("check", "end", "onSuccess"), ("check", "ask", "onIncomplete"),
        ("check", "end", "onFailure")}
    assert [edge.get("label") for edge in graph["edges"] if edge["kind"] == "action"] == \
        ["short", "long"]


def test_every_design_route_is_in_the_served_openapi_document(service: Service) -> None:
    paths = service.get("/openapi.json").json()["paths"]
    for path in ("/themes", "/themes/{theme_id}", "/theme-preview", "/flows",
                 "/flows/{flow_id}"):
        assert "/admin/api/v1" + path in paths, path
