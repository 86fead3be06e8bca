"""The one place where failures become HTTP: ``{"code", "message", "description"}``.

Domain errors (:class:`IdentityError`) carry their own status and code; Falcon's own errors
(404 route, 405 method, malformed JSON) are given stable codes too; anything unexpected is a
500 whose body says nothing about the internals (the traceback goes to the log only).
"""

from __future__ import annotations

import logging
from typing import Any

import falcon

from identityctl.errors import IdentityError
from identityctl.store.db import busy_error

log = logging.getLogger("identityctl.server")

_FALCON_CODES = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 408: "request_timeout", 411: "length_required",
    413: "payload_too_large", 415: "unsupported_media_type", 422: "unprocessable",
    429: "too_many_requests", 503: "service_unavailable",
}


def _write(resp: falcon.Response, status: int, body: dict[str, str],
           headers: dict[str, str] | None = None) -> None:
    resp.status = status
    resp.media = body
    resp.content_type = falcon.MEDIA_JSON
    resp.set_header("Cache-Control", "no-store")
    for name, value in (headers or {}).items():
        resp.set_header(name, value)


def handle_identity_error(req: falcon.Request, resp: falcon.Response, ex: IdentityError,
                          params: dict[str, Any]) -> None:
    _write(resp, ex.status, ex.to_dict(), ex.headers)


def handle_http_error(req: falcon.Request, resp: falcon.Response, ex: falcon.HTTPError,
                      params: dict[str, Any]) -> None:
    status = ex.status_code
    code = _FALCON_CODES.get(status, "http_error")
    description = ex.description or ""
    if isinstance(ex, falcon.MediaMalformedError):
        code, description = "malformed_json", "The body is not valid JSON."
    elif isinstance(ex, falcon.MediaNotFoundError):
        code, description = "missing_body", "The request needs a JSON body."
    elif status == 404:
        description = description or f"No resource at {req.path}."
    elif status == 405:
        description = description or f"{req.method} is not allowed on {req.path}."
    _write(resp, status, {"code": code, "message": ex.title or "Error",
                          "description": description}, dict(ex.headers or {}))


def handle_unexpected(req: falcon.Request, resp: falcon.Response, ex: Exception,
                      params: dict[str, Any]) -> None:
    # A write outside store.db.transaction() that met a locked database: retry, not a bug.
    busy = busy_error(ex)
    if busy is not None:
        log.warning("database busy on %s %s: %s", req.method, req.path, ex)
        handle_identity_error(req, resp, busy, params)
        return
    log.exception("unhandled error on %s %s", req.method, req.path)
    _write(resp, 500, {"code": "internal_error", "message": "Internal server error.",
                       "description": "The error was logged; nothing was changed."})


def install(app: falcon.App) -> None:
    # Falcon picks the most specific handler by class hierarchy, so order does not matter.
    app.add_error_handler(Exception, handle_unexpected)
    app.add_error_handler(falcon.HTTPError, handle_http_error)
    app.add_error_handler(IdentityError, handle_identity_error)
