"""The admin API's proposed changes: what an AI assistant asked for over MCP, which an admin
approves with a passkey assertion over the change's digest (services/admin/changes.py)."""

from __future__ import annotations

import falcon

from identityctl.passkey import codec
from identityctl.server.openapi import error_response, json_body, json_response
from identityctl.server.requests import json_object, object_field, string_field
from identityctl.server.resources.admin import (
    API,
    PAGE_PARAMETERS,
    AdminResource,
    operation,
    page_of,
    page_response,
)
from identityctl.services.admin import changes

CREDENTIAL = "publicKeyCredential"


class ChangesResource(AdminResource):
    json_body = False

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        limit, position = page_of(req)
        resp.media = changes.list_changes(limit=limit, position=position,
                                          state=req.get_param("state") or None)


class ChangeResource(AdminResource):
    json_body = False

    def on_get(self, req: falcon.Request, resp: falcon.Response, change_id: str) -> None:
        self.holder(req, resp)
        resp.media = changes.shown(changes.require_change(change_id))


class ApprovalResource(AdminResource):
    changes_nothing = True  # it only asks the passkey
    json_body = False  # a POST without a body

    def on_post(self, req: falcon.Request, resp: falcon.Response, change_id: str) -> None:
        resp.media = changes.approval_options(self.context, self.holder(req, resp), change_id)


class ApproveResource(AdminResource):
    changes_nothing = True  # its passkey assertion is fresh

    def on_post(self, req: falcon.Request, resp: falcon.Response, change_id: str) -> None:
        holder = self.holder(req, resp)
        body = json_object(req)
        resp.media = changes.approve(
            self.context, holder, change_id,
            credential=codec.json_credential(object_field(body, CREDENTIAL)),
            session_token=string_field(body, "sessionToken"),
            nonce=string_field(body, "nonce"))


class RejectResource(AdminResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, change_id: str) -> None:
        holder = self.holder(req, resp)
        body = json_object(req)
        resp.media = changes.reject(change_id, origin=holder.origin,
                                    reason=string_field(body, "reason", required=False) or "")


# --- OpenAPI --------------------------------------------------------------------------------

_CHANGE_ID = [{"name": "change_id", "in": "path", "required": True,
               "schema": {"type": "string"}}]
_CHANGE = {"type": "object", "description": (
    "{id, summary, document: {set: {section: [entries]}, remove: {section: [keys]}}, diff: "
    "[{section, key, action, before, after, secretChanged}], digest (SHA-256 hex of document "
    "and diff), clientId, author, createdAt, expiresAt, state (pending, approved, rejected, "
    "expired, failed), decidedBy, decidedAt, reason, intact (the digest still matches)}")}
_NOT_PENDING = error_response("change_not_pending (decided or expired), change_tampered (its "
                              "digest no longer matches), change_conflict (the deployment "
                              "moved: nothing was applied).")

OPENAPI_PATHS = {
    f"{API}/changes": {
        "get": operation("Changes proposed over MCP, newest first, a page at a time",
                         "adminChanges", {"200": page_response("A page of changes.", _CHANGE)},
                         parameters=[{"name": "state", "in": "query", "required": False,
                                      "schema": {"type": "string"}}, *PAGE_PARAMETERS])},
    API + "/changes/{change_id}": {
        "parameters": _CHANGE_ID,
        "get": operation("A proposed change with its diff", "adminChange",
                         {"200": json_response("The change.", _CHANGE),
                          "404": error_response("change_not_found.")})},
    API + "/changes/{change_id}/approval": {
        "parameters": _CHANGE_ID,
        "post": operation(
            "The passkey assertion request that approves this change: WebAuthn request "
            "options whose challenge is SHA-256(digest || nonce)", "adminChangeApproval",
            {"200": json_response("{publicKeyCredentialRequestOptions, sessionToken, nonce, "
                                  "digest}", {"type": "object"}),
             "409": _NOT_PENDING})},
    API + "/changes/{change_id}/approve": {
        "parameters": _CHANGE_ID,
        "post": operation(
            "Approve with the assertion (the change is applied in one transaction)",
            "adminChangeApprove",
            {"200": json_response("The change, approved.", _CHANGE),
             "400": error_response("approval_mismatch (the assertion was asked for another "
                                   "digest), unknown_session_token (used already), "
                                   "verification errors."),
             "409": _NOT_PENDING},
            requestBody=json_body({"type": "object",
                                   "required": [CREDENTIAL, "sessionToken", "nonce"]}))},
    API + "/changes/{change_id}/reject": {
        "parameters": _CHANGE_ID,
        "post": operation("Reject a pending change", "adminChangeReject",
                          {"200": json_response("The change, rejected.", _CHANGE),
                           "409": _NOT_PENDING},
                          requestBody=json_body({"type": "object",
                                                 "properties": {"reason": {
                                                     "type": "string"}}}), step_up=True)},
}
