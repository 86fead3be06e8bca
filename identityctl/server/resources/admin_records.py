"""The admin API's records besides people: applications, the audit log (paged, exported),
operations, and configuration as code (services/admin/records.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import falcon

from identityctl.errors import UnsupportedMediaType
from identityctl.server.openapi import error_response, json_body, json_response
from identityctl.server.requests import json_object, json_value
from identityctl.server.resources.admin import (
    API,
    PAGE_PARAMETERS,
    AdminResource,
    operation,
    page_of,
    page_response,
)
from identityctl.services.admin import configuration, records
from identityctl.services.catalog import applications as application_service
from identityctl.store import db

if TYPE_CHECKING:
    from identityctl.store.audit import AuditFilter


class ApplicationsResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        limit, after = page_of(req)
        resp.media = records.applications_page(limit=limit, after=after)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        created, secret = records.create_application(self.holder(req, resp), json_object(req))
        resp.status = falcon.HTTP_201
        resp.media = {**created, "clientSecret": secret}


class ApplicationResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, app_id: str) -> None:
        self.holder(req, resp)
        resp.media = application_service.require_application(app_id)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, app_id: str) -> None:
        resp.media = records.update_application(self.holder(req, resp), app_id,
                                                json_object(req))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, app_id: str) -> None:
        records.delete_application(self.holder(req, resp), app_id)
        resp.status = falcon.HTTP_204


class ApplicationSecretResource(AdminResource):
    json_body = False  # a POST without a body

    def on_post(self, req: falcon.Request, resp: falcon.Response, app_id: str) -> None:
        resp.media = {"clientSecret": records.rotate_secret(self.holder(req, resp), app_id)}


def _audit_filter(req: falcon.Request) -> AuditFilter:
    return records.audit_filter(actor=req.get_param("actor"), subject=req.get_param("subject"),
                                event=req.get_param("event"), since=req.get_param("since"),
                                until=req.get_param("until"))


class AuditResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        limit, after = page_of(req)
        resp.media = records.audit_page(_audit_filter(req), limit=limit, after=after)


class AuditExportResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        form, wanted = records.export_format(req.get_param("format")), _audit_filter(req)
        resp.content_type = records.EXPORT_FORMATS[form]
        resp.set_header("Content-Disposition", f'attachment; filename="audit.{form}"')
        resp.stream = _streamed(records.exported(records.audit_events(wanted), form))


def _streamed(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The body, read from the store while it is sent: the connection it took goes back to
    the pool when it ends (server/runtime.ConnectionReturning has run by then)."""
    try:
        yield from chunks
    finally:
        db.release_connection()


class OperationsResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        resp.media = records.operations()


class ConfigurationResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        form = records.document_form(req.get_param("format"))
        resp.content_type = records.DOCUMENT_TYPES[form]
        resp.text = records.document_text(configuration.export(self.context), form)


def _sent(req: falcon.Request) -> object:
    """The document a plan or an apply sends: JSON, or YAML (``application/yaml``)."""
    media_type = (req.content_type or "").split(";")[0].strip().lower()
    if media_type in records.YAML_TYPES:
        return records.parsed_document(req.bounded_stream.read())
    if media_type != records.DOCUMENT_TYPES["json"]:
        raise UnsupportedMediaType("Send the document as application/json or "
                                   f"application/yaml (got {req.content_type or 'none'}).")
    return records.sent_document(json_value(req))


class ConfigurationPlanResource(AdminResource):
    changes_nothing = True  # a dry run
    json_body = False  # JSON or YAML: _sent

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = records.configuration_plan(self.context, self.holder(req, resp),
                                                _sent(req))


class ConfigurationApplyResource(AdminResource):
    json_body = False  # JSON or YAML: _sent

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = records.configuration_apply(self.context, self.holder(req, resp),
                                                 _sent(req))


# --- OpenAPI --------------------------------------------------------------------------------

_APPLICATION = {"type": "object", "description": "An application as `identityctl app show "
                "--json` shows it (never its secret)."}
_WITH_SECRET = {"type": "object", "description": "The application and `clientSecret`: a "
                "confidential client's secret, shown this once (null for a public client)."}
_APP_ID = [{"name": "app_id", "in": "path", "required": True,
            "description": "The application's id or client id.", "schema": {"type": "string"}}]
_AUDIT_FILTERS = [
    {"name": "actor", "in": "query", "required": False, "schema": {"type": "string"},
     "description": "Who acted, exactly as the events name them (admin:<user id>, "
                    "client:<client id>, a user id, apply...)."},
    {"name": "subject", "in": "query", "required": False, "schema": {"type": "string"},
     "description": "The id of the user the event is about."},
    {"name": "event", "in": "query", "required": False, "schema": {"type": "string"},
     "description": "The event name starts with this (user. for every user event)."},
    {"name": "since", "in": "query", "required": False, "schema": {"type": "string"},
     "description": "From this time on (ISO 8601, or seconds since 1970)."},
    {"name": "until", "in": "query", "required": False, "schema": {"type": "string"},
     "description": "Before this time (ISO 8601, or seconds since 1970)."}]
_AUDIT_EVENT = {"type": "object", "properties": {
    name: {"type": kind} for name, kind in (
        ("id", "integer"), ("at", "number"), ("event", "string"), ("outcome", "string"),
        ("actor", "string"), ("userId", ["string", "null"]), ("clientAddress", "string"),
        ("details", "object"), ("requestId", "string"))}}
_DOCUMENT = {"type": "object", "description": "A configuration document (apiVersion "
             "identityctl/v1, kind Configuration), as GET configuration answers it; "
             "docs/configuration-as-code.md."}
#: A document to plan or apply: JSON, a JSON string holding a document's text, or YAML.
_SENT = {"required": True, "content": {
    "application/json": {"schema": {"oneOf": [_DOCUMENT, {
        "type": "string", "description": "The text of a document, YAML or JSON."}]}},
    **{media: {"schema": {"type": "string"}} for media in records.YAML_TYPES}}}
_DOCUMENT_REFUSALS = {
    "400": error_response("malformed_document (not valid YAML or JSON, or an alias), "
                          "malformed_json, invalid_field, secret_reference_not_allowed."),
    "415": error_response("unsupported_media_type: neither JSON nor YAML.")}
_CHANGES = json_response("{dryRun, changes: [{section, key, action, before, after, "
                         "secretChanged}]}", {"type": "object"})

OPENAPI_PATHS = {
    f"{API}/applications": {
        "get": operation("Applications by name, a page at a time", "adminApplications",
                         {"200": page_response("A page of applications.", _APPLICATION)},
                         parameters=PAGE_PARAMETERS),
        "post": operation(
            "Create an application from a template (SPA, Server, Mobile, M2M, Device)",
            "adminApplicationCreate",
            {"201": json_response("Created.", _WITH_SECRET),
             "400": error_response("invalid_field, missing_field (the template's redirect "
                                   "URIs), unknown_key."),
             "409": error_response("The name is taken.")},
            requestBody=json_body({"type": "object", "required": ["template", "name"],
                                   "description": "{template, name, oauth: {redirectUris, "
                                   "scopes, grantTypes, ...}, description, themeId, ...}"}),
            step_up=True)},
    API + "/applications/{app_id}": {
        "parameters": _APP_ID,
        "get": operation("An application", "adminApplication",
                         {"200": json_response("The application.", _APPLICATION)}),
        "patch": operation(
            "Change some of an application's fields (oauth: some of its OAuth settings)",
            "adminApplicationUpdate", {"200": json_response("Changed.", _APPLICATION)},
            requestBody=json_body({"type": "object"}), step_up=True),
        "delete": operation("Delete an application (needs a recent sign-in)",
                            "adminApplicationDelete", {"204": {"description": "Deleted."}},
                            step_up=True)},
    API + "/applications/{app_id}/secret": {
        "parameters": _APP_ID,
        "post": operation("A new client secret, shown this once (needs a recent sign-in)",
                          "adminApplicationSecret",
                          {"200": json_response("{clientSecret}", {"type": "object"})},
                          step_up=True)},
    f"{API}/audit": {
        "get": operation("The audit log, newest first, filtered, a page at a time",
                         "adminAudit", {"200": page_response("A page of events.",
                                                             _AUDIT_EVENT)},
                         parameters=[*_AUDIT_FILTERS, *PAGE_PARAMETERS])},
    f"{API}/audit/export": {
        "get": operation(
            "Every event the filters hold, as JSON lines or CSV (a download)", "adminAuditExport",
            {"200": {"description": "JSON lines, or CSV with a header (a cell that a "
                                    "spreadsheet would take for a formula starts with ').",
                     "content": {media: {} for media in records.EXPORT_FORMATS.values()}}},
            parameters=[{"name": "format", "in": "query", "required": False,
                         "schema": {"enum": list(records.EXPORT_FORMATS),
                                    "default": "jsonl"}}, *_AUDIT_FILTERS])},
    f"{API}/operations": {
        "get": operation("Version, health, the outbox, sign-ins per day, webhook failures",
                         "adminOperations", {"200": json_response(
                             "{version, health, outbox: {kind: waiting}, signInsPerDay: "
                             "[{day, count}] (14 days, UTC), webhookFailures: [...]}",
                             {"type": "object"})})},
    f"{API}/configuration": {
        "get": operation(
            "The deployment's configuration document (identityctl export), as JSON or YAML",
            "adminConfiguration",
            {"200": {"description": "The document.",
                     "content": {media: {"schema": _DOCUMENT}
                                 for media in records.DOCUMENT_TYPES.values()}},
             "400": error_response("invalid_field (format).")},
            parameters=[{"name": "format", "in": "query", "required": False,
                         "schema": {"enum": list(records.DOCUMENT_TYPES),
                                    "default": "json"}}])},
    f"{API}/configuration/plan": {
        "post": operation("What applying a document would change; changes nothing "
                          "(identityctl apply --dry-run)", "adminConfigurationPlan",
                          {"200": _CHANGES, **_DOCUMENT_REFUSALS}, requestBody=_SENT)},
    f"{API}/configuration/apply": {
        "post": operation("Make the deployment match a document, all or nothing (needs a "
                          "recent sign-in)", "adminConfigurationApply",
                          {"200": _CHANGES, **_DOCUMENT_REFUSALS}, step_up=True,
                          requestBody=_SENT)},
}

