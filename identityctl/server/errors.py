"""The one place where failures become HTTP: ``{"code", "message", "description"}``.

Domain errors (:class:`IdentityError`) carry their own status and code; Falcon's own errors
(404 route, 405 method, malformed JSON) are given stable codes too; anything unexpected is a
500 whose body says nothing about the internals (the traceback goes to the log only).

Falcon routes answer through the handlers below (their headers come with ``SecureResponse``);
a person's browser that opens an address with no page (404, 405: it asks for ``text/html``
first) gets a page saying so instead of the JSON. What answers below Falcon (the /mcp
dispatcher, waitress's own refusals in ``server/waitress_errors.py``) writes its answer
with :func:`error_answer`.
"""

from __future__ import annotations

import logging
from typing import Any

import falcon

from identityctl.answers import json_answer
from identityctl.config import Config
from identityctl.errors import IdentityError
from identityctl.server.middleware import SECURITY_HEADERS
from identityctl.server.requests import language_of, page_address
from identityctl.store.db import busy_error
from identityctl.ui import gate, pages

log = logging.getLogger("identityctl.server")

_FALCON_CODES = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 408: "request_timeout", 411: "length_required",
    413: "payload_too_large", 415: "unsupported_media_type", 422: "unprocessable",
    429: "too_many_requests", 503: "service_unavailable",
}
#: What a person reads when their browser opens an address with no page: (title, text).
_PAGE_TEXT = {
    404: ("This page does not exist", "Check the address, or go to the start page."),
    405: ("This page cannot be opened like this",
          "Go to the start page and try again from there."),
}


class InternalError(IdentityError):
    """An unexpected failure; the answer says nothing about it (the traceback is logged)."""

    status = 500
    code = "internal_error"
    message = "Internal server error."

    def __init__(self) -> None:
        super().__init__("The error was logged; nothing was changed.")


def _security_header(name: str) -> str:
    return "-".join(part.capitalize() for part in name.split("-"))


#: SECURITY_HEADERS as WSGI headers (``SecureResponse`` gives Falcon's answers the same).
_WSGI_SECURITY_HEADERS = tuple((_security_header(name), value)
                               for name, value in SECURITY_HEADERS.items())


def error_answer(error: IdentityError, *headers: tuple[str, str]
                 ) -> tuple[str, list[tuple[str, str]], bytes]:
    """``error`` as a WSGI status line, headers and JSON body, for code outside Falcon.

    The body is ``error.to_dict()``; the headers are the security headers every answer
    carries, the JSON content type and length, then ``headers`` and ``error.headers``.
    """
    status, content, body = json_answer(error.status, error.to_dict())
    return status, [*_WSGI_SECURITY_HEADERS, *content, *headers, *error.headers.items()], body


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


class HttpErrors:
    """Falcon's own refusals (route, method, body) with stable codes; a browser's 404 and
    405 as a page (``Accept`` prefers HTML), API clients' as JSON."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self, req: falcon.Request, resp: falcon.Response, ex: falcon.HTTPError,
                 params: dict[str, Any]) -> None:
        status = ex.status_code
        if status in _PAGE_TEXT and req.client_prefers(
                (falcon.MEDIA_JSON, falcon.MEDIA_HTML)) == falcon.MEDIA_HTML:
            self._page(req, resp, status)
            return
        code = _FALCON_CODES.get(status, "http_error")
        description = ex.description or ""
        if isinstance(ex, falcon.MediaMalformedError):
            code, description = ("malformed_json", "The body is not valid JSON.") \
                if req.content_type is None or falcon.MEDIA_JSON in req.content_type \
                else ("malformed_form", "The body is not a valid HTML form.")
        elif isinstance(ex, falcon.MediaNotFoundError):
            code, description = "missing_body", "The request needs a JSON body."
        elif status == 404:
            description = description or f"No resource at {req.path}."
        elif status == 405:
            description = description or f"{req.method} is not allowed on {req.path}."
        _write(resp, status, {"code": code, "message": ex.title or "Error",
                              "description": description}, dict(ex.headers or {}))

    def _page(self, req: falcon.Request, resp: falcon.Response, status: int) -> None:
        title, text = _PAGE_TEXT[status]
        language = language_of(req)
        resp.status = status
        resp.content_type = falcon.MEDIA_HTML
        resp.set_header("Content-Security-Policy", pages.PAGE_CSP)
        resp.set_header("Cache-Control", "no-store")
        resp.text = pages.message_page(
            title=title, text=text, error=_FALCON_CODES[status],
            back=("Go to the start page", self.config.base_url + "/"),
            assets=gate.assets(self.config, None), language=language, here=page_address(req))


def handle_unexpected(req: falcon.Request, resp: falcon.Response, ex: Exception,
                      params: dict[str, Any]) -> None:
    # The database is unavailable (restart, failover, down: its dead connection is let go,
    # store.db.busy_error) or busy (a locked SQLite database, a PostgreSQL statement or lock
    # timeout): a 503 to retry, not a bug.
    busy = busy_error(ex)
    if busy is not None:
        log.warning("%s on %s %s: %s", busy.code, req.method, req.path,
                    str(ex).strip().splitlines()[0] if str(ex).strip() else type(ex).__name__)
        handle_identity_error(req, resp, busy, params)
        return
    log.exception("unhandled error on %s %s", req.method, req.path)
    handle_identity_error(req, resp, InternalError(), params)


def install(app: falcon.App, config: Config) -> None:
    # Falcon picks the most specific handler by class hierarchy, so order does not matter.
    app.add_error_handler(Exception, handle_unexpected)
    app.add_error_handler(falcon.HTTPError, HttpErrors(config))
    app.add_error_handler(IdentityError, handle_identity_error)
