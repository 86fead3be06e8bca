"""GET /openapi.json: the REST API described in OpenAPI 3.1.

Each resource module documents its own routes in a module-level ``OPENAPI_PATHS`` dict;
this module merges the modules named in ``RESOURCE_MODULES`` and adds the shared pieces
(the error body every endpoint uses).
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

import falcon

from identityctl import __version__

RESOURCE_MODULES: tuple[str, ...] = (
    "identityctl.server.resources.account",
    "identityctl.server.resources.admin_routes",
    "identityctl.server.resources.flow",
    "identityctl.server.resources.gate",
    "identityctl.server.resources.health",
    "identityctl.server.resources.mcp_metadata",
    "identityctl.server.resources.metrics",
    "identityctl.server.resources.oauth",
    "identityctl.server.resources.passkey",
)

ERROR_SCHEMA = {
    "type": "object",
    "required": ["code", "message", "description"],
    "properties": {
        "code": {"type": "string", "description": "Stable error code (docs/errors.md)."},
        "message": {"type": "string", "description": "Short human summary."},
        "description": {"type": "string", "description": "What went wrong and how to fix it."},
    },
}


def error_response(description: str) -> dict[str, Any]:
    """An OpenAPI response object whose body is the shared error shape."""
    return {"description": description, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/Error"}}}}


def json_body(schema: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI requestBody for a required JSON object."""
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def json_response(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


@cache
def document(server_url: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for name in RESOURCE_MODULES:
        paths.update(getattr(importlib.import_module(name), "OPENAPI_PATHS", {}))
    return {
        "openapi": "3.1.0",
        "info": {"title": "identityctl", "version": __version__,
                 "description": "Passkey-first identity service: WebAuthn passkey API, "
                                "flow engine, OAuth 2.0 / OpenID Connect."},
        "servers": [{"url": server_url}],
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": {"Error": ERROR_SCHEMA}},
    }


class OpenApiResource:
    def __init__(self, server_url: str) -> None:
        self.server_url = server_url

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = document(self.server_url)
