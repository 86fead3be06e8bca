"""A JSON answer as plain WSGI: status line, headers, body.

For what answers outside Falcon: the service's error body (``server.errors.error_answer``:
the /mcp bearer check, waitress's own refusals) and the MCP bridge's JSON-RPC refusals
(``mcp.bridge``). It sits below both adapters, so each writes through the same code.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any


def json_answer(status: int, body: Any) -> tuple[str, list[tuple[str, str]], bytes]:
    """``body`` as JSON with its WSGI status line and its Content-Type and Content-Length
    headers (the caller adds its own around them)."""
    encoded = json.dumps(body, ensure_ascii=False).encode()
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    return f"{status} {phrase}", [("Content-Type", "application/json"),
                                  ("Content-Length", str(len(encoded)))], encoded
