"""The Falcon WSGI application: routes, middleware and the error mapping, wired once."""

from __future__ import annotations

import json

import falcon

from identityctl.config import Config
from identityctl.server import errors, middleware
from identityctl.server.openapi import OpenApiResource
from identityctl.server.resources.account import add_account_routes
from identityctl.server.resources.admin_page import add_admin_page_route
from identityctl.server.resources.admin_routes import add_admin_routes
from identityctl.server.resources.flow import add_flow_routes
from identityctl.server.resources.gate import add_gate_routes
from identityctl.server.resources.health import HealthResource, HomeResource
from identityctl.server.resources.mcp_metadata import ProtectedResourceMetadataResource
from identityctl.server.resources.metrics import MetricsResource
from identityctl.server.resources.oauth import add_oauth_routes
from identityctl.server.resources.passkey import add_passkey_routes
from identityctl.services.context import ServiceContext


def create_app(config: Config, context: ServiceContext | None = None) -> falcon.App:
    """The WSGI app for ``config``; the store must already be connected (store.db.connect).
    ``context``: the process's one ServiceContext (one key cache), made here if not given."""
    app = falcon.App(middleware=[
        middleware.ClientAddress(config.server.trusted_proxies),
        middleware.BodyRules(config.server.max_body_bytes),
        middleware.BrowserOrigin(config),
        *([middleware.RequestLog()] if config.server.access_log else []),
        *([middleware.RequestMetrics()] if config.metrics.enabled else []),
    ], response_type=middleware.SecureResponse)
    app.req_options.strip_url_path_trailing_slash = True
    # Falcon's default JSON handler calls json.dumps with an option, which builds an encoder
    # for every response; this one is built once (same output: UTF-8, not ASCII-escaped).
    app.resp_options.media_handlers[falcon.MEDIA_JSON] = falcon.media.JSONHandler(
        dumps=json.JSONEncoder(ensure_ascii=False).encode)
    errors.install(app, config)
    add_routes(app, context or ServiceContext.for_config(config))
    return app


def add_routes(app: falcon.App, context: ServiceContext) -> None:
    """Every route of the service, in one place."""
    app.add_route("/", HomeResource(context.config))
    app.add_route("/health", HealthResource())
    app.add_route("/openapi.json", OpenApiResource(context.config.base_url))
    if context.config.metrics.enabled:
        app.add_route("/metrics", MetricsResource(context.config))
    add_passkey_routes(app, context)
    add_flow_routes(app, context)
    add_oauth_routes(app, context)
    add_gate_routes(app, context)
    add_account_routes(app, context)
    add_admin_page_route(app, context)
    if context.config.admin.enabled:
        add_admin_routes(app, context)
    if context.config.mcp.enabled:
        mcp_metadata = ProtectedResourceMetadataResource(context.config)
        app.add_route("/.well-known/oauth-protected-resource", mcp_metadata)
        app.add_route("/.well-known/oauth-protected-resource/mcp", mcp_metadata)
