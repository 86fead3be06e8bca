"""GET /health: the process answers and the database is reachable."""

from __future__ import annotations

import falcon

from identityctl import __version__
from identityctl.store import db


class HealthResource:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        # Its own short-timeout check: never waits behind the API's connections or a lock.
        db.check_health()
        resp.media = {"status": "ok", "database": "ok", "version": __version__}


OPENAPI_PATHS = {
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
