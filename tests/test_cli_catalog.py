"""`identityctl app`, `flow` and `theme` against a running deployment (Typer's runner)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from identityctl.security.passwords import verify_password
from identityctl.store import catalog
from tests.test_cli_directory import Cli, error_code, ok_json

REDIRECT = "https://shop.example.com/callback"
PASSWORD_FLOW = {
    "handle": "password-login", "name": "Password sign-in", "flowType": "AUTHENTICATION",
    "nodes": [
        {"id": "start", "type": "START", "onSuccess": "prompt_credentials"},
        {"id": "prompt_credentials", "type": "PROMPT", "prompts": [{
            "inputs": [{"ref": "u", "identifier": "username", "type": "TEXT_INPUT"},
                       {"ref": "p", "identifier": "password", "type": "PASSWORD_INPUT"}],
            "action": {"ref": "submit", "nextNode": "credentials_auth"}}]},
        {"id": "credentials_auth", "type": "TASK_EXECUTION",
         "executor": {"name": "BasicAuthExecutor"}, "onSuccess": "auth_assert",
         "onIncomplete": "prompt_credentials"},
        {"id": "auth_assert", "type": "TASK_EXECUTION",
         "executor": {"name": "AuthAssertExecutor"}, "onSuccess": "end"},
        {"id": "end", "type": "END"},
    ],
}


def write_json(folder: Path, name: str, document: Any) -> str:
    path = folder / name
    path.write_text(json.dumps(document))
    return str(path)


def oauth(application: dict[str, Any]) -> dict[str, Any]:
    return application["inboundAuthConfig"][0]["config"]


# --- applications ---------------------------------------------------------------------------


def test_an_spa_from_its_template_is_a_public_client_without_secret(cli: Cli) -> None:
    shop = ok_json(cli, "app", "create", "--template", "spa", "--name", "Shop",
                   "--redirect-uri", REDIRECT)
    assert shop["clientSecret"] is None
    assert oauth(shop)["publicClient"] is True
    assert oauth(shop)["redirectUris"] == [REDIRECT]
    assert shop["themeId"] == ok_json(cli, "theme", "show", "default")["id"]
    shown = ok_json(cli, "app", "show", oauth(shop)["clientId"])
    assert shown == {key: value for key, value in shop.items() if key != "clientSecret"}
    assert [app["name"] for app in ok_json(cli, "app", "list")] == ["Admin console", "Shop",
                                                                  "Your account"]


def test_an_application_gets_the_default_flows_or_the_ones_named(cli: Cli) -> None:
    def flow_id(handle: str, flow_type: str) -> str:
        return ok_json(cli, "flow", "show", handle, "--type", flow_type)["id"]

    shop = ok_json(cli, "app", "create", "--template", "SPA", "--name", "Shop",
                   "--redirect-uri", REDIRECT)
    assert shop["authFlowId"] == flow_id("default-basic-passkey-flow", "AUTHENTICATION")
    assert shop["registrationFlowId"] == flow_id("default-basic-passkey-flow", "REGISTRATION")
    assert shop["isRegistrationFlowEnabled"] is False
    kiosk = ok_json(cli, "app", "create", "--template", "SPA", "--name", "Kiosk",
                    "--redirect-uri", REDIRECT, "--sign-in-flow", "default-passkey-flow",
                    "--sign-up-flow", "default-passkey-flow", "--allow-sign-up")
    assert kiosk["authFlowId"] == flow_id("default-passkey-flow", "AUTHENTICATION")
    assert kiosk["registrationFlowId"] == flow_id("default-passkey-flow", "REGISTRATION")
    assert kiosk["isRegistrationFlowEnabled"] is True
    assert "default-passkey-flow" in cli("app", "show", kiosk["id"]).stdout
    assert error_code(cli, "app", "create", "--template", "SPA", "--name", "X",
                      "--redirect-uri", REDIRECT, "--sign-in-flow", "nope") == "flow_not_found"


def test_a_confidential_client_secret_is_shown_once_and_stored_hashed(cli: Cli) -> None:
    result = cli("app", "create", "--template", "Server", "--name", "Backend",
                 "--redirect-uri", REDIRECT, "--theme", "default")
    assert result.exit_code == 0, result.output
    assert "only time the secret is shown" in result.stdout
    [backend] = [app for app in ok_json(cli, "app", "list") if app["name"] == "Backend"]
    client_id = oauth(backend)["clientId"]
    secret = re.search(r"│ (\S+) +│", result.stdout).group(1)
    assert verify_password(catalog.client_secret_hash(client_id), secret)
    assert secret not in cli("app", "show", client_id).stdout
    assert secret not in json.dumps(ok_json(cli, "app", "show", client_id))


def test_generated_client_ids_are_plain_letters_and_digits() -> None:
    """A client id is typed on command lines: one starting with "-" would read as an option."""
    from identityctl.services.catalog.applications import new_client_id

    ids = [new_client_id() for _ in range(2000)]
    assert all(len(client_id) == 24 and client_id.isascii() and client_id.isalnum()
               for client_id in ids)
    assert len(set(ids)) == len(ids)


def test_rotating_the_secret_retires_the_old_one(cli: Cli) -> None:
    service = ok_json(cli, "app", "create", "--template", "M2M", "--name", "Worker")
    client_id = oauth(service)["clientId"]
    assert service["themeId"] is None
    assert cli("app", "rotate-secret", client_id, input="n\n").exit_code == 1
    assert verify_password(catalog.client_secret_hash(client_id), service["clientSecret"])
    rotated = ok_json(cli, "app", "rotate-secret", client_id, "--yes")
    assert rotated["clientId"] == client_id
    assert verify_password(catalog.client_secret_hash(client_id), rotated["clientSecret"])
    assert not verify_password(catalog.client_secret_hash(client_id), service["clientSecret"])
    spa = ok_json(cli, "app", "create", "--template", "SPA", "--name", "Shop",
                  "--redirect-uri", REDIRECT)
    assert error_code(cli, "app", "rotate-secret", spa["id"], "--yes") == "public_client"


def test_a_template_file_with_the_theme_placeholder_is_refused(cli: Cli, tmp_path: Path) -> None:
    template = cli("app", "templates", "SPA")
    assert template.exit_code == 0
    document = json.loads(template.stdout)
    assert document["themeId"] == "<THEME_ID>"
    path = write_json(tmp_path, "app.json", document)
    assert error_code(cli, "app", "create", "--file", path) == "theme_placeholder"
    created = ok_json(cli, "app", "create", "--file", path, "--theme", "default")
    assert created["name"] == document["name"]


def test_templates_need_a_name_and_somewhere_to_return_to(cli: Cli, tmp_path: Path) -> None:
    assert error_code(cli, "app", "create", "--template", "SPA", "--redirect-uri",
                      REDIRECT) == "missing_field"
    assert error_code(cli, "app", "create", "--template", "Server", "--name",
                      "Backend") == "missing_field"
    assert error_code(cli, "app", "create", "--template", "Desktop", "--name",
                      "X") == "invalid_field"
    assert error_code(cli, "app", "create", "--name", "X") == "conflicting_options"
    mobile = write_json(tmp_path, "mobile.json", json.loads(cli("app", "templates",
                                                                "Mobile").stdout))
    assert error_code(cli, "app", "create", "--file", mobile, "--theme",
                      "default") == "invalid_field"
    listing = ok_json(cli, "app", "templates")
    assert set(listing) == {"SPA", "Mobile", "Server", "Device", "M2M"}
    assert "themeId" not in listing["M2M"]


def test_an_application_round_trips_through_show_and_update(cli: Cli, tmp_path: Path) -> None:
    shop = ok_json(cli, "app", "create", "--template", "SPA", "--name", "Shop",
                   "--redirect-uri", REDIRECT)
    del shop["clientSecret"]
    edited = copy.deepcopy(shop)
    edited["name"] = "Shop (EU)"
    oauth(edited)["redirectUris"].append("https://eu.shop.example.com/callback")
    path = write_json(tmp_path, "app.json", edited)
    updated = ok_json(cli, "app", "update", shop["id"], "--file", path)
    assert updated["name"] == "Shop (EU)"
    assert len(oauth(updated)["redirectUris"]) == 2
    assert oauth(updated)["clientId"] == oauth(shop)["clientId"]
    oauth(edited)["publicClient"] = False
    oauth(edited)["tokenEndpointAuthMethod"] = "client_secret_basic"
    write_json(tmp_path, "app.json", edited)
    assert error_code(cli, "app", "update", shop["id"], "--file", path) == "invalid_field"
    assert ok_json(cli, "app", "delete", shop["id"], "--yes")["deleted"] == shop["id"]
    assert error_code(cli, "app", "show", shop["id"]) == "application_not_found"


def test_files_that_are_not_json_objects_are_refused(cli: Cli, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert error_code(cli, "app", "create", "--file", str(broken)) == "malformed_json"
    assert error_code(cli, "app", "create", "--file", str(tmp_path / "none.json")) \
        == "file_not_found"
    assert error_code(cli, "flow", "create", "--file",
                      write_json(tmp_path, "list.json", [])) == "malformed_json"


# --- flows ----------------------------------------------------------------------------------


def test_flow_validate_says_valid(cli: Cli, tmp_path: Path) -> None:
    path = write_json(tmp_path, "flow.json", PASSWORD_FLOW)
    result = cli("flow", "validate", "--file", path)
    assert result.exit_code == 0
    assert "valid" in result.stdout
    assert ok_json(cli, "flow", "validate", "--file", path)["valid"] is True


@pytest.mark.parametrize(("node", "change", "problem", "blamed"), [
    ("auth_assert", {"onSuccess": "nowhere"}, "unknown node 'nowhere'", {"auth_assert"}),
    ("credentials_auth", {"executor": {"name": "MagicExecutor"}}, "unknown executor",
     {"credentials_auth"}),
    ("auth_assert", {"onFailure": "credentials_auth"}, "cycle without a PROMPT",
     {"auth_assert", "credentials_auth"}),
])
def test_flow_validate_names_the_node_at_fault(cli: Cli, tmp_path: Path, node: str,
                                               change: dict[str, Any], problem: str,
                                               blamed: set[str]) -> None:
    document = copy.deepcopy(PASSWORD_FLOW)
    next(item for item in document["nodes"] if item["id"] == node).update(change)
    path = write_json(tmp_path, "flow.json", document)
    result = cli("flow", "validate", "--file", path)
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert "invalid_flow" in message
    assert problem in message
    assert any(f"node '{name}'" in message for name in blamed), message
    assert error_code(cli, "flow", "create", "--file", path) == "invalid_flow"


def test_flows_are_created_listed_updated_and_deleted(cli: Cli, tmp_path: Path) -> None:
    path = write_json(tmp_path, "flow.json", PASSWORD_FLOW)
    created = ok_json(cli, "flow", "create", "--file", path)
    assert created["nodes"] == PASSWORD_FLOW["nodes"]
    assert error_code(cli, "flow", "create", "--file", path) == "flow_exists"
    registration = {**PASSWORD_FLOW, "flowType": "REGISTRATION",
                    "nodes": [{"id": "start", "type": "START", "onSuccess": "end"},
                              {"id": "end", "type": "END"}]}
    ok_json(cli, "flow", "create", "--file", write_json(tmp_path, "reg.json", registration))
    listing = ok_json(cli, "flow", "list", "--type", "authentication")
    handles = [flow["handle"] for flow in listing["flows"]]
    assert "password-login" in handles  # next to the seeded default flows
    assert all(flow["flowType"] == "AUTHENTICATION" for flow in listing["flows"])
    assert listing["total_count"] == len(handles)
    assert error_code(cli, "flow", "list", "--type", "NOT_A_FLOW_TYPE") == "invalid_field"
    shown = ok_json(cli, "flow", "show", "password-login", "--type", "AUTHENTICATION")
    assert shown == created
    assert "BasicAuthExecutor" in cli("flow", "show", created["id"]).stdout

    shown["name"] = "Sign in with a password"
    updated = ok_json(cli, "flow", "update", created["id"], "--file",
                      write_json(tmp_path, "edit.json", shown))
    assert updated["name"] == "Sign in with a password"
    shown["nodes"][0]["onSuccess"] = "nowhere"
    assert error_code(cli, "flow", "update", created["id"], "--file",
                      write_json(tmp_path, "edit.json", shown)) == "invalid_flow"

    deleted = ok_json(cli, "flow", "delete", "password-login", "--type", "REGISTRATION",
                      "--yes")
    assert deleted["flowType"] == "REGISTRATION"
    assert ok_json(cli, "flow", "show", "password-login")["id"] == created["id"]
    assert error_code(cli, "flow", "show", "password-login", "--type",
                      "REGISTRATION") == "flow_not_found"


# --- themes ---------------------------------------------------------------------------------


def test_themes_are_managed_from_files(cli: Cli, tmp_path: Path) -> None:
    default = ok_json(cli, "theme", "show", "default")
    ocean = {**default, "handle": "ocean", "displayName": "Ocean"}
    path = write_json(tmp_path, "ocean.json", ocean)
    created = ok_json(cli, "theme", "create", "--file", path)
    assert created["id"] != default["id"]
    assert created["theme"] == default["theme"]
    assert error_code(cli, "theme", "create", "--file", path) == "theme_exists"
    assert [theme["handle"] for theme in ok_json(cli, "theme", "list")] == ["default", "ocean"]
    partial = write_json(tmp_path, "partial.json", {"description": "Deep blue"})
    updated = ok_json(cli, "theme", "update", "ocean", "--file", partial)
    assert (updated["description"], updated["displayName"]) == ("Deep blue", "Ocean")
    assert ok_json(cli, "theme", "delete", "ocean", "--yes")["deleted"] == created["id"]
    assert error_code(cli, "theme", "show", "ocean") == "theme_not_found"


def test_bad_theme_documents_are_refused(cli: Cli, tmp_path: Path) -> None:
    no_handle = write_json(tmp_path, "a.json", {"displayName": "X"})
    assert error_code(cli, "theme", "create", "--file", no_handle) == "missing_field"
    bad_handle = write_json(tmp_path, "b.json", {"handle": "Sea Blue", "displayName": "X"})
    assert error_code(cli, "theme", "create", "--file", bad_handle) == "invalid_field"
    bad_colors = write_json(tmp_path, "c.json", {"handle": "sea", "displayName": "X",
                                                 "theme": {"colorSchemes": {"light": 1}}})
    assert error_code(cli, "theme", "create", "--file", bad_colors) == "invalid_field"


def test_app_update_takes_the_options_of_app_create(cli: Cli) -> None:
    shop = ok_json(cli, "app", "create", "--template", "SPA", "--name", "Shop",
                   "--redirect-uri", REDIRECT)
    client_id = oauth(shop)["clientId"]
    updated = ok_json(cli, "app", "update", client_id, "--name", "Shop 2", "--allow-sign-up",
                      "--redirect-uri", "https://shop.example.com/other",
                      "--sign-in-flow", "default-passkey-flow")
    assert updated["name"] == "Shop 2" and updated["isRegistrationFlowEnabled"] is True
    assert oauth(updated)["redirectUris"] == ["https://shop.example.com/other"]
    assert oauth(updated)["clientId"] == client_id and updated["themeId"] == shop["themeId"]
    assert updated["authFlowId"] == ok_json(cli, "flow", "show", "default-passkey-flow",
                                            "--type", "AUTHENTICATION")["id"]


# --- what a first week brings ---------------------------------------------------------------


def test_a_misspelt_key_in_a_file_is_refused_naming_its_path_and_the_key_meant(
        cli: Cli, tmp_path: Path) -> None:
    document = json.loads(cli("app", "templates", "SPA").stdout)
    document.update(name="Shop", themeId="default", isRegistrationFlowEnable=True)
    document["inboundAuthConfig"][0]["config"]["pkceRequird"] = True
    refused = cli("app", "create", "--file", write_json(tmp_path, "app.json", document))
    said = " ".join(refused.stderr.split())
    assert refused.exit_code == 1 and "unknown_key" in said
    assert "'inboundAuthConfig[0].config.pkceRequird': unknown key (did you mean " \
           "pkceRequired?); also unknown: isRegistrationFlowEnable (did you mean " \
           "isRegistrationFlowEnabled?)" in said
    assert all(app["name"] != "Shop" for app in catalog.list_applications())

    flow = copy.deepcopy(PASSWORD_FLOW)
    flow["nodes"][0]["onSucess"] = flow["nodes"][0].pop("onSuccess")
    path = write_json(tmp_path, "flow.json", flow)
    for command in (("flow", "validate"), ("flow", "create")):
        assert error_code(cli, *command, "--file", path) == "unknown_key"
    assert "did you mean onSuccess?" in " ".join(cli("flow", "create", "--file",
                                                     path).stderr.split())
    theme = write_json(tmp_path, "theme.json", {"handle": "sea", "displayName": "Sea",
                                                "colour": "#005f87"})
    assert "'colour': unknown key (the keys here are" in " ".join(cli("theme", "create", "--file",
                                                   theme).stderr.split())


def test_an_application_is_found_by_its_name_and_an_ambiguous_name_is_refused(
        cli: Cli) -> None:
    shop = ok_json(cli, "app", "create", "--template", "SPA", "--name", "Shop",
                   "--redirect-uri", REDIRECT)
    assert ok_json(cli, "app", "show", "Shop")["id"] == shop["id"]
    assert ok_json(cli, "app", "show", "shop")["id"] == shop["id"]  # no other in any case
    other = ok_json(cli, "app", "create", "--template", "M2M", "--name", "SHOP")
    assert ok_json(cli, "app", "show", "SHOP")["id"] == other["id"]  # exact wins
    assert error_code(cli, "app", "show", "shop") == "ambiguous_application"
    said = " ".join(cli("app", "delete", "shop", "--yes").stderr.split())
    assert f"client id {oauth(shop)['clientId']}" in said and "Give its client id" in said
    assert error_code(cli, "app", "show", "Nope") == "application_not_found"


def test_the_device_grant_comes_from_a_template_or_a_flag(cli: Cli) -> None:
    device = "urn:ietf:params:oauth:grant-type:device_code"
    tv = ok_json(cli, "app", "create", "--template", "Device", "--name", "Living-room TV")
    assert oauth(tv)["grantTypes"] == [device, "refresh_token"]
    assert oauth(tv)["publicClient"] is True and oauth(tv)["redirectUris"] == []
    both = ok_json(cli, "app", "create", "--template", "SPA", "--name", "Shop",
                   "--redirect-uri", REDIRECT, "--grant", "authorization_code",
                   "--grant", "device_code")
    assert oauth(both)["grantTypes"] == ["authorization_code", device]
    assert error_code(cli, "app", "update", "Shop", "--grant", "implicit") == "invalid_field"


def test_what_app_create_prints_names_things_as_people_type_them(cli: Cli,
                                                                 tmp_path: Path) -> None:
    made = cli("app", "create", "--template", "SPA", "--name", "Shop", "--redirect-uri",
               REDIRECT)
    theme = next(line for line in made.stdout.splitlines() if line.strip().startswith("theme"))
    assert theme.split() == ["theme", "default"]
    document = json.loads(cli("app", "templates", "SPA").stdout) | {"name": "Blog"}
    refused = cli("app", "create", "--file", write_json(tmp_path, "blog.json", document))
    said = " ".join(refused.stderr.split())
    assert "placeholder <THEME_ID>" in said and "`identityctl theme list`" in said
    assert "svc_list_themes" not in said


def test_tables_never_break_an_id_at_80_columns(cli: Cli) -> None:
    for name in ("Shop", "Internal reporting dashboard for the finance team"):
        ok_json(cli, "app", "create", "--template", "SPA", "--name", name,
                "--redirect-uri", REDIRECT)
    shown = cli("app", "list").stdout
    for application in catalog.list_applications():
        assert application["id"] in shown  # whole, on one line
        assert oauth(application)["clientId"] in shown
