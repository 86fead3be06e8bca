"""GET /health: the process answers and the database is reachable."""

from __future__ import annotations

import falcon

from identityctl import __version__
from identityctl.config import Config
from identityctl.errors import IdentityError
from identityctl.server.requests import language_of, page_address
from identityctl.server.resources.gate import write_page
from identityctl.store import db
from identityctl.ui import home


class HealthResource:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        # Its own short-timeout check: never waits behind the API's connections or a lock.
        db.check_health()
        resp.media = {"status": "ok", "database": "ok", "version": __version__}

    on_head = on_get  # uptime checkers ask with HEAD (Falcon sends no body)


class HomeResource:
    """GET /: what is running, and a way to try signing in."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            db.check_health()
            healthy = True
        except IdentityError:
            healthy = False
        write_page(resp, home.page(self.config, healthy=healthy, language=language_of(req),
                                   here=page_address(req)))

    on_head = on_get


OPENAPI_PATHS = {
    "/": {"get": {"summary": "What is running (an HTML page)", "operationId": "home",
                  "responses": {"200": {"description": "An HTML page.",
                                        "content": {"text/html": {}}}}}},
    "/health": {"get": {
        "summary": "Liveness and database check",
        "operationId": "health",
        "responses": {
            "200": {"description": "The service and its database answer.",
                    "content": {"application/json": {"schema": {
                        "type": "object", "properties": {
                            "status": {"type": "string"}, "database": {"type": "string"},
                            "version": {"type": "string"}}}}}},
            "503": {"description": "database_unavailable: the database does not answer.",
                    "content": {"application/json": {"schema": {
                        "$ref": "#/components/schemas/Error"}}}},
        },
    }},
}
