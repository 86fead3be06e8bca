"""A team's own MCP server protected by identityctl: the example of docs/mcp.md.

It keeps notes in memory and offers two tools. Every request needs an access token that
identityctl issued for this server: signed with a key of identityctl's JWKS, `typ` at+jwt
(RFC 9068), issuer identityctl, `aud` this server's URL (RFC 8707), and the scope the tool
needs. It publishes its protected resource metadata (RFC 9728) naming identityctl, so MCP
clients (Claude Code, VS Code, the SDKs) find identityctl from its 401, register there and
send the person through identityctl's passkey sign-in and consent.

Register it once with identityctl, then run it:

    identityctl resource-server add http://127.0.0.1:8001/mcp \\
        --scope notes:read --scope notes:write --name "Team notes"
    IDENTITYCTL_ISSUER=https://id.example.com \\
    NOTES_URL=http://127.0.0.1:8001/mcp python notes_mcp_server.py

Needs the official MCP Python SDK (`pip install "mcp>=2" pyjwt[crypto]`).
"""

from __future__ import annotations

import json
import os
import urllib.request
from urllib.parse import urlsplit

import jwt
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

ISSUER = os.environ["IDENTITYCTL_ISSUER"].rstrip("/")
NOTES_URL = os.environ["NOTES_URL"]  # this server's MCP endpoint: its resource identifier
READ, WRITE = "notes:read", "notes:write"


def _discovered(issuer: str) -> dict:
    """identityctl's RFC 8414 metadata (where its JWKS is)."""
    with urllib.request.urlopen(f"{issuer}/.well-known/oauth-authorization-server",
                                timeout=10) as answer:
        return json.load(answer)


class IdentityctlTokens:
    """The SDK's TokenVerifier: accept identityctl's access tokens for this server only."""

    def __init__(self, issuer: str, audience: str) -> None:
        metadata = _discovered(issuer)
        self.issuer, self.audience = metadata["issuer"], audience
        self.keys = jwt.PyJWKClient(metadata["jwks_uri"], cache_keys=True, lifespan=300)

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            if jwt.get_unverified_header(token).get("typ") != "at+jwt":
                return None  # an ID token or anything else is not an access token
            claims = jwt.decode(token, self.keys.get_signing_key_from_jwt(token).key,
                                algorithms=["ES256", "RS256", "EdDSA"],
                                audience=self.audience, issuer=self.issuer,
                                options={"require": ["exp", "iat", "sub", "aud"]})
        except (jwt.PyJWTError, OSError):
            return None
        return AccessToken(token=token, client_id=str(claims.get("client_id", "")),
                           scopes=str(claims.get("scope", "")).split(),
                           expires_at=int(claims["exp"]), resource=self.audience,
                           subject=str(claims["sub"]))


server = MCPServer(
    "team-notes", instructions="The team's notes: read them, add to them.",
    token_verifier=IdentityctlTokens(ISSUER, NOTES_URL),
    auth=AuthSettings(issuer_url=ISSUER, resource_server_url=NOTES_URL,
                      required_scopes=[READ], validate_token_resource=True))
NOTES: list[dict[str, str]] = []


def _require(scope: str) -> str:
    """The caller's subject, when their token carries ``scope``."""
    token = get_access_token()
    if token is None or scope not in token.scopes:
        raise PermissionError(f"This needs the scope {scope}; sign in again granting it.")
    return token.subject or token.client_id


@server.tool()
def list_notes() -> list[dict[str, str]]:
    """Every note, oldest first."""
    _require(READ)
    return NOTES


@server.tool()
def add_note(text: str) -> dict[str, str]:
    """Add a note (needs notes:write); the note as stored."""
    note = {"text": text, "author": _require(WRITE)}
    NOTES.append(note)
    return note


if __name__ == "__main__":
    where = urlsplit(NOTES_URL)
    server.run("streamable-http", host=where.hostname or "127.0.0.1", port=where.port or 80,
               streamable_http_path=where.path or "/mcp", stateless_http=True)
