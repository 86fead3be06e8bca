"""The admin API's people (``/admin/api/v1/users``): search, one person's page, create,
disable/enable, delete, invite, end sessions, reset passkeys. Thin adapters over
services/admin/people.py."""

from __future__ import annotations

import falcon

from identityctl.server.openapi import error_response, json_body, json_response
from identityctl.server.requests import bool_field, json_object, object_field, string_field
from identityctl.server.resources.admin import (
    API,
    PAGE_PARAMETERS,
    AdminResource,
    operation,
    page_of,
    page_response,
)
from identityctl.services.admin import people


class UsersResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        limit, after = page_of(req)
        resp.media = people.search(req.get_param("q"), limit=limit, after=after)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        holder, body = self.holder(req, resp), json_object(req)
        resp.status = falcon.HTTP_201
        resp.media = people.create(
            self.context, holder, username=string_field(body, "username"),
            email=string_field(body, "email", required=False),
            attributes=object_field(body, "attributes", required=False),
            user_type=string_field(body, "userType", required=False))


class UserResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        self.holder(req, resp)
        resp.media = people.user(self.context, user_id)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        holder, body = self.holder(req, resp), json_object(req)
        resp.media = people.change(self.context, holder, user_id,
                                   state=string_field(body, "state", required=False),
                                   attributes=object_field(body, "attributes", required=False),
                                   user_type=string_field(body, "userType", required=False),
                                   ou=string_field(body, "ou", required=False))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        people.delete(self.holder(req, resp), user_id)
        resp.status = falcon.HTTP_204


class InviteResource(AdminResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        holder, body = self.holder(req, resp), json_object(req)
        resp.status = falcon.HTTP_201
        resp.media = people.invite(self.context, holder, user_id,
                                   send_email=bool_field(body, "sendEmail"))


class SessionsResource(AdminResource):
    def on_delete(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        resp.media = {"ended": people.end_sessions(self.context, self.holder(req, resp),
                                                   user_id)}


class SessionResource(AdminResource):
    def on_delete(self, req: falcon.Request, resp: falcon.Response, user_id: str,
                  session_id: str) -> None:
        people.end_session(self.context, self.holder(req, resp), user_id, session_id)
        resp.status = falcon.HTTP_204


class PasskeysResource(AdminResource):
    def on_delete(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        resp.media = {"deleted": people.reset_passkeys(self.context, self.holder(req, resp),
                                                       user_id)}


class RoleResource(AdminResource):
    json_body = False  # PUT and DELETE without a body

    def on_put(self, req: falcon.Request, resp: falcon.Response, user_id: str,
               role: str) -> None:
        people.grant_role(self.holder(req, resp), user_id, role)
        resp.status = falcon.HTTP_204

    def on_delete(self, req: falcon.Request, resp: falcon.Response, user_id: str,
                  role: str) -> None:
        people.revoke_role(self.holder(req, resp), user_id, role)
        resp.status = falcon.HTTP_204


class DirectoryResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        resp.media = people.choices()


_LISTED = {"type": "object", "properties": {
    "id": {"type": "string"}, "username": {"type": "string"},
    "email": {"type": ["string", "null"]}, "emailVerified": {"type": "boolean"},
    "userType": {"type": "string"}, "ou": {"type": "string"},
    "state": {"enum": ["active", "disabled", "locked"]}, "createdAt": {"type": "number"},
    "passkeys": {"type": "integer", "description": "How many passkeys the person has."}}}
_PERSON = json_response(
    "The person: the list's fields and attributes, roles, passkeys [{id, name, "
    "authenticator, icon, iconDark, createdAt, lastUsedAt}], live sessions [{id, browser, "
    "address, since, lastSeen}], consents [{clientId, applicationName, scopes}] and the 20 "
    "most recent audit events.", {"type": "object"})
_USER_ID = [{"name": "user_id", "in": "path", "required": True, "schema": {"type": "string"}}]
_NOT_FOUND = error_response("user_not_found.")

OPENAPI_PATHS = {
    f"{API}/users": {
        "get": operation(
            "Find people: everyone by username, or those whose username or e-mail address "
            "starts with q (usernames first), or the one whose id q is; a page at a time",
            "adminUsers", {"200": page_response("A page of people.", _LISTED),
                           "400": error_response("invalid_field (limit, cursor).")},
            parameters=[{"name": "q", "in": "query", "required": False,
                         "schema": {"type": "string"}}, *PAGE_PARAMETERS]),
        "post": operation(
            "Create a person (then invite them to enrol a passkey)", "adminUserCreate",
            {"201": _PERSON, "400": error_response("missing_field, invalid_field "
                                                   "(username, attributes against the "
                                                   "user type's schema)."),
             "404": error_response("user_type_not_found."),
             "409": error_response("username_taken, attribute_taken.")},
            requestBody=json_body({"type": "object", "required": ["username"], "properties": {
                "username": {"type": "string"}, "email": {"type": "string"},
                "attributes": {"type": "object"}, "userType": {"type": "string"}}}), step_up=True)},
    API + "/users/{user_id}": {
        "parameters": _USER_ID,
        "get": operation("One person's page", "adminUser", {"200": _PERSON, "404": _NOT_FOUND}),
        "patch": operation(
            "Disable (signs them out everywhere) or enable a person, replace their "
            "attributes, give them another user type (their attributes must suit its "
            "schema) and/or move them to another organization unit (needs a recent sign-in)",
            "adminUserChange",
            {"200": _PERSON, "400": error_response("invalid_field (state, attributes "
                                                   "against the user type's schema)."),
             "404": error_response("user_not_found, user_type_not_found, ou_not_found."),
             "409": error_response("attribute_taken.")},
            step_up=True,
            requestBody=json_body({"type": "object", "properties": {
                "state": {"enum": list(people.STATES)}, "attributes": {"type": "object"},
                "userType": {"type": "string", "description": "A user type's name or id."},
                "ou": {"type": "string",
                       "description": "An organization unit's handle or id."}}})),
        "delete": operation("Delete a person (needs a recent sign-in)", "adminUserDelete",
                            {"204": {"description": "Deleted."}, "404": _NOT_FOUND},
                            step_up=True)},
    API + "/users/{user_id}/invite": {
        "parameters": _USER_ID,
        "post": operation(
            "A one-time link (and its QR code) with which the person enrols a passkey; "
            "e-mailed to them with sendEmail", "adminUserInvite",
            {"201": json_response("{link, qrSvg, expiresAt, emailedTo}", {"type": "object"}),
             "400": error_response("email_not_configured, no_email."),
             "404": _NOT_FOUND, "409": error_response("user_inactive.")},
            requestBody=json_body({"type": "object", "properties": {
                "sendEmail": {"type": "boolean", "default": False}}}), step_up=True)},
    API + "/users/{user_id}/sessions": {
        "parameters": _USER_ID,
        "delete": operation(
            "Sign the person out of every browser (with back-channel logout)",
            "adminUserSessionsEnd",
            {"200": json_response("{ended: number of sessions}", {"type": "object"}),
             "404": _NOT_FOUND}, step_up=True)},
    API + "/users/{user_id}/sessions/{session_id}": {
        "parameters": [*_USER_ID, {"name": "session_id", "in": "path", "required": True,
                                   "schema": {"type": "string"}}],
        "delete": operation("End one of the person's browser sessions", "adminUserSessionEnd",
                            {"204": {"description": "Ended."},
                             "404": error_response("user_not_found, session_not_found.")},
                            step_up=True)},
    API + "/users/{user_id}/passkeys": {
        "parameters": _USER_ID,
        "delete": operation(
            "Reset the person's passkeys: every one is deleted and they are signed out; they "
            "come back with an invitation (needs a recent sign-in)", "adminUserPasskeysReset",
            {"200": json_response("{deleted: number of passkeys}", {"type": "object"}),
             "404": _NOT_FOUND}, step_up=True)},
    API + "/users/{user_id}/roles/{role}": {
        "parameters": [*_USER_ID, {"name": "role", "in": "path", "required": True,
                                   "description": "The role's name or id.",
                                   "schema": {"type": "string"}}],
        "put": operation("Give the person a role (nothing changes when they hold it; needs a "
                         "recent sign-in)", "adminUserRoleGrant",
                         {"204": {"description": "The person holds the role."},
                          "404": error_response("user_not_found, role_not_found.")},
                         step_up=True),
        "delete": operation("Take a role from the person (needs a recent sign-in)",
                            "adminUserRoleRevoke",
                            {"204": {"description": "Taken."},
                             "404": error_response("user_not_found, role_not_found."),
                             "409": error_response("role_not_held.")}, step_up=True)},
    f"{API}/directory": {
        "get": operation(
            "What a person's page offers to choose from: user types (with their attribute "
            "schemas), organization units (handles) and roles", "adminDirectory",
            {"200": json_response("{userTypes: [{name, schema}], organizationUnits: "
                                  "[handle], roles: [name]}", {"type": "object"})})},
}
