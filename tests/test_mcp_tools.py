"""The 16 svc_* tools and our role tools, driven through the mcp SDK's own clients over
both transports.

Every test runs twice: over Streamable HTTP against the real server (bearer token from the
service's TokenService) and over stdio against a spawned `identityctl mcp` on the same
deployment. Results are checked against what the service layer stored.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from mcp import ClientSession

from identityctl.errors import InvalidField
from identityctl.flow.definition import validate_flow
from identityctl.mcp.tools import INSTRUCTIONS
from identityctl.services.accounts import sessions as sessions_service
from identityctl.services.catalog.applications import THEME_PLACEHOLDER
from identityctl.services.context import ServiceContext
from identityctl.services.directory import users as directory_service
from identityctl.services.origin import RequestOrigin
from identityctl.store import audit, catalog
from tests.conftest import Service
from tests.support.mcp_clients import (
    ADMIN_SUBJECT,
    ALL_TOOLS,
    Transport,
    call,
    call_failing,
    first_text,
    mcp_session,
    password_flow,
    run,
    signup_flow,
)
from tests.support.origins import TEST_ORIGIN

TOOL_NAMES = ALL_TOOLS
WRITING_TOOLS = {"svc_create_application", "svc_update_application", "svc_create_flow",
                 "svc_update_flow", "create_role", "grant_role", "revoke_role",
                 "end_user_sessions", "add_identity_provider", "remove_identity_provider",
                 "add_webhook", "remove_webhook"}


@pytest.fixture(params=["http", "stdio"])
def transport(request: pytest.FixtureRequest) -> Transport:
    return request.param


@pytest.fixture
def tools(service: Service, transport: Transport) -> Callable[..., Any]:
    """Run ``scenario(session)`` against the deployment over the transport under test."""

    def run_scenario(scenario: Callable[[ClientSession], Awaitable[Any]]) -> Any:
        async def opened() -> Any:
            async with mcp_session(service, transport) as session:
                return await scenario(session)

        return run(opened())

    return run_scenario


def tool_error(name: str, operation: str, description: str) -> str:
    return f"Error executing tool {name}: failed to {operation}: {description}"


def test_initialize_lists_exactly_the_sixteen_tools(tools: Callable[..., Any]) -> None:
    async def scenario(session: ClientSession) -> None:
        init = await session.initialize()
        assert init.server_info.name == "identityctl"
        assert init.instructions == INSTRUCTIONS
        assert "svc_list_themes" in INSTRUCTIONS and THEME_PLACEHOLDER in INSTRUCTIONS

        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(listed) == TOOL_NAMES
        for name, tool in listed.items():
            assert tool.input_schema["type"] == "object"
            assert tool.output_schema is not None, name
            assert tool.description, name
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is (name not in WRITING_TOOLS), name

        def required(name: str) -> list[str]:
            return sorted(listed[name].input_schema.get("required", []))

        assert required("svc_get_application_by_id") == ["id"]
        assert required("svc_get_application_by_client_id") == ["client_id"]
        assert required("svc_create_application") == ["name"]
        assert required("svc_update_application") == ["id", "name"]
        assert required("svc_get_flow_by_handle") == ["flow_type", "handle"]
        assert required("svc_get_flow_by_id") == ["id"]
        assert required("svc_create_flow") == ["flowType", "handle", "name", "nodes"]
        assert required("svc_update_flow") == ["id", "name", "nodes"]
        assert required("svc_get_theme_by_id") == ["id"]
        for name in ("svc_list_applications", "svc_get_application_templates", "svc_list_flows",
                     "svc_list_themes", "svc_list_organization_units", "svc_list_user_types",
                     "svc_integrate_react_sdk"):
            assert required(name) == [], name

        flows = listed["svc_list_flows"].input_schema["properties"]
        assert flows["limit"]["default"] == 30
        assert flows["offset"]["default"] == 0
        # The reference system's two types, and RECOVERY: a superset, so its clients' calls
        # all still validate.
        assert flows["flow_type"]["anyOf"][0]["enum"] == ["AUTHENTICATION", "REGISTRATION",
                                                          "RECOVERY"]
        create = listed["svc_create_application"]
        assert "svc_list_themes" in (create.description or "")
        assert "themeId" in create.input_schema["properties"]
        assert "inboundAuthConfig" in create.input_schema["properties"]
        assert "service_url" in listed["svc_integrate_react_sdk"].input_schema["properties"]

    tools(scenario)


def test_application_create_get_update_round_trip(tools: Callable[..., Any]) -> None:
    async def scenario(session: ClientSession) -> dict[str, Any]:
        themes = await call(session, "svc_list_themes")
        assert themes["total_count"] == len(themes["themes"]) >= 1
        default_theme = next(t for t in themes["themes"] if t["handle"] == "default")
        assert set(default_theme) == {"id", "handle", "displayName"}

        templates = (await call(session, "svc_get_application_templates"))["templates"]
        assert set(templates) == {"SPA", "Mobile", "Server", "Device", "M2M"}
        for kind in ("SPA", "Mobile", "Server"):
            assert templates[kind]["themeId"] == THEME_PLACEHOLDER
        assert "themeId" not in templates["M2M"]

        spa = copy.deepcopy(templates["SPA"])
        spa["name"] = "Storefront"
        refused = await call_failing(session, "svc_create_application", spa)
        assert refused.startswith(
            "Error executing tool svc_create_application: failed to create application: ")
        assert "placeholder" in refused and "svc_list_themes" in refused
        unknown = await call_failing(session, "svc_create_application",
                                     {**spa, "themeId": "no-such-theme"})
        assert unknown == tool_error("svc_create_application", "create application",
                                     "No theme 'no-such-theme'.")

        created = await call(session, "svc_create_application",
                             {**spa, "themeId": default_theme["id"]})
        oauth = created["inboundAuthConfig"][0]["config"]
        assert created["themeId"] == default_theme["id"]
        assert created["template"] == "SPA"
        assert oauth["publicClient"] is True and oauth["pkceRequired"] is True
        assert oauth["redirectUris"] == ["http://localhost:3000/callback"]
        assert "clientSecret" not in created  # public client: no secret
        stored = catalog.get_application(created["id"])
        assert stored["name"] == "Storefront" and stored["themeId"] == default_theme["id"]

        by_id = await call(session, "svc_get_application_by_id", {"id": created["id"]})
        by_client_id = await call(session, "svc_get_application_by_client_id",
                                  {"client_id": oauth["clientId"]})
        assert by_id == by_client_id
        assert by_id["name"] == "Storefront"

        replacement = {**by_id, "name": "Storefront v2", "description": "renamed"}
        replacement["inboundAuthConfig"][0]["config"]["redirectUris"] = [
            "https://shop.example.com/callback"]
        updated = await call(session, "svc_update_application", replacement)
        assert updated["name"] == "Storefront v2"
        again = await call(session, "svc_get_application_by_id", {"id": created["id"]})
        assert again["description"] == "renamed"
        assert again["inboundAuthConfig"][0]["config"]["clientId"] == oauth["clientId"]
        assert again["inboundAuthConfig"][0]["config"]["redirectUris"] == [
            "https://shop.example.com/callback"]

        m2m = await call(session, "svc_create_application",
                         {**templates["M2M"], "name": "Nightly job"})
        assert m2m["clientSecret"]  # confidential: the secret is shown once
        assert "themeId" not in m2m  # no login page, no theme

        listed = await call(session, "svc_list_applications")
        assert listed["total_count"] == 4  # with the account page and the console
        assert {a["name"] for a in listed["applications"]} == {"Storefront v2", "Nightly job",
                                                               "Your account", "Admin console"}
        assert all("clientSecret" not in a for a in listed["applications"])
        return created

    tools(scenario)


def test_flow_create_get_update_and_paginated_list(tools: Callable[..., Any]) -> None:
    existing, _ = catalog.list_flows(limit=1)
    existing_auth, _ = catalog.list_flows(flow_type="AUTHENTICATION", limit=1)

    async def scenario(session: ClientSession) -> None:
        created = [await call(session, "svc_create_flow", password_flow(f"mcp-flow-{n}"))
                   for n in range(3)]
        signup = await call(session, "svc_create_flow", signup_flow("mcp-signup"))
        assert signup["flowType"] == "REGISTRATION"
        first = created[0]
        assert first["handle"] == "mcp-flow-0" and first["flowType"] == "AUTHENTICATION"
        assert first["nodes"] == password_flow("mcp-flow-0")["nodes"]  # stored as sent

        by_id = await call(session, "svc_get_flow_by_id", {"id": first["id"]})
        by_handle = await call(session, "svc_get_flow_by_handle",
                               {"handle": "mcp-flow-0", "flow_type": "AUTHENTICATION"})
        assert by_id == by_handle == first
        assert (await call_failing(session, "svc_get_flow_by_handle",
                                   {"handle": "mcp-flow-0", "flow_type": "REGISTRATION"})
                ) == tool_error("svc_get_flow_by_handle", "get flow",
                                "No REGISTRATION flow with handle 'mcp-flow-0'.")

        nodes = copy.deepcopy(by_id["nodes"])
        nodes[1]["prompts"][0]["inputs"][0]["identifier"] = "email"
        updated = await call(session, "svc_update_flow",
                             {"id": first["id"], "name": "Email sign-in", "nodes": nodes})
        assert updated["name"] == "Email sign-in" and updated["handle"] == "mcp-flow-0"
        again = await call(session, "svc_get_flow_by_id", {"id": first["id"]})
        assert again["nodes"][1]["prompts"][0]["inputs"][0]["identifier"] == "email"
        assert catalog.get_flow(first["id"])["name"] == "Email sign-in"

        total = existing + 4
        page = await call(session, "svc_list_flows")
        assert page["total_count"] == total
        assert len(page["flows"]) == min(total, 30)
        assert set(page["flows"][0]) == {"id", "handle", "name", "flowType", "createdAt",
                                         "updatedAt"}
        seen = []
        for offset in range(0, total, 2):
            chunk = await call(session, "svc_list_flows", {"limit": 2, "offset": offset})
            assert chunk["total_count"] == total
            seen += [flow["id"] for flow in chunk["flows"]]
        assert len(seen) == len(set(seen)) == total
        assert {flow["id"] for flow in created} <= set(seen)
        past_end = await call(session, "svc_list_flows", {"limit": 2, "offset": total})
        assert past_end == {"total_count": total, "flows": []}

        only_auth = await call(session, "svc_list_flows", {"flow_type": "AUTHENTICATION"})
        assert only_auth["total_count"] == existing_auth + 3
        assert {f["flowType"] for f in only_auth["flows"]} == {"AUTHENTICATION"}
        only_signup = await call(session, "svc_list_flows",
                                 {"flow_type": "REGISTRATION", "limit": 100})
        assert signup["id"] in {f["id"] for f in only_signup["flows"]}

    tools(scenario)


def engine_error(document: dict[str, Any]) -> str:
    """What the flow engine's own validation says about ``document``."""
    with pytest.raises(InvalidField) as refused:
        validate_flow(document)
    return refused.value.description


def test_flows_are_validated_exactly_as_the_flow_engine_does(tools: Callable[..., Any]) -> None:
    dangling = password_flow("mcp-dangling")
    dangling["nodes"][2]["onSuccess"] = "nowhere"
    early_passkey = signup_flow("mcp-early-passkey")
    early_passkey["nodes"][0]["onSuccess"] = "register"
    early_passkey["nodes"].append({
        "id": "register", "type": "TASK_EXECUTION", "onSuccess": "collect",
        "executor": {"name": "PasskeyAuthExecutor", "mode": "register_start",
                     "properties": {"relyingPartyId": "localhost"}}})

    async def scenario(session: ClientSession) -> None:
        for document in (dangling, early_passkey):
            message = await call_failing(session, "svc_create_flow", document)
            assert message == tool_error("svc_create_flow", "create flow", engine_error(document))
        created = await call(session, "svc_create_flow", password_flow("mcp-valid"))
        looping = copy.deepcopy(created["nodes"])
        looping[3]["onFailure"] = "check"  # check -> assert -> check: no PROMPT on the cycle
        message = await call_failing(session, "svc_update_flow",
                                     {"id": created["id"], "name": "x", "nodes": looping})
        # Which node of the cycle the engine names depends on set order (hash seed).
        cycle_error = engine_error({**password_flow("mcp-valid"), "nodes": looping})
        assert message.startswith(tool_error("svc_update_flow", "update flow", "Field 'node '"))
        assert message.endswith(cycle_error.split("'': ", 1)[1])
        invalid_type = await call_failing(session, "svc_create_flow",
                                          {**password_flow("mcp-bad"), "flowType": "NO_SUCH_TYPE"})
        assert "flowType" in invalid_type  # refused by the input schema's enum

    tools(scenario)


def test_theme_organization_unit_and_user_type_tools(tools: Callable[..., Any]) -> None:
    async def scenario(session: ClientSession) -> None:
        theme_id = (await call(session, "svc_list_themes"))["themes"][0]["id"]
        theme = await call(session, "svc_get_theme_by_id", {"id": theme_id})
        assert theme["id"] == theme_id
        assert set(theme["theme"]["colorSchemes"]) == {"light", "dark"}
        assert theme["theme"]["colorSchemes"]["light"]["primary"].startswith("#")
        assert theme["theme"]["typography"]["fontFamily"]

        units = await call(session, "svc_list_organization_units")
        assert units["total_count"] == len(units["organization_units"]) >= 1
        default_unit = next(u for u in units["organization_units"] if u["handle"] == "default")
        assert default_unit["name"] == "Default"

        types = await call(session, "svc_list_user_types")
        person = next(t for t in types["user_types"] if t["name"] == "person")
        assert types["total_count"] == len(types["user_types"])
        assert person["allowSelfRegistration"] is True
        assert person["ouId"] == default_unit["id"]
        assert person["schema"]["email"] == {"type": "string", "required": False,
                                             "unique": True}

    tools(scenario)


LISTS = {"svc_list_applications": "applications", "svc_list_themes": "themes",
         "svc_list_organization_units": "organization_units",
         "svc_list_user_types": "user_types", "list_roles": "roles"}


def test_every_list_tool_pages_and_answers_compact_json(tools: Callable[..., Any]) -> None:
    for number in range(3):
        directory_service.create_ou(handle=f"unit-{number}", name=f"Unit {number}",
                                    origin=RequestOrigin(actor="test"))

    async def scenario(session: ClientSession) -> None:
        for name, key in LISTS.items():
            everything = await call(session, name, {"limit": 100})
            total = everything["total_count"]
            assert total == len(everything[key]), name
            pages = [await call(session, name, {"limit": 2, "offset": offset})
                     for offset in range(0, total, 2)]
            assert all(page["total_count"] == total for page in pages), name
            assert [item for page in pages for item in page[key]] == everything[key], name
            result = await session.call_tool(name, {"limit": 2})
            assert "\n" not in first_text(result) and ", " not in first_text(result), name
            listed = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert {"limit", "offset"} <= set(listed[name].input_schema["properties"]), name
        refused = await call_failing(session, "svc_list_themes", {"limit": 101})
        assert "limit" in refused

    tools(scenario)


def test_react_sdk_guidance_names_this_service(tools: Callable[..., Any],
                                              service: Service) -> None:
    async def scenario(session: ClientSession) -> tuple[dict[str, Any], dict[str, Any], str]:
        default = await call(session, "svc_integrate_react_sdk")
        custom = await call(session, "svc_integrate_react_sdk",
                            {"service_url": "https://id.example.com/"})
        invalid = await call_failing(session, "svc_integrate_react_sdk",
                                     {"service_url": "id.example.com"})
        return default, custom, invalid

    default, custom, invalid = tools(scenario)
    assert default["service_url"] == service.base_url
    assert default["authority"] == service.config.issuer
    assert default["packages"] == ["react-oidc-context", "oidc-client-ts"]
    assert default["endpoints"]["flow_execute"] == f"{service.base_url}/flow/execute"
    modes = [section["title"] for section in default["sections"]]
    assert [title.split(":")[0] for title in modes] == ["Mode 1", "Mode 2",
                                                         "App-native sign-up (REGISTRATION flow)"]
    guide = "\n".join(section["markdown"] for section in default["sections"])
    assert f'authority: "{service.config.issuer}"' in guide
    assert f'const SERVICE_URL = "{service.base_url}";' in guide
    for api in ("AuthProvider", "useAuth()", "signinRedirect", "onSigninCallback",
                "/flow/execute", "navigator.credentials.get", "navigator.credentials.create",
                "passkeyChallenge", "passkeyCreationOptions", 'flowType="REGISTRATION"'):
        assert api in guide, api
    assert "{{" not in guide

    custom_guide = "\n".join(section["markdown"] for section in custom["sections"])
    assert custom["service_url"] == custom["authority"] == "https://id.example.com"
    assert 'const SERVICE_URL = "https://id.example.com";' in custom_guide
    assert service.base_url not in custom_guide
    assert invalid == tool_error("svc_integrate_react_sdk", "integrate the React SDK",
                                 "Field 'service_url': must be an absolute http(s) URL, "
                                 "got 'id.example.com'")


def test_failures_are_tool_errors_that_say_why(tools: Callable[..., Any]) -> None:
    async def scenario(session: ClientSession) -> None:
        expected = {
            ("svc_get_application_by_id", "get application", '{"id": "nope"}'):
                "No application with id 'nope'.",
            ("svc_get_application_by_client_id", "get application", '{"client_id": "nope"}'):
                "No application with client id 'nope'.",
            ("svc_update_application", "update application", '{"id": "nope", "name": "x"}'):
                "No application with id 'nope'.",
            ("svc_get_flow_by_id", "get flow", '{"id": "nope"}'): "No flow with id 'nope'.",
            ("svc_update_flow", "update flow",
             '{"id": "nope", "name": "x", "nodes": [{"id": "s", "type": "START"}]}'):
                "No flow 'nope'.",
            ("svc_get_theme_by_id", "get theme", '{"id": "nope"}'): "No theme 'nope'.",
        }
        for (name, operation, arguments), description in expected.items():
            message = await call_failing(session, name, json.loads(arguments))
            assert message == tool_error(name, operation, description)
        out_of_range = await call_failing(session, "svc_list_flows", {"limit": 0})
        assert "limit" in out_of_range
        missing = await call_failing(session, "svc_get_flow_by_handle", {"handle": "x"})
        assert "flow_type" in missing
        unknown = await session.call_tool("svc_delete_everything", {})
        assert unknown.is_error is True

    tools(scenario)


def test_changes_are_audited_with_the_mcp_caller(tools: Callable[..., Any],
                                                transport: Transport) -> None:
    async def scenario(session: ClientSession) -> dict[str, Any]:
        return await call(session, "svc_create_flow", password_flow("mcp-audited"))

    flow = tools(scenario)
    events = audit.events(event="flow.create")
    mine = [event for event in events if event["details"] == {"id": flow["id"]}]
    expected_actor = "mcp:stdio" if transport == "stdio" else f"mcp:{ADMIN_SUBJECT}"
    assert [event["actor"] for event in mine] == [expected_actor]
    assert mine[0]["outcome"] == "success"


def test_roles_are_created_given_and_taken_with_the_role_tools(tools: Callable[..., Any],
                                                              transport: Transport) -> None:
    person = directory_service.create_user(username=f"rota-{transport}", attributes={},
                                           origin=TEST_ORIGIN)

    async def scenario(session: ClientSession) -> None:
        role = await call(session, "create_role", {
            "name": f"orders-{transport}", "scopes": ["orders:write"],
            "description": "Changes orders"})
        assert role["scopes"] == ["orders:write"]
        given = await call(session, "grant_role", {"user": person.username,
                                                   "role": role["name"]})
        assert given["user_id"] == person.id
        assert [held["name"] for held in given["roles"]] == [role["name"]]
        listed = await call(session, "list_roles", {"limit": 100})
        assert {"admin", role["name"]} <= {item["name"] for item in listed["roles"]}
        taken = await call(session, "revoke_role", {"user": person.id, "role": role["name"]})
        assert taken["roles"] == []
        again = await call_failing(session, "revoke_role", {"user": person.id,
                                                            "role": role["name"]})
        assert "failed to revoke role:" in again and "does not hold" in again
        unknown = await call_failing(session, "grant_role", {"user": person.id,
                                                             "role": "no-such-role"})
        assert "No role 'no-such-role'" in unknown

    tools(scenario)
    actor = "mcp:stdio" if transport == "stdio" else f"mcp:{ADMIN_SUBJECT}"
    assert {event["actor"] for event in audit.events(event="role.grant")
            if event["userId"] == person.id} == {actor}


def test_an_assistant_signs_a_user_out_everywhere(tools: Callable[..., Any],
                                                  service: Service) -> None:
    person = directory_service.create_user(username=f"roam-{uuid.uuid4().hex[:6]}",
                                           attributes={}, origin=TEST_ORIGIN)
    context = ServiceContext.for_config(service.config)
    for _ in range(2):
        sessions_service.start(context, user_id=person.id, auth_time=time.time(),
                               amr=["pwd"], origin=RequestOrigin(address="127.0.0.1"))

    async def scenario(session: ClientSession) -> dict[str, Any]:
        return await call(session, "end_user_sessions", {"user": person.username})

    assert tools(scenario) == {"user_id": person.id, "username": person.username, "ended": 2}
    assert sessions_service.list_user_sessions(context, person.id) == []


def test_a_misspelt_key_in_a_document_is_refused_naming_the_key_meant(
        tools: Callable[..., Any]) -> None:
    async def scenario(session: ClientSession) -> None:
        m2m = (await call(session, "svc_get_application_templates"))["templates"]["M2M"]
        typo = {**m2m, "name": "Nightly job", "isRegistrationFlowEnable": True}
        typo["inboundAuthConfig"][0]["config"]["scope"] = ["api"]
        refused = await call_failing(session, "svc_create_application", typo)
        assert refused.startswith(tool_error("svc_create_application", "create application",
                                             "Field '"))
        assert "unknown key" in refused and "isRegistrationFlowEnable" in refused
        assert "did you mean isRegistrationFlowEnabled?" in refused
        assert "inboundAuthConfig[0].config.scope" in refused
        assert "did you mean scopes?" in refused
        assert all(app["name"] != "Nightly job" for app in catalog.list_applications())

        flow = copy.deepcopy(password_flow("typo-flow"))
        flow["nodes"][0]["onSucess"] = flow["nodes"][0].pop("onSuccess")
        refused = await call_failing(session, "svc_create_flow", flow)
        assert "Field 'nodes[0].onSucess': unknown key (did you mean onSuccess?)" in refused

        spa = (await call(session, "svc_get_application_templates"))["templates"]["SPA"]
        placeholder = await call_failing(session, "svc_create_application",
                                         {**spa, "name": "Shop"})
        assert "call svc_list_themes" in placeholder and "identityctl" not in placeholder

    tools(scenario)
