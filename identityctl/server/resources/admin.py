"""The admin API (``/admin/api/v1``): what every admin resource shares, and ``GET /me``.

A call carries an access token for the admin API with the admin scope, a person's (the
console, signed in with a passkey) or an application's (client_credentials);
services/admin/console.py decides who acts. The route table of every admin resource is
server/resources/admin_routes.py (it imports their modules, which import this one).
"""

from __future__ import annotations

from typing import Any

import falcon

from identityctl.server.middleware import READS
from identityctl.server.openapi import error_response, json_response
from identityctl.server.requests import presented_token
from identityctl.services.admin import console
from identityctl.services.context import ServiceContext

API = "/admin/api/v1"


class AdminResource:
    """A resource of the admin API: :meth:`holder` is who calls (or the refusal), and a
    person's change needs the step-up (console.admin_holder's ``changing``)."""

    json_body = True
    #: A POST that changes nothing (a dry-run plan, a preview), or that carries its own fresh
    #: passkey assertion (a change's approval): no step-up.
    changes_nothing = False

    def __init__(self, context: ServiceContext) -> None:
        self.context = context

    def holder(self, req: falcon.Request, resp: falcon.Response) -> console.AdminHolder:
        resp.set_header("Cache-Control", "no-store")
        return console.admin_holder(self.context,
                                    presented_token(req, self.context.config.base_url),
                                    req.context.origin,
                                    changing=req.method not in READS and not self.changes_nothing)


def page_of(req: falcon.Request) -> tuple[int, list[Any] | None]:
    """A list's ``?limit=`` and the position its ``?cursor=`` names."""
    return (console.page_limit(req.get_param("limit")),
            console.decode_cursor(req.get_param("cursor")))


class MeResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = console.me(self.context, self.holder(req, resp))


# --- OpenAPI: what every admin operation shares ---------------------------------------------

BEARER = ("Authorization: Bearer <an access token for the admin API (audience admin_audience) "
          "with scope admin.required_scope>: the admin console's (a person holding the admin "
          "role, signed in with a passkey) or an application's (client_credentials).")
DENIED = error_response("missing_token, invalid_token (not for the admin API, revoked or "
                        "expired), user_inactive.")
FORBIDDEN = error_response("insufficient_scope (no admin scope), not_an_admin (the person no "
                           "longer holds a role carrying it), passkey_required (a person "
                           "signed in without a passkey).")
STEP_UP = error_response("missing_token, invalid_token, user_inactive; sign_in_too_old: a "
                         "person's sign-in is older than admin.step_up_seconds "
                         "(WWW-Authenticate: Bearer error=\"insufficient_user_authentication\", "
                         "max_age): sign in again, then retry.")
PAGE_PARAMETERS = [
    {"name": "limit", "in": "query", "required": False,
     "schema": {"type": "integer", "minimum": console.PAGE_LIMITS[0],
                "maximum": console.PAGE_LIMITS[1], "default": console.DEFAULT_PAGE_LIMIT}},
    {"name": "cursor", "in": "query", "required": False,
     "description": "The 'next' of the previous page.", "schema": {"type": "string"}}]


def page_response(description: str, item: dict[str, Any]) -> dict[str, Any]:
    """A list's answer: ``{items, next}`` (``next``: the cursor of the following page, or
    null on the last)."""
    return json_response(description, {
        "type": "object", "required": ["items", "next"],
        "properties": {"items": {"type": "array", "items": item},
                       "next": {"type": ["string", "null"]}}})


def operation(summary: str, operation_id: str, responses: dict[str, Any], *,
              step_up: bool = False, **extra: Any) -> dict[str, Any]:
    """An admin API operation: the bearer rule and its refusals added (``step_up``: a
    change, which a person makes only within admin.step_up_seconds of their sign-in)."""
    return {"summary": summary, "operationId": operation_id, "description": BEARER,
            "tags": ["admin"],
            "responses": {**responses, "401": STEP_UP if step_up else DENIED,
                          "403": FORBIDDEN}, **extra}


OPENAPI_PATHS = {
    f"{API}/me": {"get": operation(
        "Who calls: the person (or application) the token acts for, when they signed in, "
        "how, and until when destructive changes need no new sign-in", "adminMe",
        {"200": json_response("{id, username, displayName, actor, authTime, amr, "
                              "stepUpUntil}", {"type": "object"})})},
}
