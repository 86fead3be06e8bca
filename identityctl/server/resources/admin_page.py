"""The admin console's page (``/admin``): the shell ``ui/admin_page.py`` renders; the console
itself calls the admin API (``/admin/api/v1``, server/resources/admin_routes.py)."""

from __future__ import annotations

import falcon

from identityctl.server.requests import language_of, page_address
from identityctl.server.resources.gate import write_page
from identityctl.services.context import ServiceContext
from identityctl.ui import admin_page


class AdminPageResource:
    def __init__(self, context: ServiceContext) -> None:
        self.context = context

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        write_page(resp, admin_page.page(self.context.config, language=language_of(req),
                                         here=page_address(req)))

    on_head = on_get  # a page: HEAD answers as GET does, without the body


def add_admin_page_route(app: falcon.App, context: ServiceContext) -> None:
    if context.config.admin.enabled:
        app.add_route(admin_page.ADMIN_PATH, AdminPageResource(context))
