"""`identityctl mcp`: serve the MCP tool server over stdio."""

from __future__ import annotations

import typer

from identityctl.cli.common import Session, command

mcp_app = typer.Typer()


@command(mcp_app, "mcp")
def mcp() -> None:
    """Serve the MCP tool server over stdio, for AI assistants and IDEs on this machine.

    Needs no token: it reads the configuration and the database directly and acts as the
    local admin (audited as mcp:stdio). The same tools are served over HTTP at
    {base_url}/mcp with a bearer token. Register either in an MCP client:

    [bold]stdio[/bold] (Claude Desktop, Claude Code, Cursor, VS Code: mcpServers entry):

        {"mcpServers": {"identityctl": {
            "command": "identityctl",
            "args": ["--config", "/srv/identity/config.toml", "mcp"]}}}

    [bold]HTTP[/bold] (token from: identityctl token --scope system):

        {"mcpServers": {"identityctl": {
            "type": "http", "url": "https://id.example.com/mcp",
            "headers": {"Authorization": "Bearer ${IDENTITYCTL_TOKEN}"}}}}

    Claude Code: claude mcp add identityctl -- identityctl --config /srv/identity/config.toml mcp

    More in docs/mcp.md.
    """
    from identityctl.mcp.stdio import serve_stdio

    serve_stdio(Session.connected())
