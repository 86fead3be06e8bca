"""The hosted UI under /gate: sign-in and sign-up pages, theme CSS, static files.

Also renders :class:`UntrustedRedirect` errors (authorize and logout problems found before
the client's redirect URI is trusted) as an HTML page instead of the JSON error body: the
user is looking at a browser tab, and redirecting would make us an open redirector.
"""

from __future__ import annotations

from typing import Any

import falcon

from identityctl import i18n
from identityctl.oauth.errors import UntrustedRedirect
from identityctl.server.openapi import error_response
from identityctl.server.resources.flow import browser_secret
from identityctl.services.context import ServiceContext
from identityctl.ui import gate, pages


def write_page(resp: falcon.Response, page: str, *, status: int = 200) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_HTML
    resp.text = page
    resp.set_header("Content-Security-Policy", pages.PAGE_CSP)
    resp.set_header("Cache-Control", "no-store")


class GatePageResource:
    """GET /gate/signin, /gate/signup and /gate/recover
    ?authId&applicationId[&executionId][&resume]."""

    def __init__(self, context: ServiceContext, mode: str) -> None:
        self.context = context
        self.mode = mode

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        write_page(resp, gate.flow_page(
            self.context.config, mode=self.mode,
            application_id=_required(req, "applicationId"), auth_id=_required(req, "authId"),
            execution_id=req.get_param("executionId") or "",
            resume=req.get_param("resume") == "session", language=language_of(req),
            browser=browser_secret(req, resp)))

    on_head = on_get


def _required(req: falcon.Request, name: str) -> str:
    value = req.get_param(name)
    if not value:
        raise UntrustedRedirect(f"The link lacks '{name}'; start again from the application.",
                                code="gate_link_incomplete")
    return value


def language_of(req: falcon.Request) -> str:
    """The page's language: the request's ``ui_locales``, then ``Accept-Language``."""
    return i18n.choose(ui_locales=req.get_param("ui_locales"),
                       accept_language=req.get_header("Accept-Language"))


class ProviderReturnResource:
    """GET /gate/federated?code&state (or error): an identity provider's answer comes back
    here (the redirect URI registered at every provider); the page hands it on."""

    def __init__(self, context: ServiceContext) -> None:
        self.context = context

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        write_page(resp, gate.provider_return_page(self.context.config, language_of(req)))

    on_head = on_get


class ThemeResource:
    """GET /gate/theme.css[?applicationId=] -> the theme's CSS variables."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = "text/css; charset=utf-8"
        resp.set_header("Cache-Control", "no-cache")
        resp.text = gate.theme_stylesheet(req.get_param("applicationId"))

    on_head = on_get


class StaticResource:
    """GET /gate/static/{name}: gate.js, gate.css (read from the package)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        found = pages.static_file(name)
        if found is None:
            raise falcon.HTTPNotFound(description=f"No static file '{name}'.")
        resp.content_type = found.content_type
        resp.data = found.content
        resp.set_header("Cache-Control", "public, max-age=300")

    on_head = on_get


class FaviconResource:
    """GET /favicon.ico: the icon browsers ask for on every page (an SVG)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = pages.static_file("favicon.svg")
        assert found is not None  # shipped in the package
        resp.content_type = found.content_type
        resp.data = found.content
        resp.set_header("Cache-Control", "public, max-age=86400")

    on_head = on_get


def add_gate_routes(app: falcon.App, context: ServiceContext) -> None:
    app.add_route("/favicon.ico", FaviconResource())
    app.add_route(f"{gate.GATE_PATH}/{gate.SIGN_IN}", GatePageResource(context, gate.SIGN_IN))
    app.add_route(f"{gate.GATE_PATH}/{gate.SIGN_UP}", GatePageResource(context, gate.SIGN_UP))
    app.add_route(f"{gate.GATE_PATH}/{gate.RECOVER}", GatePageResource(context, gate.RECOVER))
    app.add_route(gate.PROVIDER_RETURN_PATH, ProviderReturnResource(context))
    app.add_route(gate.THEME_PATH, ThemeResource())
    app.add_route(gate.STATIC_PATH + "/{name}", StaticResource())

    def error_page(req: falcon.Request, resp: falcon.Response, ex: UntrustedRedirect,
                   params: dict[str, Any]) -> None:
        write_page(resp, gate.error_page(context.config, ex, language_of(req)),
                   status=ex.status)

    app.add_error_handler(UntrustedRedirect, error_page)


def _page(summary: str, operation_id: str, parameters: list[dict[str, Any]],
          errors: str) -> dict[str, Any]:
    return {"get": {"summary": summary, "operationId": operation_id, "parameters": parameters,
                    "responses": {"200": {"description": "An HTML page.",
                                          "content": {"text/html": {}}},
                                  "400": {"description": f"An HTML error page: {errors}",
                                          "content": {"text/html": {}}}}}}


def _query(name: str, description: str, *, required: bool = True) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "description": description,
            "schema": {"type": "string"}}


_REQUEST_PARAMETERS = [
    _query("authId", "Opaque id of the authorization request (from /oauth2/authorize)."),
    _query("applicationId", "The application whose flow and theme are used."),
]
_PAGE_ERRORS = "gate_link_incomplete, application_not_found"

OPENAPI_PATHS = {
    f"{gate.GATE_PATH}/{gate.SIGN_IN}": _page(
        "Hosted sign-in page", "gateSignIn",
        [*_REQUEST_PARAMETERS, _query("executionId", "The flow execution authorize started.",
                                      required=False),
         _query("ui_locales", "Languages the client asked for (OIDC); else Accept-Language.",
                required=False),
         _query("resume", "\"session\": the browser's session signed the person in; the "
                "page asks only their consent.", required=False)], _PAGE_ERRORS),
    f"{gate.GATE_PATH}/{gate.SIGN_UP}": _page(
        "Hosted sign-up page (the application's registration flow)", "gateSignUp",
        _REQUEST_PARAMETERS, f"{_PAGE_ERRORS}, registration_disabled"),
    f"{gate.GATE_PATH}/{gate.RECOVER}": _page(
        "Hosted recovery page (\"Lost your passkey?\": the RECOVERY flow)", "gateRecover",
        _REQUEST_PARAMETERS, _PAGE_ERRORS),
    gate.PROVIDER_RETURN_PATH: {"get": {
        "summary": "Where identity providers send the browser back (register this URL "
                   "upstream); the page continues the sign-in in the tab that left",
        "operationId": "gateProviderReturn",
        "parameters": [_query("code", "The provider's authorization code.", required=False),
                       _query("state", "The state sent to the provider.", required=False),
                       _query("error", "The provider's refusal.", required=False)],
        "responses": {"200": {"description": "text/html", "content": {"text/html": {}}}}}},
    "/favicon.ico": {"get": {"summary": "The service's icon (SVG)", "operationId": "favicon",
                             "responses": {"200": {"description": "image/svg+xml",
                                                   "content": {"image/svg+xml": {}}}}}},
    gate.THEME_PATH: {"get": {
        "summary": "The application's theme as CSS custom properties", "operationId": "gateTheme",
        "parameters": [_query("applicationId", "Without it, the default theme.",
                              required=False)],
        "responses": {"200": {"description": "text/css", "content": {"text/css": {}}},
                      "400": {"description": "An HTML error page: application_not_found",
                              "content": {"text/html": {}}}}}},
    gate.STATIC_PATH + "/{name}": {"get": {
        "summary": "Static files of the hosted UI (gate.js, gate.css)",
        "operationId": "gateStatic",
        "parameters": [{"name": "name", "in": "path", "required": True,
                        "schema": {"type": "string"}}],
        "responses": {"200": {"description": "The file."},
                      "404": error_response("not_found: no such file.")}}},
}
