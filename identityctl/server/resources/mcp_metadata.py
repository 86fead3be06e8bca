"""RFC 9728 protected-resource metadata of the MCP endpoint.

MCP clients that get a 401 from /mcp follow `resource_metadata` in the WWW-Authenticate
challenge to `/.well-known/oauth-protected-resource/mcp` (the path-inserted form the MCP
authorization spec uses); older clients ask the root form. Both answer the same document: the
resource (the audience a token must carry), the authorization server that issues tokens for
it, the scope it needs and that tokens go in the Authorization header only.
"""

from __future__ import annotations

from typing import Any

import falcon

from identityctl.config import Config
from identityctl.server.mcp_endpoint import MCP_PATH, METADATA_PATH


def protected_resource_metadata(config: Config) -> dict[str, Any]:
    return {
        "resource": config.mcp_audience,
        "authorization_servers": [config.issuer],
        "scopes_supported": [config.mcp.required_scope],
        "bearer_methods_supported": ["header"],
        "resource_name": "identityctl MCP tool server",
    }


class ProtectedResourceMetadataResource:
    def __init__(self, config: Config) -> None:
        self.document = protected_resource_metadata(config)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self.document
        # Public metadata: browser-based MCP clients read it cross-origin.
        resp.set_header("Access-Control-Allow-Origin", "*")


_METADATA_SCHEMA = {
    "type": "object",
    "required": ["resource", "authorization_servers", "scopes_supported",
                 "bearer_methods_supported"],
    "properties": {
        "resource": {"type": "string", "format": "uri",
                     "description": "The MCP endpoint; the audience its tokens must carry."},
        "authorization_servers": {"type": "array", "items": {"type": "string", "format": "uri"},
                                  "description": "Issuer that grants tokens for /mcp."},
        "scopes_supported": {"type": "array", "items": {"type": "string"}},
        "bearer_methods_supported": {"type": "array", "items": {"type": "string"}},
        "resource_name": {"type": "string"},
    },
}
_GET = {
    "summary": "Protected-resource metadata of /mcp (RFC 9728)",
    "responses": {"200": {"description": "How to get a token for the MCP endpoint.",
                          "content": {"application/json": {"schema": _METADATA_SCHEMA}}}},
}

OPENAPI_PATHS = {
    METADATA_PATH + MCP_PATH: {"get": {**_GET, "operationId": "mcpResourceMetadata"}},
    METADATA_PATH: {"get": {**_GET, "operationId": "mcpResourceMetadataRoot"}},
}
