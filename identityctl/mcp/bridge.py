"""Serve an `MCPServer`'s Streamable HTTP (ASGI) app from inside our WSGI process.

waitress speaks WSGI only; the mcp SDK 2.x serves Streamable HTTP as a Starlette (ASGI) app.
`McpWsgiBridge` joins the two:

* one asyncio loop runs forever in a daemon thread; every MCP request of every waitress
  thread is executed on it through `a2wsgi.ASGIMiddleware(app, loop=loop)`;
* the Starlette lifespan (which starts the SDK's session manager; without it every request
  answers 500) is entered on that loop once, before the first request is dispatched;
* the SDK app runs stateless with JSON responses, so GET (a stream that would never end and
  pin a waitress thread) and DELETE (no sessions) are answered 405 here, without the SDK;
* hop-by-hop response headers (`Connection: keep-alive` ...), which waitress refuses with a
  500, are dropped;
* the SDK's Host/Origin check (DNS-rebinding protection) is configured with our public host
  names, otherwise it answers 421 "Invalid Host header" to any non-localhost Host.

Authentication is not done here: the WSGI layer in front verifies the bearer token. It may
hand the verified identity to the tools by storing an `mcp.server.auth.provider.AccessToken`
in `environ[ACCESS_TOKEN_ENVIRON_KEY]`; tools then read it with the SDK's own
`mcp.server.auth.middleware.auth_context.get_access_token()`.

Importing this module is cheap: the SDK (about 1 s of imports) is loaded by `start()`, which
runs on the first request or when called explicitly at server start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import TYPE_CHECKING, Any, Final, cast

from identityctl import waits
from identityctl.answers import json_answer

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings

__all__ = ["ACCESS_TOKEN_ENVIRON_KEY", "HOP_BY_HOP_HEADERS", "ORIGIN_ENVIRON_KEY", "ASGIApp",
           "McpWsgiBridge"]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ACCESS_TOKEN_ENVIRON_KEY: Final = "identityctl.mcp.access_token"
"""WSGI environ key under which the auth layer may put the caller's verified `AccessToken`."""

ORIGIN_ENVIRON_KEY: Final = "identityctl.mcp.origin"
"""WSGI environ key under which the auth layer puts the request's `RequestOrigin` (who, from
which address, which request), which the tools pass to the services they call."""

HOP_BY_HOP_HEADERS: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)

_LOCALHOST_NAMES: Final = ("127.0.0.1", "localhost", "[::1]")


class McpWsgiBridge:
    """A WSGI application serving an `MCPServer` over stateless Streamable HTTP.

    `server` is an `MCPServer`, or a zero-argument factory returning one (or returning a
    ready ASGI app, see `from_asgi_app`); a factory is called by `start()`, so building the
    bridge does not import the SDK. `allowed_hosts` are the public Host header values
    (`"id.example.com"` allows any port, `"id.example.com:8443"` only that one); the
    localhost names are added unless `allow_localhost=False`. `allowed_origins` defaults to
    `http://` and `https://` on every allowed host (the Origin header is only checked when a
    client sends one). `path` must be the PATH_INFO the WSGI layer passes through unchanged.
    """

    def __init__(
        self,
        server: MCPServer[Any] | Callable[[], MCPServer[Any] | ASGIApp],
        *,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] | None = None,
        allow_localhost: bool = True,
        dns_rebinding_protection: bool = True,
        path: str = "/mcp",
        startup_timeout: float = 30.0,
        response_wait_time: float | None = 10.0,
        request_context: Callable[[Any], contextlib.AbstractContextManager[Any]] | None = None,
    ) -> None:
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/': {path!r}")
        self._server = server
        self._path = path.rstrip("/") or "/"
        hosts = list(allowed_hosts)
        if allow_localhost:
            hosts += [name for name in _LOCALHOST_NAMES if name not in hosts]
        self._allowed_hosts = hosts
        self._allowed_origins = None if allowed_origins is None else list(allowed_origins)
        self._dns_rebinding_protection = dns_rebinding_protection
        self._startup_timeout = startup_timeout
        self._response_wait_time = response_wait_time
        self._request_context = request_context

        self._lock = threading.Lock()
        self._closed = False
        self._wsgi_app: WSGIApplication | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lifespan: _AsgiLifespan | None = None

    @classmethod
    def from_asgi_app(
        cls,
        app: ASGIApp,
        *,
        path: str = "/mcp",
        startup_timeout: float = 30.0,
        response_wait_time: float | None = 10.0,
    ) -> McpWsgiBridge:
        """Bridge an app already built with `streamable_http_app(stateless_http=True, ...)`.

        Its `transport_security` is whatever it was built with; the host settings of the
        constructor do not apply.
        """
        return cls(
            lambda: app,
            path=path,
            startup_timeout=startup_timeout,
            response_wait_time=response_wait_time,
        )

    @property
    def path(self) -> str:
        """The MCP endpoint path (PATH_INFO) this bridge serves."""
        return self._path

    @property
    def started(self) -> bool:
        return self._wsgi_app is not None

    def transport_security(self) -> TransportSecuritySettings:
        """The SDK Host/Origin check settings built from the constructor arguments."""
        from mcp.server.transport_security import TransportSecuritySettings

        if not self._dns_rebinding_protection:
            return TransportSecuritySettings(enable_dns_rebinding_protection=False)
        hosts: list[str] = []
        for name in self._allowed_hosts:
            hosts.append(name)
            if not _has_port(name):
                hosts.append(f"{name}:*")
        origins = self._allowed_origins
        if origins is None:
            origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
        )

    def start(self) -> None:
        """Import the SDK, build the app, start the loop thread and run the lifespan startup.

        Idempotent and thread-safe; called by the first request if not called before.
        """
        if self._wsgi_app is not None:
            return
        with self._lock:
            if self._wsgi_app is not None:
                return
            if self._closed:
                raise RuntimeError("McpWsgiBridge is closed")
            from a2wsgi import ASGIMiddleware

            app = _pass_access_token(self._build_app(), self._request_context)
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="mcp-asgi-loop", daemon=True)
            thread.start()
            lifespan = _AsgiLifespan(app)
            try:
                future = asyncio.run_coroutine_threadsafe(lifespan.startup(), loop)
                future.result(self._startup_timeout)
            except BaseException:
                _stop_loop(loop, thread, timeout=self._startup_timeout)
                raise
            self._loop, self._thread, self._lifespan = loop, thread, lifespan
            # cast: a2wsgi declares its own, narrower ASGI and WSGI aliases
            middleware = ASGIMiddleware(
                cast("Any", app), wait_time=self._response_wait_time, loop=loop
            )
            self._wsgi_app = cast("WSGIApplication", middleware)
            log.debug("MCP bridge started for %s", self._path)

    def close(self, timeout: float = 5.0) -> None:
        """Run the lifespan shutdown and stop the loop thread. The bridge cannot restart."""
        with self._lock:
            self._closed = True
            loop, thread, lifespan = self._loop, self._thread, self._lifespan
            self._wsgi_app = self._loop = self._thread = self._lifespan = None
        if loop is None or thread is None or lifespan is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(lifespan.shutdown(), loop).result(timeout)
        except Exception:
            log.warning("MCP bridge lifespan shutdown failed", exc_info=True)
        finally:
            _stop_loop(loop, thread, timeout=timeout)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        if method in ("GET", "HEAD", "DELETE") and self._is_endpoint(environ):
            return _json_error(
                start_response,
                405,
                "Method Not Allowed: this MCP endpoint is stateless; use POST",
                extra_headers=[("Allow", "POST")],
                head=method == "HEAD",
            )
        if self._closed:
            return _json_error(start_response, 503, "MCP server stopped")
        self.start()
        wsgi_app = self._wsgi_app
        if wsgi_app is None:  # closed concurrently
            return _json_error(start_response, 503, "MCP server stopped")
        return _WaitedBody(wsgi_app(environ, _without_hop_by_hop(start_response)))

    def _is_endpoint(self, environ: WSGIEnvironment) -> bool:
        path = str(environ.get("PATH_INFO", "")).rstrip("/") or "/"
        return path == self._path

    def _build_app(self) -> ASGIApp:
        server = self._server
        target = server if hasattr(server, "streamable_http_app") else server()
        if not hasattr(target, "streamable_http_app"):
            return target  # a ready ASGI app (from_asgi_app)
        app: ASGIApp = target.streamable_http_app(
            streamable_http_path=self._path,
            stateless_http=True,
            json_response=True,
            transport_security=self.transport_security(),
        )
        return app


class _WaitedBody:
    """The MCP app's answer, each step of it a declared wait (identityctl.waits): the app's
    body is a generator, and the tool runs on the MCP server's loop and threads while the
    server draws it."""

    def __init__(self, body: Iterable[bytes]) -> None:
        self._body = body
        self._steps = iter(body)

    def __iter__(self) -> _WaitedBody:
        return self

    def __next__(self) -> bytes:
        with waits.waiting():
            return next(self._steps)

    def close(self) -> None:
        close = getattr(self._body, "close", None)
        if close is not None:
            with waits.waiting():
                close()


class _AsgiLifespan:
    """Drives the ASGI lifespan protocol of one app; every method runs on the bridge loop."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._inbox: asyncio.Queue[Message] | None = None
        self._started: asyncio.Future[None] | None = None
        self._stopped: asyncio.Future[None] | None = None

    async def startup(self) -> None:
        loop = asyncio.get_running_loop()
        self._inbox = asyncio.Queue()
        self._started = loop.create_future()
        self._stopped = loop.create_future()
        scope: Scope = {
            "type": "lifespan",
            "asgi": {"version": "3.0", "spec_version": "2.0"},
            "state": {},
        }
        task = loop.create_task(self._run(scope, self._inbox))
        task.add_done_callback(self._on_task_done)
        await self._inbox.put({"type": "lifespan.startup"})
        await self._started

    async def _run(self, scope: Scope, inbox: asyncio.Queue[Message]) -> None:
        await self._app(scope, inbox.get, self._send)

    async def shutdown(self) -> None:
        if self._inbox is None or self._stopped is None:
            return
        await self._inbox.put({"type": "lifespan.shutdown"})
        await self._stopped

    async def _send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "lifespan.startup.complete":
            _settle(self._started)
        elif kind == "lifespan.startup.failed":
            _settle(
                self._started, RuntimeError(f"MCP app startup failed: {message.get('message')}")
            )
        elif kind == "lifespan.shutdown.complete":
            _settle(self._stopped)
        elif kind == "lifespan.shutdown.failed":
            _settle(
                self._stopped, RuntimeError(f"MCP app shutdown failed: {message.get('message')}")
            )

    def _on_task_done(self, task: asyncio.Task[None]) -> None:
        error = None if task.cancelled() else task.exception()
        if self._started is not None and not self._started.done():
            failure = RuntimeError("MCP app lifespan ended before startup completed")
            failure.__cause__ = error
            _settle(self._started, failure)
        elif error is not None:
            log.error("MCP app lifespan crashed", exc_info=error)
        _settle(self._stopped)


def _settle(future: asyncio.Future[None] | None, error: BaseException | None = None) -> None:
    if future is None or future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


def _pass_access_token(
    app: ASGIApp,
    request_context: Callable[[Any], contextlib.AbstractContextManager[Any]] | None = None,
) -> ASGIApp:
    """Expose `environ[ACCESS_TOKEN_ENVIRON_KEY]` as the SDK's authenticated user.

    a2wsgi puts the WSGI environ in `scope["wsgi_environ"]`; the token is set on the SDK's
    `auth_context_var` (read by `get_access_token()`) and as `scope["user"]`/`scope["auth"]`,
    as the SDK's own bearer middleware would. ``request_context(environ)``, when given, is
    entered around the request on the loop, so context variables it sets reach the tools.
    """
    from mcp.server.auth.middleware.auth_context import auth_context_var
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken
    from starlette.authentication import AuthCredentials

    async def with_access_token(scope: Scope, receive: Receive, send: Send) -> None:
        environ = scope.get("wsgi_environ") if scope["type"] == "http" else None
        token = environ.get(ACCESS_TOKEN_ENVIRON_KEY) if environ else None
        if token is not None and not isinstance(token, AccessToken):
            raise TypeError(f"environ[{ACCESS_TOKEN_ENVIRON_KEY!r}] must be an AccessToken")
        around = request_context(environ) if request_context and environ is not None \
            else contextlib.nullcontext()
        with around:
            if token is None:
                await app(scope, receive, send)
                return
            user = AuthenticatedUser(token)
            reset = auth_context_var.set(user)
            try:
                await app({**scope, "user": user, "auth": AuthCredentials(token.scopes)},
                          receive, send)
            finally:
                auth_context_var.reset(reset)

    return with_access_token


def _without_hop_by_hop(start_response: StartResponse) -> StartResponse:
    """Wrap `start_response` to drop hop-by-hop headers (PEP 3333; waitress asserts on them)."""

    def filtered(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        named = {
            token.strip().lower()
            for name, value in headers
            if name.lower() == "connection"
            for token in value.split(",")
        }
        kept = [
            (name, value)
            for name, value in headers
            if name.lower() not in HOP_BY_HOP_HEADERS and name.lower() not in named
        ]
        return start_response(status, kept, exc_info)

    return filtered


def _json_error(
    start_response: StartResponse,
    status: int,
    message: str,
    *,
    extra_headers: Iterable[tuple[str, str]] = (),
    head: bool = False,
) -> list[bytes]:
    """A refusal of the bridge's own, as JSON-RPC's error object (what an MCP client reads)."""
    status_line, headers, body = json_answer(
        status, {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}
    )
    start_response(status_line, [*headers, *extra_headers])
    return [] if head else [body]


def _has_port(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):  # bare IPv6 literal
        return False
    _, sep, port = host.rpartition(":")
    return bool(sep) and (port == "*" or port.isdigit())


def _stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread, timeout: float) -> None:
    with contextlib.suppress(RuntimeError):  # loop already closed
        loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout)
    if not thread.is_alive():
        loop.close()
