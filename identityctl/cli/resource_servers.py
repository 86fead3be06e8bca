"""`identityctl resource-server`: the team's own APIs (MCP servers) identityctl issues tokens
for: add, list, remove.

A client names a resource server in `resource` (RFC 8707); its tokens then carry `aud` = the
server's URL and only the server's scopes. Resources nobody registered are refused
(`invalid_target`).
"""

from __future__ import annotations

import typer

from identityctl.cli.common import ORIGIN, Session, YesOption, command, confirm_and_delete
from identityctl.cli.output import JsonOption, show_record, show_table

resource_server_app = typer.Typer(
    help="Resource servers: your own APIs and MCP servers identityctl issues tokens for "
         "(add, list, remove).", no_args_is_help=True)


@command(resource_server_app, "list")
def resource_server_list(as_json: bool = JsonOption) -> None:
    """List the registered resource servers and their scopes."""
    from identityctl.services.clients import resource_servers

    Session.connected()
    records = [server.to_api() for server in resource_servers.list_resource_servers()]
    rows = [{**record, "scopes": " ".join(record["scopes"])} for record in records]
    show_table(rows, [("identifier", "Resource"), ("name", "Name"), ("scopes", "Scopes")],
               title="Resource servers", as_json=as_json, json_data=records)


@command(resource_server_app, "add")
def resource_server_add(
    identifier: str = typer.Argument(..., metavar="URL",
                                     help="The server's resource identifier: the URL clients "
                                          "send as `resource` (for an MCP server, its MCP "
                                          "endpoint, e.g. https://notes.example.com/mcp)."),
    scope: list[str] = typer.Option(..., "--scope", "-s",
                                    help="A scope its tokens may carry (repeat for more)."),
    name: str = typer.Option("", "--name", help="What people see (default: the URL)."),
    as_json: bool = JsonOption,
) -> None:
    """Register a resource server. MCP clients then sign in to it as to identityctl's /mcp.

        identityctl resource-server add https://notes.example.com/mcp --scope notes:read \\
            --scope notes:write --name "Team notes"

    To let only some people grant a scope, make a role carry it:

        identityctl role create notes-editor --scope notes:write
    """
    from identityctl.services.clients import resource_servers
    from identityctl.services.context import ServiceContext

    config = Session.connected()
    created = resource_servers.register_resource_server(
        ServiceContext.for_config(config), identifier=identifier, scopes=scope, name=name,
        origin=ORIGIN)
    show_record(created.to_api(), title=f"Registered resource server {created.identifier}",
                as_json=as_json)


@command(resource_server_app, "update")
def resource_server_update(
    identifier: str = typer.Argument(..., metavar="URL|ID", help="The server's URL or id."),
    scope: list[str] = typer.Option(..., "--scope", "-s",
                                    help="Every scope its tokens may carry from now on "
                                         "(repeat for more; replaces the list)."),
    name: str | None = typer.Option(None, "--name", help="What people see (default: as "
                                                         "it is)."),
    as_json: bool = JsonOption,
) -> None:
    """Change a resource server's scopes (and name). Tokens already issued keep their scopes
    until they expire.

        identityctl resource-server update https://notes.example.com/mcp \\
            --scope notes:read --scope notes:write --scope notes:share
    """
    from identityctl.services.clients import resource_servers

    Session.connected()
    updated = resource_servers.update_resource_server(identifier, scopes=scope, name=name,
                                                      origin=ORIGIN)
    show_record(updated.to_api(), title=f"Updated resource server {updated.identifier}",
                as_json=as_json)


@command(resource_server_app, "remove")
def resource_server_remove(
    identifier: str = typer.Argument(..., metavar="URL", help="Its URL (or id)."),
    yes: bool = YesOption, as_json: bool = JsonOption,
) -> None:
    """Stop issuing tokens for a resource server (asks first unless --yes); tokens already
    issued keep working until they expire."""
    from identityctl.services.clients import resource_servers

    Session.connected()
    found = resource_servers.require_resource_server(identifier)
    confirm_and_delete(f"resource server {found.identifier}", found.id,
                       resource_servers.remove_resource_server, yes=yes, as_json=as_json,
                       shown={"identifier": found.identifier})
