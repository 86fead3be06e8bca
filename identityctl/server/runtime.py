"""Running the app under waitress with a clean shutdown on SIGINT/SIGTERM."""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable
from typing import Any

import waitress
from waitress.server import BaseWSGIServer, MultiSocketServer
from waitress.task import ThreadedTaskDispatcher

from identityctl import logs
from identityctl.config import Config
from identityctl.server.affinity import keep_to
from identityctl.server.app import create_app
from identityctl.server.batches import read_in_batches
from identityctl.server.dispatch import FinishingThreadDispatcher
from identityctl.server.handoff import HandoffServer
from identityctl.server.heap import settle_heap
from identityctl.server.mcp_endpoint import McpDispatcher
from identityctl.server.queue_depth import rate_limit_queue_warning
from identityctl.server.waitress_errors import use_json_errors
from identityctl.services import outbound
from identityctl.services.context import ServiceContext
from identityctl.services.delivery.outbox import Deliverer
from identityctl.store import db


def served_app(config: Config, context: ServiceContext) -> Callable[..., Any]:
    """The WSGI app: Falcon, behind the /mcp dispatcher when the MCP server is enabled, each
    request giving its database connection back when it ends."""
    app: Any = create_app(config, context)
    if config.mcp.enabled:
        app = McpDispatcher(app, context)
    return ConnectionReturning(app)


class ConnectionReturning:
    """WSGI: after each request, the thread's PostgreSQL connection goes back to the pool.

    Falcon and the /mcp bearer check have done all their database work when the app returns
    (bodies are built by then; MCP tools run on the SDK's threads and return their own). A
    streamed body (the admin API's audit export) reads after that, on a connection it takes
    and gives back itself.
    """

    def __init__(self, app: Callable[..., Any]) -> None:
        self._app = app
        self.close = getattr(app, "close", lambda: None)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        try:
            return self._app(environ, start_response)
        finally:
            db.release_connection()


def make_server(config: Config, *, host: str, port: int, threads: int,
                handoff: socket.socket | None = None) -> BaseWSGIServer | MultiSocketServer:
    """A waitress server on host:port, or one taking the connections a `serve --workers N`
    supervisor accepted on host:port and sends on ``handoff`` (server/handoff.py), with the
    thread that delivers the outbox."""
    context = ServiceContext.for_config(config)  # one per process: one cache of the keys
    outbound.configure(config)  # the process's share of threads for outbound fetches
    app = served_app(config, context)
    servers: dict[Any, Any] = {}  # waitress's socket map: its servers, then their channels
    options: dict[str, Any] = dict(
        map=servers, threads=threads,
        # X-Forwarded-For reaches the app, whose ClientAddress middleware trusts it only
        # from server.trusted_proxies (waitress would drop it before the app could decide).
        ident="identityctl", clear_untrusted_proxy_headers=False,
        # Bodies up to 4x the limit are read (a chunked body's framing counts here) and
        # refused by the app; larger ones by waitress before it reads them (announced
        # Content-Length) or as soon as they pass this size (chunked).
        max_request_body_size=config.server.max_body_bytes * 4,
        channel_timeout=30, connection_limit=1000)
    # PERF: on SQLite a request's statements run in this process and wait for nothing, so
    # its threads only take turns on the interpreter; on PostgreSQL each statement waits on
    # the network, and threads running at once fill those waits (server/dispatch.py).
    dispatcher = FinishingThreadDispatcher() if db.is_sqlite() else ThreadedTaskDispatcher()
    dispatcher.set_thread_count(threads)
    if handoff is None:
        server = waitress.create_server(app, host=host, port=port, _dispatcher=dispatcher,
                                        **options)
    else:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server = HandoffServer(app, _sock=handoff, dispatcher=dispatcher,
                               sockinfo=(family, socket.SOCK_STREAM, 0, (host, port)), **options)
    # waitress's own refusals (413, 431, 400, 501, 500) in our JSON shape with our headers.
    use_json_errors(servers, max_body_bytes=config.server.max_body_bytes)
    rate_limit_queue_warning(server)  # one line per interval, not one per request
    read_in_batches(server)  # on SQLite (server/batches.py)
    deliverer = Deliverer(context, interval=1.0).start()

    def close_app() -> None:  # waitress wraps the app (proxy headers): keep our own handle
        deliverer.stop()
        getattr(app, "close", lambda: None)()

    server.close_app = close_app
    return server


def stop_server(server: BaseWSGIServer | MultiSocketServer) -> None:
    """Stop accepting, finish running tasks, close every channel so run() returns now."""
    server.close()
    server.task_dispatcher.shutdown(timeout=5)
    for channel in list(server._map.values()):
        channel.close()
    server.close_app()


def serve(config: Config, *, host: str, port: int, threads: int,
          on_ready: Callable[[str], None], handoff: socket.socket | None = None,
          core: int | None = None) -> None:
    """Serve until SIGINT/SIGTERM, on ``core`` only when one is given (server/affinity.py);
    ``on_ready`` gets the bound address."""
    logs.configure(config.server.log_format)
    if core is not None:
        keep_to(core)  # before the server's threads start: they keep to it too
    server = make_server(config, host=host, port=port, threads=threads, handoff=handoff)

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)  # leaves the select loop; the finally below closes cleanly

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    on_ready(f"http://{host}:{server.effective_port}")
    settle_heap()
    try:
        server.run()
    finally:
        stop_server(server)
        db.close()
