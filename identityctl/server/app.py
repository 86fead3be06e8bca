"""The Falcon WSGI application: routes, middleware and the error mapping, wired once."""

from __future__ import annotations

from dataclasses import dataclass

import falcon

from identityctl.config import Config
from identityctl.security.tokens import TokenService
from identityctl.server import errors, middleware
from identityctl.server.resources.health import HealthResource


@dataclass(frozen=True)
class AppContext:
    """What resources share: configuration and the token service (no per-request state)."""

    config: Config
    tokens: TokenService


def create_app(config: Config) -> falcon.App:
    """The WSGI app for ``config``; the store must already be connected (store.db.connect)."""
    app = falcon.App(middleware=[
        middleware.ClientAddress(config.server.trusted_proxies),
        middleware.BodyRules(config.server.max_body_bytes),
        middleware.SecurityHeaders(),
        middleware.RequestLog(),
    ])
    app.req_options.strip_url_path_trailing_slash = True
    errors.install(app)
    add_routes(app, AppContext(config=config, tokens=TokenService(config.issuer)))
    return app


def add_routes(app: falcon.App, context: AppContext) -> None:
    """Every route of the service, in one place."""
    app.add_route("/health", HealthResource())
