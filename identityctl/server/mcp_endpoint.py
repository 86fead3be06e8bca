"""The /mcp endpoint: a bearer-token check in front of the MCP bridge, beside the Falcon app.

`McpDispatcher` is the WSGI application waitress serves when `mcp.enabled`: requests for
/mcp are authenticated here (MCP authorization spec, RFC 6750, RFC 9728) and handed to the
`McpWsgiBridge`; everything else goes to the Falcon app untouched. A token is accepted only
from the Authorization header, must be an access token (`typ` at+jwt) signed by the
service's keys, issued by its issuer, for the MCP audience (config `mcp.audience`), unexpired,
not revoked, presented as its DPoP binding requires (services/clients/bearer.py, the one
check), and carry the required scope (`mcp.required_scope`). Refusals are our JSON error body with a
`WWW-Authenticate` challenge that points the client at the protected-resource metadata.
Authenticated requests pass through `AnswerMemo` (mcp/memo.py), which replays the SDK's own
earlier answer to an identical `tools/list`.

It is part of the HTTP adapter (server/) and drives the MCP package (bridge, memo, tools),
which itself knows nothing of HTTP requests or error answers.

Importing this module is cheap: the SDK is imported when the first authenticated request
reaches the bridge, so a server whose /mcp is never used does not pay for it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import falcon

from identityctl import logs, metrics
from identityctl.errors import IdentityError, PayloadTooLarge, ServiceUnavailable, Unauthorized
from identityctl.mcp.bridge import ACCESS_TOKEN_ENVIRON_KEY, ORIGIN_ENVIRON_KEY, McpWsgiBridge
from identityctl.mcp.memo import AnswerMemo
from identityctl.security.tokens import require_scope
from identityctl.server.errors import error_answer
from identityctl.server.heap import settle_heap
from identityctl.server.middleware import ClientAddress, log_access
from identityctl.server.requests import presented_token
from identityctl.services.clients.bearer import scheme_of, verify_presented
from identityctl.services.context import ServiceContext
from identityctl.services.origin import RequestOrigin
from identityctl.store import db

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from mcp.server.mcpserver import MCPServer

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource"


def resource_metadata_url(base_url: str) -> str:
    """RFC 9728 metadata of the /mcp resource (the path-inserted form the MCP spec uses)."""
    return f"{base_url}{METADATA_PATH}{MCP_PATH}"


def bearer_challenge(*, resource_metadata: str, error: str = "", scope: str = "",
                     scheme: str = "Bearer") -> str:
    """A `WWW-Authenticate` value (RFC 6750 §3, or DPoP's RFC 9449 §7.1 for a token presented
    so) with RFC 9728's resource_metadata."""
    params = [f'resource_metadata="{resource_metadata}"']
    if error:
        params.append(f'error="{error}"')
    if scope:
        params.append(f'scope="{scope}"')
    return f"{scheme} " + ", ".join(params)


class McpDispatcher:
    """WSGI: /mcp -> bearer check -> MCP bridge; every other path -> ``app``."""

    def __init__(self, app: WSGIApplication, context: ServiceContext) -> None:
        config = context.config
        self._app = app
        self._context = context
        self._audience = config.mcp_audience
        self._scope = config.mcp.required_scope
        self._resource_metadata = resource_metadata_url(config.base_url)
        self._max_body_bytes = config.server.max_body_bytes
        self._metrics, self._access_log = config.metrics.enabled, config.server.access_log
        self._base_url = config.base_url
        public_hosts = {urlsplit(url).netloc for url in (config.base_url, config.mcp_audience)}
        self._client_address = ClientAddress(config.server.trusted_proxies)
        self._bridge = McpWsgiBridge(self._build_server, allowed_hosts=sorted(public_hosts),
                                     path=MCP_PATH, request_context=_logged_request)
        self._answers = AnswerMemo(self._bridge)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if (str(environ.get("PATH_INFO", "")).rstrip("/") or "/") != MCP_PATH:
            return self._app(environ, start_response)
        environ["PATH_INFO"] = MCP_PATH  # /mcp/ is /mcp, as Falcon strips trailing slashes
        request = falcon.Request(environ)
        address = self._client_address.of(request)
        start_response = self._observed(start_response, request, address)
        if (request.content_length or 0) > self._max_body_bytes:
            return _error_response(start_response, PayloadTooLarge(
                f"Bodies are limited to {self._max_body_bytes} bytes."))
        # /mcp's public address is the MCP audience (its own host, when configured so).
        presented = presented_token(request, self._base_url, url=self._audience)
        token = presented.token if presented else None
        try:
            if presented is None:
                raise Unauthorized("Send an access token with scope "
                                   f"'{self._scope}' in an Authorization: Bearer header.",
                                   code="missing_token")
            with db.failures_as_503():
                claims = verify_presented(self._context, presented, audience=self._audience)
            require_scope(claims, self._scope)
        except ServiceUnavailable as unavailable:
            return _error_response(start_response, unavailable)
        except IdentityError as refusal:
            log.info("refused an MCP request from %s: %s", request.remote_addr,
                     refusal.description)
            if "WWW-Authenticate" in refusal.headers:  # a DPoP challenge of its own
                refusal.headers["WWW-Authenticate"] += \
                    f', resource_metadata="{self._resource_metadata}"'
                return _error_response(start_response, refusal)
            return _error_response(start_response, refusal, (
                "WWW-Authenticate", self._challenge(refusal, token, scheme_of(presented))))
        environ[ACCESS_TOKEN_ENVIRON_KEY] = _access_token(presented.token, claims,
                                                          self._audience)
        # Who the tools act for, from where (server.trusted_proxies applied), in which request.
        environ[ORIGIN_ENVIRON_KEY] = RequestOrigin(actor=f"mcp:{claims['sub']}",
                                                    address=address,
                                                    request_id=logs.current_request_id())
        if not self._bridge.started:
            self._bridge.start()
            settle_heap()  # the SDK's modules and models live as long as the process too
        return self._answers(environ, start_response)

    def _observed(self, start_response: StartResponse, request: falcon.Request,
                  address: str) -> StartResponse:
        """What Falcon's middleware does for its requests: the request id (taken or made,
        echoed in X-Request-ID), the metrics, the access line."""
        started = time.perf_counter()
        request_id = logs.request_id_for(request.get_header(logs.REQUEST_ID_HEADER))
        logs.set_request_id(request_id)
        method, counted, logged = request.method, self._metrics, self._access_log

        def answered(status: str, headers: list[tuple[str, str]], *rest: Any) -> Any:
            elapsed = time.perf_counter() - started
            if counted:
                metrics.request_answered(MCP_PATH, method, status[:3], elapsed)
            if logged:
                log_access(method, MCP_PATH, int(status[:3]), elapsed * 1000, address)
            return start_response(status, [*headers, (logs.REQUEST_ID_HEADER, request_id)],
                                  *rest)

        return answered  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the bridge's event loop (if /mcp was ever used)."""
        self._bridge.close()

    def _build_server(self) -> MCPServer[Any]:
        from identityctl.mcp.tools import build_server

        return build_server(self._context)

    def _challenge(self, refusal: IdentityError, token: str | None, scheme: str) -> str:
        if refusal.status == 403:
            return bearer_challenge(resource_metadata=self._resource_metadata,
                                    error="insufficient_scope", scope=self._scope,
                                    scheme=scheme)
        # RFC 6750 §3.1: no error code when the request carried no token at all.
        return bearer_challenge(resource_metadata=self._resource_metadata,
                                error="" if token is None else "invalid_token", scheme=scheme)


def _logged_request(environ: WSGIEnvironment) -> contextlib.AbstractContextManager[None]:
    """The log lines a tool writes name the request's id (as REST requests' do), though tools
    run on the SDK's threads."""
    origin = environ.get(ORIGIN_ENVIRON_KEY)
    return logs.request_id_scope(origin.request_id if origin else "")


def _error_response(start_response: StartResponse, error: IdentityError,
                    *headers: tuple[str, str]) -> list[bytes]:
    """The service's JSON error answer with its security headers (server/errors.py)."""
    status, response_headers, body = error_answer(error, *headers)
    start_response(status, response_headers)
    return [body]


def _access_token(token: str, claims: dict[str, Any], resource: str) -> Any:
    """The verified token as the SDK's `AccessToken` (read by tools via get_access_token())."""
    from mcp.server.auth.provider import AccessToken

    return AccessToken(token=token, client_id=str(claims.get("client_id") or claims["sub"]),
                       scopes=str(claims.get("scope", "")).split(), expires_at=int(claims["exp"]),
                       resource=resource, subject=str(claims["sub"]), claims=claims)
