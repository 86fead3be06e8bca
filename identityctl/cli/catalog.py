"""`identityctl app`, `flow` and `theme`: manage what sign-in looks like and who may use it.

Definitions come from JSON files in the shapes `show --json` prints, so an export, an edit
and an update round-trip. Every command goes through identityctl.services.catalog (the same
rules and audit trail as the MCP tools); services are imported inside the commands so that
`--help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.panel import Panel
from rich.table import Table

from identityctl.cli.common import (
    ORIGIN,
    Session,
    YesOption,
    command,
    confirm_and_delete,
    read_json_file,
    when,
)
from identityctl.cli.output import JsonOption, console, done, emit_json, show_record, show_table
from identityctl.errors import BadRequest, InvalidField, MissingField, NotFound

app_app = typer.Typer(
    help="Applications (OAuth 2.0 / OIDC clients): create from a template or a JSON file, "
         "list, show, update, delete, rotate the client secret.", no_args_is_help=True)
flow_app = typer.Typer(
    help="Sign-in and sign-up flows (JSON graphs of prompts and tasks): create, validate, "
         "list, show, update, delete.", no_args_is_help=True)
theme_app = typer.Typer(help="Themes of the hosted sign-in pages: colors and typography.",
                        no_args_is_help=True)

FileOption = typer.Option(..., "--file", "-f", metavar="PATH",
                          help="JSON file ('-' reads standard input).")


def _document(path: Path, what: str) -> dict[str, Any]:
    """The application, flow or theme in the file, refused if it holds a key such a record
    does not have (services/shapes.py: a misspelt key would otherwise be dropped)."""
    from identityctl.services import shapes

    document = read_json_file(path)
    if not isinstance(document, dict):
        raise BadRequest(f"{path} must hold one JSON object (the {what}).",
                         code="malformed_json")
    shapes.check(document, {"application": shapes.APPLICATION, "flow": shapes.FLOW,
                            "theme": shapes.THEME}[what])
    return document


# --- applications ---------------------------------------------------------------------------


def _oauth(application: dict[str, Any]) -> dict[str, Any]:
    from identityctl.services.catalog.applications import oauth_config

    return oauth_config(application)


def _flow_name(flow_id: str | None) -> str | None:
    """A flow's handle (what people type), with its id for scripts."""
    if not flow_id:
        return None
    from identityctl.services import catalog as catalog_service

    try:
        return f"{catalog_service.flows.require_flow(flow_id)['handle']} ({flow_id})"
    except NotFound:
        return flow_id


def _theme_name(theme_id: str | None) -> str | None:
    """A theme's handle (what people type and recognise), not its id."""
    if not theme_id:
        return None
    from identityctl.services import catalog as catalog_service

    try:
        return catalog_service.themes.require_theme(theme_id)["handle"]
    except NotFound:
        return theme_id


def _application_view(application: dict[str, Any]) -> dict[str, Any]:
    oauth = _oauth(application)
    return {"name": application["name"], "id": application["id"],
            "client id": oauth.get("clientId"), "template": application["template"] or None,
            "client type": "public" if oauth.get("publicClient") else "confidential",
            "grant types": ", ".join(oauth.get("grantTypes", [])),
            "redirect URIs": "\n".join(oauth.get("redirectUris", [])) or None,
            "scopes": " ".join(oauth.get("scopes", [])), "PKCE": oauth.get("pkceRequired"),
            "theme": _theme_name(application["themeId"]),
            "sign-in flow": _flow_name(application["authFlowId"]),
            "sign-up flow": _flow_name(application["registrationFlowId"])
            if application["isRegistrationFlowEnabled"] else None,
            "created": when(application["createdAt"]),
            "updated": when(application["updatedAt"])}


def _show_secret(secret: str) -> None:
    console.print(Panel(secret, title="Client secret", title_align="left",
                        border_style="yellow", expand=False))
    console.print("[yellow]This is the only time the secret is shown: identityctl keeps only "
                  "its hash. Store it in your secret manager now; if it is lost, run "
                  "`identityctl app rotate-secret`.[/yellow]")


def _from_template(name: str | None, template: str) -> tuple[str, dict[str, Any]]:
    from identityctl.services.catalog.applications import template_named

    chosen, document = template_named(template)
    if name is None:
        raise MissingField("name", "--template needs --name for the new application.")
    # Without --theme the default theme applies; the placeholder is for JSON authors.
    document.pop("themeId", None)
    return chosen, document


def _grant_types(names: list[str]) -> list[str]:
    """Grants by their full name or its last part (device_code for
    urn:ietf:params:oauth:grant-type:device_code)."""
    from identityctl.services.catalog.applications import GRANT_TYPES

    by_name = {**{grant.rsplit(":", 1)[-1]: grant for grant in GRANT_TYPES},
               **{grant: grant for grant in GRANT_TYPES}}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise InvalidField("grantTypes", f"{unknown[0]!r} is not one of "
                           f"{', '.join(grant.rsplit(':', 1)[-1] for grant in GRANT_TYPES)}")
    return [by_name[name] for name in names]


def _set_oauth(document: dict[str, Any], key: str, value: Any) -> None:
    entries = document.setdefault("inboundAuthConfig", [])
    if not isinstance(entries, list):
        raise InvalidField("inboundAuthConfig", "must be an array")
    entry = next((item for item in entries
                  if isinstance(item, dict) and item.get("type") == "oauth2"), None)
    if entry is None:
        entry = {"type": "oauth2"}
        entries.append(entry)
    entry.setdefault("config", {})[key] = value


NameOption = typer.Option(None, "--name", "-n", help="Application name (unique).")
RedirectUriOption = typer.Option(
    None, "--redirect-uri", "-r", metavar="URI",
    help="Where users return after sign-in; repeat for more. Replaces the file's.")
ThemeOption = typer.Option(None, "--theme",
                           help="Theme handle or id (default: the default theme).")
SignInFlowOption = typer.Option(
    None, "--sign-in-flow", metavar="HANDLE|ID",
    help="AUTHENTICATION flow (default: default-basic-passkey-flow; also seeded: "
         "default-passkey-flow, default-basic-flow). `identityctl flow list` shows all.")
SignUpFlowOption = typer.Option(
    None, "--sign-up-flow", metavar="HANDLE|ID",
    help="REGISTRATION flow (default: default-basic-passkey-flow, password then passkey; "
         "also seeded: default-passkey-flow, passkey only).")
GrantOption = typer.Option(
    None, "--grant", "-g", metavar="GRANT",
    help="A grant the client may use; repeat for more; replaces the template's or file's: "
         "authorization_code, refresh_token, client_credentials, device_code (a TV or "
         "command-line tool), token-exchange.")
AllowSignUpOption = typer.Option(
    None, "--allow-sign-up/--no-sign-up",
    help="Offer 'Create an account' on the hosted page (runs the sign-up flow).")
PasskeysOnlyOption = typer.Option(
    None, "--passkeys-only/--passwords-allowed",
    help="Refuse password sign-ins to it (passwords_not_allowed), or allow them again.")


def _apply_options(document: dict[str, Any], *, name: str | None,
                   redirect_uri: list[str] | None, grant: list[str] | None, theme: str | None,
                   sign_in_flow: str | None, sign_up_flow: str | None,
                   allow_sign_up: bool | None, passkeys_only: bool | None) -> dict[str, Any]:
    """The options of `app create` and `app update`, over the document (they win)."""
    if name is not None:
        document["name"] = name
    if redirect_uri:
        _set_oauth(document, "redirectUris", list(redirect_uri))
    if grant:
        _set_oauth(document, "grantTypes", _grant_types(list(grant)))
    if theme is not None:
        document["themeId"] = theme
    if sign_in_flow is not None:
        document["authFlowId"] = sign_in_flow
    if sign_up_flow is not None:
        document["registrationFlowId"] = sign_up_flow
    if allow_sign_up is not None:
        document["isRegistrationFlowEnabled"] = allow_sign_up
    if passkeys_only is not None:
        document["passkeysOnly"] = passkeys_only
    return document


@command(app_app, "create")
def app_create(
    file: Path | None = typer.Option(None, "--file", "-f", metavar="PATH",
                                     help="Application JSON ('-' reads standard input)."),
    template: str | None = typer.Option(None, "--template", "-t",
                                        help="Start from a template: SPA, Mobile, Server, "
                                             "Device (TV, command-line tool), M2M."),
    name: str | None = NameOption,
    redirect_uri: list[str] | None = RedirectUriOption,
    grant: list[str] | None = GrantOption,
    theme: str | None = ThemeOption,
    sign_in_flow: str | None = SignInFlowOption,
    sign_up_flow: str | None = SignUpFlowOption,
    allow_sign_up: bool | None = AllowSignUpOption,
    passkeys_only: bool | None = PasskeysOnlyOption,
    as_json: bool = JsonOption,
) -> None:
    """Register an application and print its client secret (confidential clients) ONCE.

    From a template:

        identityctl app create --template SPA --name "Shop" \\
            --redirect-uri https://shop.example.com/callback --theme default

    With passkey-only sign-in and sign-up offered on the hosted page:

        identityctl app create --template SPA --name "Shop" \\
            --redirect-uri https://shop.example.com/callback \\
            --sign-in-flow default-passkey-flow --sign-up-flow default-passkey-flow \\
            --allow-sign-up

    A TV or command-line tool (the device authorization grant: the person signs in on
    their phone with the code it shows):

        identityctl app create --template Device --name "Living-room TV"

    From a file (start one with `identityctl app templates Server > app.json`):

        identityctl app create --file app.json
    """
    from identityctl.services import catalog as catalog_service

    if (file is None) == (template is None):
        raise BadRequest("Give either --file or --template.", code="conflicting_options")
    Session.connected()
    chosen = None
    if file is not None:
        document = _document(file, "application")
    else:
        chosen, document = _from_template(name, template)
    _apply_options(document, name=name, redirect_uri=redirect_uri, grant=grant, theme=theme,
                   sign_in_flow=sign_in_flow, sign_up_flow=sign_up_flow,
                   allow_sign_up=allow_sign_up, passkeys_only=passkeys_only)
    if chosen is not None:
        catalog_service.applications.require_own_redirect_uri(chosen, document)
    with console.status("Creating the application..."):
        created, secret = catalog_service.applications.create_application(document, origin=ORIGIN)
    if as_json:
        emit_json({**created, "clientSecret": secret})
        return
    show_record(_application_view(created), title=f"Created application {created['name']}",
                as_json=False)
    if secret:
        _show_secret(secret)


@command(app_app, "list")
def app_list(as_json: bool = JsonOption) -> None:
    """List applications with their client ids and grant types.

        identityctl app list --json
    """
    from identityctl.services import catalog as catalog_service

    Session.connected()
    applications = catalog_service.applications.list_applications()
    rows = [_application_view(application) for application in applications]
    show_table(rows, [("name", "Name"), ("id", "Id"), ("client id", "Client id"),
                      ("template", "Template"), ("client type", "Client"),
                      ("grant types", "Grants")], title="Applications", as_json=as_json,
               json_data=applications)


@command(app_app, "show")
def app_show(application: str = typer.Argument(..., metavar="ID|CLIENT_ID|NAME"),
             as_json: bool = JsonOption) -> None:
    """Show an application (never its secret), by id, client id or name. Save it for
    editing with --json:

        identityctl app show Shop
        identityctl app show shop-client-id --json > app.json
    """
    from identityctl.services import catalog as catalog_service

    Session.connected()
    found = catalog_service.applications.require_application_named(application)
    show_record(found if as_json else _application_view(found),
                title=f"Application {found['name']}", as_json=as_json)


@command(app_app, "update")
def app_update(
    application: str = typer.Argument(..., metavar="ID|CLIENT_ID|NAME"),
    file: Path | None = typer.Option(None, "--file", "-f", metavar="PATH",
                                     help="Replace the settings with this JSON ('-' reads "
                                          "standard input); without it, the options change "
                                          "the current settings."),
    name: str | None = NameOption,
    redirect_uri: list[str] | None = RedirectUriOption,
    grant: list[str] | None = GrantOption,
    theme: str | None = ThemeOption,
    sign_in_flow: str | None = SignInFlowOption,
    sign_up_flow: str | None = SignUpFlowOption,
    allow_sign_up: bool | None = AllowSignUpOption,
    passkeys_only: bool | None = PasskeysOnlyOption,
    as_json: bool = JsonOption,
) -> None:
    """Change an application (client id and secret are kept): the same options as `app
    create`, over its current settings or over a JSON file.

        identityctl app update shop-client-id --allow-sign-up --theme ocean
        identityctl app show APP --json > app.json && $EDITOR app.json
        identityctl app update APP --file app.json
    """
    from identityctl.services import catalog as catalog_service

    Session.connected()
    current = catalog_service.applications.require_application_named(application)
    document = _document(file, "application") if file is not None else dict(current)
    _apply_options(document, name=name, redirect_uri=redirect_uri, grant=grant, theme=theme,
                   sign_in_flow=sign_in_flow, sign_up_flow=sign_up_flow,
                   allow_sign_up=allow_sign_up, passkeys_only=passkeys_only)
    document["id"] = current["id"]
    updated = catalog_service.applications.update_application(document, origin=ORIGIN)
    show_record(updated if as_json else _application_view(updated),
                title=f"Updated application {updated['name']}", as_json=as_json)


@command(app_app, "delete")
def app_delete(application: str = typer.Argument(..., metavar="ID|CLIENT_ID|NAME"),
               yes: bool = YesOption, as_json: bool = JsonOption) -> None:
    """Delete an application; its codes and refresh tokens stop working at once.

        identityctl app delete CLIENT_ID --yes
    """
    from identityctl.services import catalog as catalog_service

    Session.connected()
    found = catalog_service.applications.require_application_named(application)
    confirm_and_delete(f"application {found['name']}", found["id"],
                       catalog_service.applications.delete_application, yes=yes, as_json=as_json,
                       shown={"name": found["name"]})


@command(app_app, "rotate-secret")
def app_rotate_secret(application: str = typer.Argument(..., metavar="ID|CLIENT_ID|NAME"),
                      yes: bool = YesOption, as_json: bool = JsonOption) -> None:
    """Issue a new client secret; the old one stops working immediately. Shown ONCE.

        identityctl app rotate-secret APP --yes --json | jq -r .clientSecret
    """
    from identityctl.services import catalog as catalog_service

    Session.connected()
    found = catalog_service.applications.require_application_named(application)
    if not yes:
        typer.confirm(f"Replace the client secret of {found['name']}? Clients using the old "
                      "one fail until they get the new one.", abort=True, err=True)
    with console.status("Generating and hashing the new secret..."):
        secret = catalog_service.applications.regenerate_client_secret(found["id"], origin=ORIGIN)
    if as_json:
        emit_json({"id": found["id"], "clientId": _oauth(found)["clientId"],
                   "clientSecret": secret})
        return
    console.print(f"[green]✓[/green] new client secret for {found['name']}")
    _show_secret(secret)


@command(app_app, "templates")
def app_templates(
    template: str | None = typer.Argument(None, metavar="[NAME]",
                                          help="Print this template as JSON to start a file."),
    as_json: bool = JsonOption,
) -> None:
    """The application templates (SPA, Mobile, Server, Device, M2M), or one of them as JSON:

        identityctl app templates Server > app.json
    """
    from identityctl.services import catalog as catalog_service

    if template is not None:
        emit_json(catalog_service.applications.template_named(template)[1])
        return
    templates = catalog_service.applications.application_templates()
    rows = [{"name": key, **catalog_service.applications.oauth_config(value)}
            for key, value in templates.items()]
    for row in rows:
        row["client"] = "public" if row["publicClient"] else "confidential"
        row["grants"] = ", ".join(row["grantTypes"])
    show_table(rows, [("name", "Template"), ("client", "Client"),
                      ("tokenEndpointAuthMethod", "Token auth"), ("pkceRequired", "PKCE"),
                      ("grants", "Grants")], title="Application templates", as_json=as_json,
               json_data=templates)


# --- flows ----------------------------------------------------------------------------------

FlowTypeOption = typer.Option(
    None, "--type", metavar="TYPE",
    help="AUTHENTICATION, REGISTRATION or RECOVERY (needed when types share the handle).")


def _flow_type(value: str | None) -> str | None:
    return value.upper() if value else None


def _flow_summary(flow: dict[str, Any]) -> str:
    return f"{flow['flowType']} flow '{flow['handle']}' with {len(flow['nodes'])} nodes"


def _show_flow(flow: dict[str, Any], *, title: str, as_json: bool) -> None:
    from identityctl.flow.definition import executor_of, successors

    if as_json:
        emit_json(flow)
        return
    show_record({"handle": flow["handle"], "name": flow["name"], "type": flow["flowType"],
                 "id": flow["id"], "created": when(flow["createdAt"]),
                 "updated": when(flow["updatedAt"])}, title=title, as_json=False)
    nodes = Table(title="Nodes", title_justify="left")
    for heading in ("Id", "Type", "Executor", "Next"):
        nodes.add_column(heading)
    for node in flow["nodes"]:
        executor, mode = executor_of(node)
        nodes.add_row(node["id"], node["type"], f"{executor} {mode}".strip() or "-",
                      ", ".join(successors(node)) or "-")
    console.print(nodes)


@command(flow_app, "create")
def flow_create(file: Path = FileOption, as_json: bool = JsonOption) -> None:
    """Create a flow from its JSON definition (checked first, like `flow validate`).

        identityctl flow create --file my-passkey-flow.json
    """
    from identityctl.services import catalog as catalog_service

    document = _document(file, "flow")
    Session.connected()
    created = catalog_service.flows.create_flow(document, origin=ORIGIN)
    _show_flow(created, title=f"Created {_flow_summary(created)}", as_json=as_json)


@command(flow_app, "validate")
def flow_validate(file: Path = FileOption, as_json: bool = JsonOption) -> None:
    """Check a flow definition without saving it; an error names the node at fault.

        identityctl flow validate --file my-passkey-flow.json
    """
    from identityctl.flow.definition import validate_flow

    flow = validate_flow(_document(file, "flow"))
    done(f"valid: {_flow_summary(flow)}", as_json=as_json,
         data={"valid": True, "handle": flow["handle"], "flowType": flow["flowType"],
               "nodes": len(flow["nodes"])})


@command(flow_app, "list")
def flow_list(flow_type: str | None = FlowTypeOption,
              limit: int = typer.Option(100, help="At most this many flows."),
              offset: int = typer.Option(0, help="Skip this many flows first (paging)."),
              as_json: bool = JsonOption) -> None:
    """List flows, optionally of one type.

        identityctl flow list --type registration
    """
    from identityctl.services import catalog as catalog_service

    Session.connected()
    total, flows = catalog_service.flows.list_flows(flow_type=_flow_type(flow_type), limit=limit,
                                              offset=offset)
    rows = [{**flow, "nodes": len(flow["nodes"]), "updated": when(flow["updatedAt"])}
            for flow in flows]
    show_table(rows, [("handle", "Handle"), ("flowType", "Type"), ("name", "Name"),
                      ("nodes", "Nodes"), ("id", "Id"), ("updated", "Updated")],
               title="Flows" if total == len(flows) else f"Flows ({len(flows)} of {total})",
               as_json=as_json,
               json_data={"total_count": total, "flows": flows})


@command(flow_app, "show")
def flow_show(flow: str = typer.Argument(..., metavar="ID|HANDLE"),
              flow_type: str | None = FlowTypeOption, as_json: bool = JsonOption) -> None:
    """Show a flow and its nodes; --json prints the definition to edit and `flow update`.

        identityctl flow show default-passkey-flow --type AUTHENTICATION --json > flow.json
    """
    from identityctl.services import catalog as catalog_service

    Session.connected()
    found = catalog_service.flows.require_flow(flow, _flow_type(flow_type))
    _show_flow(found, title=_flow_summary(found), as_json=as_json)


@command(flow_app, "update")
def flow_update(flow: str = typer.Argument(..., metavar="ID|HANDLE"), file: Path = FileOption,
                flow_type: str | None = FlowTypeOption, as_json: bool = JsonOption) -> None:
    """Replace a flow's name, handle and nodes with a JSON definition (its type is fixed).

        identityctl flow update default-basic-flow --type AUTHENTICATION --file flow.json
    """
    from identityctl.services import catalog as catalog_service

    document = _document(file, "flow")
    Session.connected()
    current = catalog_service.flows.require_flow(flow, _flow_type(flow_type))
    if document.get("flowType", current["flowType"]) != current["flowType"]:
        raise InvalidField("flowType", f"the flow is {current['flowType']} and cannot change "
                           "type; create a new flow instead", code="invalid_flow")
    updated = catalog_service.flows.update_flow(current["id"], name=document.get("name"),
                                          nodes=document.get("nodes"),
                                          handle=document.get("handle"), origin=ORIGIN)
    _show_flow(updated, title=f"Updated {_flow_summary(updated)}", as_json=as_json)


@command(flow_app, "delete")
def flow_delete(flow: str = typer.Argument(..., metavar="ID|HANDLE"),
                flow_type: str | None = FlowTypeOption, yes: bool = YesOption,
                as_json: bool = JsonOption) -> None:
    """Delete a flow; applications that used it are left without that flow.

        identityctl flow delete password-login --type AUTHENTICATION
    """
    from identityctl.services import catalog as catalog_service

    Session.connected()
    found = catalog_service.flows.require_flow(flow, _flow_type(flow_type))
    confirm_and_delete(_flow_summary(found), found["id"], catalog_service.flows.delete_flow,
                       yes=yes, as_json=as_json,
                       shown={"handle": found["handle"], "flowType": found["flowType"]})


# --- themes ---------------------------------------------------------------------------------

#: Theme JSON keys (as `theme show --json` prints them) -> service arguments.
_THEME_FIELDS = {"handle": "handle", "displayName": "display_name",
                 "description": "description", "theme": "theme"}


def _theme_fields(path: Path) -> dict[str, Any]:
    document = _document(path, "theme")
    return {argument: document[key] for key, argument in _THEME_FIELDS.items()
            if key in document}


@command(theme_app, "create")
def theme_create(file: Path = FileOption, as_json: bool = JsonOption) -> None:
    """Create a theme from JSON: {"handle", "displayName", "description", "theme":
    {"colorSchemes": {"light": {...}, "dark": {...}}, "typography": {...}}}.

        identityctl theme show default --json > ocean.json   # edit handle, colors
        identityctl theme create --file ocean.json
    """
    from identityctl.services import catalog as catalog_service

    fields = _theme_fields(file)
    for key, argument in (("handle", "handle"), ("displayName", "display_name")):
        if argument not in fields:
            raise MissingField(key)
    Session.connected()
    created = catalog_service.themes.create_theme(**fields, origin=ORIGIN)
    show_record(created, title=f"Created theme {created['handle']}", as_json=as_json)


@command(theme_app, "list")
def theme_list(as_json: bool = JsonOption) -> None:
    """List themes (applications pick one with themeId).

        identityctl theme list
    """
    from identityctl.services import catalog as catalog_service

    Session.connected()
    themes = catalog_service.themes.list_themes()
    rows = [{**theme, "schemes": ", ".join(theme["theme"].get("colorSchemes", {})) or "-"}
            for theme in themes]
    show_table(rows, [("handle", "Handle"), ("displayName", "Name"), ("id", "Id"),
                      ("schemes", "Color schemes"), ("description", "Description")],
               title="Themes", as_json=as_json, json_data=themes)


@command(theme_app, "show")
def theme_show(theme: str = typer.Argument(..., metavar="ID|HANDLE"),
               as_json: bool = JsonOption) -> None:
    """Show a theme.

        identityctl theme show default --json
    """
    from identityctl.services import catalog as catalog_service

    Session.connected()
    found = catalog_service.themes.require_theme(theme)
    show_record(found, title=f"Theme {found['handle']}", as_json=as_json)


@command(theme_app, "update")
def theme_update(theme: str = typer.Argument(..., metavar="ID|HANDLE"), file: Path = FileOption,
                 as_json: bool = JsonOption) -> None:
    """Change a theme with the keys present in a JSON file (others are kept).

        identityctl theme update default --file default.json
    """
    from identityctl.services import catalog as catalog_service

    fields = _theme_fields(file)
    Session.connected()
    updated = catalog_service.themes.update_theme(theme, origin=ORIGIN, **fields)
    show_record(updated, title=f"Updated theme {updated['handle']}", as_json=as_json)


@command(theme_app, "delete")
def theme_delete(theme: str = typer.Argument(..., metavar="ID|HANDLE"), yes: bool = YesOption,
                 as_json: bool = JsonOption) -> None:
    """Delete a theme; applications that used it are left without a theme.

        identityctl theme delete ocean --yes
    """
    from identityctl.services import catalog as catalog_service

    Session.connected()
    found = catalog_service.themes.require_theme(theme)
    confirm_and_delete(f"theme {found['handle']}", found["id"], catalog_service.themes.delete_theme,
                       yes=yes, as_json=as_json, shown={"handle": found["handle"]})
