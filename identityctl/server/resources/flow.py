"""POST /flow/execute: start a flow or continue an execution (docs/flows.md)."""

from __future__ import annotations

from typing import Any

import falcon

from identityctl.errors import InvalidField
from identityctl.flow.definition import FLOW_TYPES
from identityctl.server.middleware import browser_origins, origin_of
from identityctl.server.openapi import error_response, json_body, json_response
from identityctl.server.requests import (
    bool_field,
    json_object,
    language_of,
    object_field,
    string_field,
)
from identityctl.services.context import ServiceContext
from identityctl.services.flows import execution as flow_execution


def _inputs(body: dict[str, Any]) -> dict[str, Any]:
    inputs = object_field(body, "inputs", required=False) or {}
    for name, value in inputs.items():
        if value is not None and not isinstance(value, str):
            raise InvalidField(f"inputs.{name}", "must be a string")
    return inputs


def _cross_origin(req: falcon.Request, resp: falcon.Response, resource: FlowExecuteResource,
                  params: dict[str, Any]) -> None:
    """CORS for an application's own pages driving /flow/execute (self-hosted sign-in,
    docs/security.md): the origins that may post here (server/middleware.BrowserOrigin) may
    read the answers, errors included (set before the responder runs). No credentials."""
    origin = req.get_header("Origin")
    if origin is not None and origin_of(origin) in resource.origins:
        resp.set_header("Access-Control-Allow-Origin", origin)
    resp.set_header("Vary", "Origin")


def browser_secret(req: falcon.Request, resp: falcon.Response | None = None) -> str:
    """The request's browser secret (services/flows/execution.BROWSER_COOKIE); with ``resp``,
    one is made and set when the browser has none. ``__Host-``, HttpOnly, SameSite=Lax: sent
    by the hosted pages' own requests, never by another site's."""
    secret = req.cookies.get(flow_execution.BROWSER_COOKIE, "")
    if not secret and resp is not None:
        secret = flow_execution.new_browser_secret()
        resp.set_cookie(flow_execution.BROWSER_COOKIE, secret, path="/", secure=True,
                        http_only=True, same_site="Lax")
    return secret


@falcon.before(_cross_origin)
class FlowExecuteResource:
    json_body = True

    def __init__(self, context: ServiceContext) -> None:
        self.context = context
        self.origins = browser_origins(context.config)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req)
        verbose = bool_field(body, "verbose")
        # What the flow sends the person (a code by e-mail) is in their chosen language, else
        # their browser's.
        language = language_of(req)
        # The hosted pages' requests carry the browser secret, and their executions are
        # bound to it; an application's own page across origins sends no cookie.
        browser = browser_secret(req)
        if body.get("executionId") is None:
            resp.media = flow_execution.start_execution(
                self.context, application_id=string_field(body, "applicationId"),
                flow_type=string_field(body, "flowType"), origin=req.context.origin,
                language=language, verbose=verbose, browser=browser)
            return
        resp.media = flow_execution.continue_execution(
            self.context, execution_id=string_field(body, "executionId"),
            action=string_field(body, "action"), inputs=_inputs(body),
            origin=req.context.origin, language=language, verbose=verbose, browser=browser)

    def on_options(self, req: falcon.Request, resp: falcon.Response) -> None:
        """The CORS preflight of an application's own pages (the Origin decides)."""
        resp.status = falcon.HTTP_204
        resp.set_header("Access-Control-Allow-Methods", "POST")
        resp.set_header("Access-Control-Allow-Headers", "Content-Type")
        resp.set_header("Access-Control-Max-Age", "600")


def add_flow_routes(app: falcon.App, context: ServiceContext) -> None:
    app.add_route("/flow/execute", FlowExecuteResource(context))


# --- OpenAPI ----------------------------------------------------------------------------------

_STEP = {
    "type": "object", "required": ["executionId", "flowStatus"],
    "properties": {
        "executionId": {"type": "string"},
        "flowStatus": {"type": "string", "enum": ["INCOMPLETE", "COMPLETE", "ERROR"]},
        "type": {"type": "string", "enum": ["VIEW"]},
        "failureReason": {"type": "string", "description": "Why the step was shown again "
                                                           "(INCOMPLETE) or the flow ended "
                                                           "(ERROR)."},
        "assertion": {"type": "string", "description": "COMPLETE: the sign-in assertion JWT "
                                                       "(as /auth/passkey/finish returns)."},
        "data": {"type": "object", "properties": {
            "inputs": {"type": "array", "items": {"type": "object", "properties": {
                "ref": {"type": "string"}, "identifier": {"type": "string"},
                "type": {"type": "string"}, "required": {"type": "boolean"}}}},
            "actions": {"type": "array", "items": {"type": "object", "properties": {
                "ref": {"type": "string"}, "type": {"type": "string"},
                "label": {"type": "string"}, "nextNode": {"type": "string"}}}},
            "additionalData": {"type": "object", "additionalProperties": {"type": "string"},
                               "description": "passkeyChallenge / passkeyCreationOptions "
                                              "(WebAuthn JSON options as text), "
                                              "passkeyCredentialID, passkeyCredentialName, "
                                              "credentialCreatedAt."},
            "meta": {"type": "object"}}},
    },
}
OPENAPI_PATHS: dict[str, dict] = {
    "/flow/execute": {"post": {
        "summary": "Start a flow or continue an execution",
        "description": "Initial request {applicationId, flowType}; continuation "
                       "{executionId, action, inputs}. docs/flows.md describes each step.",
        "operationId": "flowExecute",
        "requestBody": json_body({"type": "object", "properties": {
            "applicationId": {"type": "string"},
            "flowType": {"type": "string", "enum": list(FLOW_TYPES)},
            "executionId": {"type": "string"}, "action": {"type": "string"},
            "inputs": {"type": "object", "additionalProperties": {"type": "string"}},
            "verbose": {"type": "boolean"}}}),
        "responses": {
            "200": json_response("The next step, the completed flow or its error.", _STEP),
            "400": error_response("missing_field / invalid_field (names the field or input), "
                                  "unknown_action, execution_completed, execution_expired, "
                                  "execution_not_waiting, no_flow."),
            "403": error_response("registration_disabled: the application does not allow "
                                  "signing up."),
            "404": error_response("application_not_found, execution_not_found."),
            "409": error_response("execution_conflict: another request is continuing the "
                                  "same execution."),
            "429": error_response("too_many_attempts: too many failed sign-ins for the "
                                  "account or address; see Retry-After."),
            "503": error_response("database_busy: retry after the Retry-After seconds."),
        }}},
}
