"""Cross-cutting request handling: client address, body limits, content type, the Origin of
browser posts, the security headers every response carries, the access log."""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import falcon

from identityctl import logs, metrics
from identityctl.config import Config
from identityctl.errors import Forbidden, PayloadTooLarge, UnsupportedMediaType
from identityctl.oauth.discovery import CALLBACK_PATH, CONSENT_PATH
from identityctl.services.origin import RequestOrigin
from identityctl.ui.admin_page import API_PATH as ADMIN_API_PATH

#: The state-changing endpoints the hosted UI calls with ``fetch`` from its pages
#: (identityctl/ui/static/gate.js). No cookies are involved, but a page of another site must
#: not drive them in a visitor's browser either (docs/security.md, "CSRF and cookies").
BROWSER_POSTS = frozenset({"/flow/execute", CALLBACK_PATH, CONSENT_PATH,
                           "/account/api/enrol/start", "/account/api/enrol/finish"})
#: What reads: on the admin API any other method changes something, and is the console's
#: (from the service's own origin) or an automation's (which sends no Origin).
READS = frozenset({"GET", "HEAD", "OPTIONS"})

access_log = logging.getLogger("identityctl.access")


class ClientAddress:
    """``req.context.origin`` (services/origin.py): the client address (the peer, or
    X-Forwarded-For from a trusted proxy) and the request's id (identityctl/logs.py), echoed in
    ``X-Request-ID``; the resource names the actor once it knows who acts.

    Unparsable forwarding headers never relax anything: the peer address is kept.
    """

    def __init__(self, trusted_proxies: tuple[str, ...]) -> None:
        self.trusted = [ipaddress.ip_network(p, strict=False) for p in trusted_proxies]

    def _trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.trusted)

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        # PERF: what every request carries is set by this one middleware: when it started
        # (the access log and the metrics time it), its client address and its id.
        req.context.started = time.perf_counter()
        request_id = logs.request_id_for(req.get_header(logs.REQUEST_ID_HEADER))
        logs.set_request_id(request_id)  # the log lines written while answering name it
        resp.set_header(logs.REQUEST_ID_HEADER, request_id)
        req.context.origin = RequestOrigin(address=self.of(req), request_id=request_id)

    def of(self, req: falcon.Request) -> str:
        """The client address of ``req``."""
        address = req.remote_addr or ""
        forwarded = req.get_header("X-Forwarded-For")
        if forwarded and self._trusted(address):
            # Walk right to left past our own proxies; the first other hop is the client.
            for hop in reversed([h.strip() for h in forwarded.split(",")]):
                try:
                    ipaddress.ip_address(hop)
                except ValueError:
                    break
                address = hop
                if not self._trusted(hop):
                    break
        return address


class BodyRules:
    """Refuse oversized bodies (413) and non-JSON bodies on JSON resources (415)."""

    def __init__(self, max_body_bytes: int) -> None:
        self.max_body_bytes = max_body_bytes

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.content_length is not None and req.content_length > self.max_body_bytes:
            raise PayloadTooLarge(f"Bodies are limited to {self.max_body_bytes} bytes.")

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: Any,
                         params: dict[str, Any]) -> None:
        media_type = (req.content_type or "").split(";")[0].strip().lower()
        if req.method in ("POST", "PUT", "PATCH") and getattr(resource, "json_body", False) \
                and media_type != "application/json":
            raise UnsupportedMediaType(
                f"Send Content-Type: application/json (got {req.content_type or 'none'}).")


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url`` in lower case, without the default port."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if not scheme or not host:
        return ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        return ""
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" + (f":{port}" if port and port != default else "")


def browser_origins(config: Config) -> frozenset[str]:
    """The origins whose pages may drive the browser endpoints: the passkey origins
    (passkey.allowed_origins and related_origins) and the service's own (server.base_url,
    the hosted UI)."""
    urls: Iterable[str] = (*config.passkey.accepted_origins, config.base_url, config.gate_url)
    return frozenset(origin for origin in map(origin_of, urls) if origin)


class BrowserOrigin:
    """Refuse (403 ``cross_origin_refused``) a POST to a browser endpoint (BROWSER_POSTS),
    or a change to the admin API, whose ``Origin`` header names another site.

    Allowed: ``passkey.allowed_origins`` and ``related_origins``, the origin of
    ``server.base_url`` and of the hosted UI (``gate_client.url``). A request without
    ``Origin`` is a non-browser client and passes (browsers send ``Origin`` on every
    cross-origin POST); ``Origin: null`` (sandboxed frames, ``data:`` pages) is refused.
    """

    def __init__(self, config: Config) -> None:
        self.allowed = browser_origins(config)

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: Any,
                         params: dict[str, Any]) -> None:
        # After BodyRules: a form post is 415 whatever its Origin.
        if req.method in READS or not (
                (req.method == "POST" and req.path in BROWSER_POSTS)
                or req.path.startswith(ADMIN_API_PATH)):
            return
        origin = req.get_header("Origin")
        if origin is not None and origin_of(origin) not in self.allowed:
            raise Forbidden("Requests from another site's pages are refused: the Origin "
                            "is not one of passkey.allowed_origins or the service's own.",
                            code="cross_origin_refused",
                            message="Cross-origin request refused.")


class SecureResponse(falcon.Response):
    """A response that starts with the headers every answer carries (``App(response_type=)``).

    Pages replace the CSP and the caching header with ``set_header``; their CSP keeps
    frame-ancestors 'none'. X-Frame-Options is for browsers that ignore CSP frame-ancestors.
    Set when the response object is made rather than by a middleware hook: one dict update,
    and error answers carry them as well.
    """

    __slots__ = ()

    def __init__(self, options: falcon.ResponseOptions | None = None) -> None:
        super().__init__(options)
        self._headers.update(SECURITY_HEADERS)


#: Header names in lower case, as Falcon keeps them.
SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
    "cache-control": "no-store",
}


class RequestLog:
    """One line per request: method, path (no query: it may hold secrets), status, time
    (``server.access_log``)."""

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource: Any,
                         req_succeeded: bool) -> None:
        started = getattr(req.context, "started", None)
        elapsed = (time.perf_counter() - started) * 1000 if started else 0.0
        status = resp.status[:3] if isinstance(resp.status, str) else resp.status
        origin = getattr(req.context, "origin", None)
        log_access(req.method, req.path, int(status), elapsed, origin.address if origin else "")


def log_access(method: str, path: str, status: int, elapsed_ms: float, address: str) -> None:
    """The access line of one request (Falcon's, and /mcp's beside it)."""
    access_log.info("%s %s %s %.1fms %s %s", method, path, status, elapsed_ms, address,
                    logs.current_request_id(),
                    extra={"method": method, "path": path, "status": status,
                           "ms": round(elapsed_ms, 1), "clientAddress": address})


class RequestMetrics:
    """Counts each request by route template (never the path: ids would make endless
    series), method and status, and times it (from ClientAddress's start); counts 503s of
    an unavailable database."""

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource: Any,
                         req_succeeded: bool) -> None:
        status = resp.status[:3] if isinstance(resp.status, str) else str(resp.status)
        started = getattr(req.context, "started", None)
        metrics.request_answered(req.uri_template or "unmatched", req.method, status,
                                 time.perf_counter() - started if started else 0.0)
        if status == "503" and isinstance(resp.media, dict):
            metrics.count(metrics.DATABASE_UNAVAILABLE, str(resp.media.get("code", "")))
