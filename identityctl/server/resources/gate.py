"""The hosted UI under /gate: sign-in and sign-up pages, theme CSS, static files.

Also renders :class:`UntrustedRedirect` errors (authorize and logout problems found before
the client's redirect URI is trusted) as an HTML page instead of the JSON error body: the
user is looking at a browser tab, and redirecting would make us an open redirector.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import falcon

from identityctl import i18n
from identityctl.errors import InvalidField
from identityctl.oauth.errors import UntrustedRedirect
from identityctl.server.openapi import error_response
from identityctl.server.requests import LANGUAGE_COOKIE, language_of, page_address
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
            browser=browser_secret(req, resp), here=page_address(req)))

    on_head = on_get


def _required(req: falcon.Request, name: str) -> str:
    value = req.get_param(name)
    if not value:
        raise UntrustedRedirect(f"The link lacks '{name}'; start again from the application.",
                                code="gate_link_incomplete")
    return value


class ProviderReturnResource:
    """GET /gate/federated?code&state (or error): an identity provider's answer comes back
    here (the redirect URI registered at every provider); the page hands it on."""

    def __init__(self, context: ServiceContext) -> None:
        self.context = context

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        # A page in passing, whose address holds the provider's code: the switcher on it
        # goes back to the start page.
        write_page(resp, gate.provider_return_page(self.context.config, language_of(req)))

    on_head = on_get


class LanguageResource:
    """POST /gate/language (a form: ``language``, ``return``): the language switcher of
    every page. Remembers the choice in a cookie and sends the browser back to the page it
    came from, a path on this service only (never another site: no open redirect). A
    ``ui_locales`` in that page's address becomes the chosen language, so the choice shows
    at once, and the sign-in under way goes on.

    No Origin check: the pages' own form posts carry ``Origin: null`` (their referrer
    policy is no-referrer), and a forged post can do no more than choose a language
    (docs/security.md)."""

    YEAR = 365 * 86400

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form = req.get_media(default_when_empty={})
        form = form if isinstance(form, dict) else {}
        chosen = str(form.get("language") or "")
        if chosen not in i18n.LANGUAGES:
            raise InvalidField("language", f"one of {', '.join(i18n.LANGUAGES)}.")
        resp.set_cookie(LANGUAGE_COOKIE, chosen, max_age=self.YEAR, path="/", secure=True,
                        http_only=True, same_site="Lax")
        resp.status = falcon.HTTP_303
        resp.location = switched_page(str(form.get("return") or ""), chosen)


#: What an OAuth redirect adds to a page's address (RFC 6749 §4.1.2, RFC 9207): a one-time
#: answer the page has used already, never carried back by the switcher (/account's
#: sign-in would be answered again, and refused).
ONE_TIME_ANSWERS = frozenset({"code", "state", "iss", "session_state", "error",
                              "error_description", "error_uri"})


def switched_page(address: str, language: str) -> str:
    """``address`` (a page of this service: a path, with its query less any OAuth answer)
    to come back to after choosing ``language``; anything else (another site, a scheme, a
    backslash, a control character) becomes the start page."""
    if not address.startswith("/") or address.startswith("//") or "\\" in address \
            or any(ord(character) < 0x20 or ord(character) == 0x7F for character in address):
        return "/"
    parts = urlsplit(address)
    if parts.scheme or parts.netloc:
        return "/"
    query = [(name, language if name == "ui_locales" else value)
             for name, value in parse_qsl(parts.query, keep_blank_values=True)
             if name not in ONE_TIME_ANSWERS]
    return urlunsplit(("", "", parts.path, urlencode(query), ""))


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
    app.add_route(gate.LANGUAGE_PATH, LanguageResource())
    app.add_route(gate.THEME_PATH, ThemeResource())
    app.add_route(gate.STATIC_PATH + "/{name}", StaticResource())

    def error_page(req: falcon.Request, resp: falcon.Response, ex: UntrustedRedirect,
                   params: dict[str, Any]) -> None:
        write_page(resp, gate.error_page(context.config, ex, language_of(req),
                                         here=page_address(req)), status=ex.status)

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
    gate.LANGUAGE_PATH: {"post": {
        "summary": "The language switcher of every page: remembers the choice (a cookie) "
                   "and goes back to the page (a path of this service only)",
        "operationId": "gateLanguage",
        "requestBody": {"required": True, "content": {
            "application/x-www-form-urlencoded": {"schema": {
                "type": "object", "required": ["language"],
                "properties": {"language": {"type": "string", "enum": list(i18n.LANGUAGES)},
                               "return": {"type": "string", "description":
                                          "The page to go back to: a path with its query "
                                          "(anything else: the start page)."}}}}}},
        "responses": {"303": {"description": "Back to the page, in the chosen language."},
                      "400": error_response("invalid_field: not a language of this service.")}}},
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
