"""The admin API's integrations: roles, upstream identity providers, resource servers and
webhooks with their deliveries. Small catalogs: each list is answered whole. Removing one
needs a recent sign-in (services/admin/integrations.py)."""

from __future__ import annotations

from typing import Any

import falcon

from identityctl.errors import InvalidField, MissingField
from identityctl.server.openapi import error_response, json_body, json_response
from identityctl.server.requests import json_object, string_field
from identityctl.server.resources.admin import API, AdminResource, operation
from identityctl.services import shapes
from identityctl.services.accounts import federation
from identityctl.services.admin import console, integrations
from identityctl.services.clients import resource_servers
from identityctl.services.delivery import webhooks
from identityctl.services.directory import roles


def _body(req: falcon.Request, shape: shapes.Shape) -> dict[str, Any]:
    """The JSON object of the request, holding no key ``shape`` does not know."""
    body = json_object(req)
    shapes.check(body, shape)
    return body


def _names(body: dict[str, Any], name: str, *, required: bool = True) -> list[str] | None:
    """``body[name]`` as a list of texts (scopes, event types)."""
    value = body.get(name)
    if value is None:
        if required:
            raise MissingField(name)
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidField(name, "must be a list of text")
    return value


def _whole(items: list[dict[str, Any]]) -> dict[str, Any]:
    """A small catalog's answer: every item on the one page."""
    return {"items": items, "next": None}


class RolesResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        resp.media = _whole(integrations.roles())

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        holder, body = self.holder(req, resp), _body(req, integrations.ROLE)
        resp.status = falcon.HTTP_201
        resp.media = roles.create_role(
            name=string_field(body, "name"), scopes=_names(body, "scopes", required=False) or [],
            description=string_field(body, "description", required=False, blank_ok=True) or "",
            origin=holder.origin).to_api()


class RoleResource(AdminResource):
    def on_patch(self, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
        holder, body = self.holder(req, resp), _body(req, integrations.ROLE)
        if "name" in body:
            raise InvalidField("name", "stays as it is; make a new role for another name")
        resp.media = roles.update_role(
            role_id, scopes=_names(body, "scopes", required=False),
            description=string_field(body, "description", required=False, blank_ok=True),
            origin=holder.origin).to_api()

    def on_delete(self, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
        roles.delete_role(role_id, origin=self.holder(req, resp).origin)
        resp.status = falcon.HTTP_204


class ProvidersResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        resp.media = {**_whole([provider.to_api() for provider in federation.list_providers()]),
                      "callbackUri": federation.callback_uri(self.context)}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        created = integrations.add_provider(self.context, self.holder(req, resp),
                                            json_object(req))
        resp.status = falcon.HTTP_201
        resp.media = integrations.provider_item(self.context, created)


class ProviderResource(AdminResource):
    def on_patch(self, req: falcon.Request, resp: falcon.Response, provider_id: str) -> None:
        updated = integrations.update_provider(self.holder(req, resp), provider_id,
                                               json_object(req))
        resp.media = integrations.provider_item(self.context, updated)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, provider_id: str) -> None:
        federation.remove_provider(provider_id, origin=self.holder(req, resp).origin)
        resp.status = falcon.HTTP_204


class ResourceServersResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        resp.media = _whole([server.to_api()
                             for server in resource_servers.list_resource_servers()])

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        holder, body = self.holder(req, resp), _body(req, integrations.RESOURCE_SERVER)
        resp.status = falcon.HTTP_201
        resp.media = resource_servers.register_resource_server(
            self.context, identifier=string_field(body, "identifier"),
            scopes=_names(body, "scopes"),
            name=string_field(body, "name", required=False, blank_ok=True) or "",
            origin=holder.origin).to_api()


class ResourceServerResource(AdminResource):
    def on_patch(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        holder, body = self.holder(req, resp), _body(req, integrations.RESOURCE_SERVER)
        if "identifier" in body:
            raise InvalidField("identifier", "stays as it is; register the new URL instead")
        resp.media = resource_servers.update_resource_server(
            server_id, scopes=_names(body, "scopes"),
            name=string_field(body, "name", required=False, blank_ok=True),
            origin=holder.origin).to_api()

    def on_delete(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        resource_servers.remove_resource_server(server_id,
                                                origin=self.holder(req, resp).origin)
        resp.status = falcon.HTTP_204


class WebhooksResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        resp.media = _whole([subscription.to_api()
                             for subscription in webhooks.list_subscriptions()])

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        holder, body = self.holder(req, resp), _body(req, integrations.WEBHOOK)
        made, secret = webhooks.add_subscription(
            url=string_field(body, "url"), events=_names(body, "events") or [],
            description=string_field(body, "description", required=False, blank_ok=True) or "",
            origin=holder.origin)
        resp.status = falcon.HTTP_201
        resp.media = {**made.to_api(), "secret": secret}


class WebhookResource(AdminResource):
    def on_delete(self, req: falcon.Request, resp: falcon.Response, webhook_id: str) -> None:
        webhooks.remove_subscription(webhook_id, origin=self.holder(req, resp).origin)
        resp.status = falcon.HTTP_204


class DeliveriesResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        resp.media = {"items": webhooks.deliveries(console.page_limit(req.get_param("limit")))}


class RedeliverResource(AdminResource):
    json_body = False  # a POST without a body

    def on_post(self, req: falcon.Request, resp: falcon.Response, delivery_id: str) -> None:
        queued = webhooks.redeliver(delivery_id, origin=self.holder(req, resp).origin)
        resp.status = falcon.HTTP_201
        resp.media = {"id": queued}


# --- OpenAPI --------------------------------------------------------------------------------

_TEXTS = {"type": "array", "items": {"type": "string"}}


def _catalog(description: str, item: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return json_response(description, {
        "type": "object", "required": ["items", "next"],
        "properties": {"items": {"type": "array", "items": item}, "next": {"type": "null"},
                       **extra}})


def _path_id(name: str, description: str) -> list[dict[str, Any]]:
    return [{"name": name, "in": "path", "required": True, "description": description,
             "schema": {"type": "string"}}]


_ROLE = {"type": "object", "properties": {
    "id": {"type": "string"}, "name": {"type": "string"}, "description": {"type": "string"},
    "scopes": _TEXTS}}
_ROLE_BODY = {"type": "object", "properties": {
    "name": {"type": "string"}, "description": {"type": "string"}, "scopes": _TEXTS}}
_PROVIDER = {"type": "object", "description": "A provider as `identityctl idp list --json` "
             "shows it (never its client secret).", "properties": {
                 "id": {"type": "string"}, "handle": {"type": "string"},
                 "name": {"type": "string"}, "kind": {"type": "string"},
                 "issuer": {"type": "string"}, "clientId": {"type": "string"},
                 "scopes": _TEXTS, "mapping": {"type": "object"},
                 "settings": {"type": "object"}, "createdAt": {"type": "number"}}}
_PROVIDER_SETTINGS = {
    "name": {"type": "string"}, "clientId": {"type": "string"},
    "clientSecret": {"type": "string", "description": "Stored, never shown again."},
    "issuer": {"type": "string"}, "tenant": {"type": "string"},
    "webUrl": {"type": "string"}, "apiUrl": {"type": "string"},
    "discoveryUrl": {"type": "string"}, "scopes": _TEXTS,
    "mapping": {"type": "object", "additionalProperties": {"type": "string"}}}
_PROVIDER_ANSWER = json_response("The provider and `callbackUri`, the redirect URI to "
                                 "register at it.", _PROVIDER)
_PROVIDER_REFUSED = error_response("invalid_field (the field is named), unknown_key; "
                                   "federation_failed (an OpenID provider's discovery).")
_SERVER = {"type": "object", "properties": {
    "id": {"type": "string"}, "identifier": {"type": "string"}, "name": {"type": "string"},
    "scopes": _TEXTS}}
_WEBHOOK = {"type": "object", "description": "A subscription (never its secret).",
            "properties": {"id": {"type": "string"}, "url": {"type": "string"},
                           "events": _TEXTS, "description": {"type": "string"},
                           "createdAt": {"type": "number"}}}
_DELIVERY = {"type": "object", "properties": {
    "id": {"type": "string"}, "url": {"type": "string"}, "queuedAt": {"type": "number"},
    "state": {"enum": ["queued", "retrying", "sent", "given up"]},
    "attempts": {"type": "integer"}, "lastError": {"type": "string"}}}
_REFUSED = error_response("missing_field, invalid_field (the field is named), unknown_key.")
_ROLE_ID = _path_id("role_id", "The role's id or name.")
_PROVIDER_ID = _path_id("provider_id", "The provider's id or handle.")
_SERVER_ID = _path_id("server_id", "The resource server's id (or its URL).")
_NO_CONTENT = {"204": {"description": "Removed."}}

OPENAPI_PATHS = {
    f"{API}/roles": {
        "get": operation("Every role by name, with its scopes and how many hold it",
                         "adminRoles", {"200": _catalog("The roles; `members`: how many "
                                                        "people hold each.", _ROLE)}),
        "post": operation("Create a role carrying scopes", "adminRoleCreate",
                          {"201": json_response("Created.", _ROLE), "400": _REFUSED,
                           "409": error_response("role_exists.")},
                          requestBody=json_body({**_ROLE_BODY,
                                                 "required": ["name"]}), step_up=True)},
    API + "/roles/{role_id}": {
        "parameters": _ROLE_ID,
        "patch": operation("Change a role's scopes (the whole list) or description",
                           "adminRoleUpdate", {"200": json_response("Changed.", _ROLE),
                                               "400": _REFUSED,
                                               "404": error_response("role_not_found.")},
                           requestBody=json_body(_ROLE_BODY), step_up=True),
        "delete": operation("Delete a role: its holders lose it (needs a recent sign-in)",
                            "adminRoleDelete", {**_NO_CONTENT,
                                                "404": error_response("role_not_found.")},
                            step_up=True)},
    f"{API}/identity-providers": {
        "get": operation("The upstream identity providers, and the redirect URI to register "
                         "at each", "adminIdentityProviders",
                         {"200": _catalog("The providers; `callbackUri`: the redirect URI.",
                                          _PROVIDER, callbackUri={"type": "string"})}),
        "post": operation(
            "Add an upstream identity provider (oidc, google, microsoft, github); its client "
            "secret is stored and never shown again", "adminIdentityProviderCreate",
            {"201": _PROVIDER_ANSWER, "400": _PROVIDER_REFUSED,
             "409": error_response("provider_exists.")},
            requestBody=json_body({"type": "object", "required": ["kind", "clientId",
                                                                  "clientSecret"],
                                   "properties": {"kind": {"type": "string"},
                                                  "handle": {"type": "string"},
                                                  **_PROVIDER_SETTINGS}}), step_up=True)},
    API + "/identity-providers/{provider_id}": {
        "parameters": _PROVIDER_ID,
        "patch": operation(
            "Change some of a provider's settings; what the body leaves out stays (its secret "
            "too, unless clientSecret gives a new one)", "adminIdentityProviderUpdate",
            {"200": _PROVIDER_ANSWER, "400": _PROVIDER_REFUSED,
             "404": error_response("provider_not_found.")},
            requestBody=json_body({"type": "object",
                                   "properties": _PROVIDER_SETTINGS}), step_up=True),
        "delete": operation("Remove a provider; accounts linked through it are unlinked "
                            "(needs a recent sign-in)", "adminIdentityProviderDelete",
                            {**_NO_CONTENT,
                             "404": error_response("provider_not_found.")},
                            step_up=True)},
    f"{API}/resource-servers": {
        "get": operation("The resource servers identityctl issues tokens for",
                         "adminResourceServers", {"200": _catalog("The servers.", _SERVER)}),
        "post": operation("Register a resource server by its URL (RFC 8707) and scopes",
                          "adminResourceServerCreate",
                          {"201": json_response("Registered.", _SERVER),
                           "400": error_response("missing_field, invalid_field (the field "
                                                 "is named), unknown_key, scope_reserved."),
                           "409": error_response("resource_server_exists.")},
                          requestBody=json_body({"type": "object",
                                                 "required": ["identifier", "scopes"],
                                                 "properties": {
                                                     "identifier": {"type": "string"},
                                                     "name": {"type": "string"},
                                                     "scopes": _TEXTS}}), step_up=True)},
    API + "/resource-servers/{server_id}": {
        "parameters": _SERVER_ID,
        "patch": operation("Replace a resource server's scopes (and name)",
                           "adminResourceServerUpdate",
                           {"200": json_response("Changed.", _SERVER),
                            "400": error_response("missing_field, invalid_field, "
                                                  "unknown_key, scope_reserved."),
                            "404": error_response("resource_server_not_found.")},
                           requestBody=json_body({"type": "object", "required": ["scopes"],
                                                  "properties": {"name": {"type": "string"},
                                                                 "scopes": _TEXTS}}), step_up=True),
        "delete": operation("Stop issuing tokens for a resource server (needs a recent "
                            "sign-in)", "adminResourceServerDelete",
                            {**_NO_CONTENT,
                             "404": error_response("resource_server_not_found.")},
                            step_up=True)},
    f"{API}/webhooks": {
        "get": operation("The webhook subscriptions (never their secrets)", "adminWebhooks",
                         {"200": _catalog("The subscriptions.", _WEBHOOK)}),
        "post": operation(
            "Subscribe an HTTPS endpoint to audit events; its signing secret is in this "
            "answer only", "adminWebhookCreate",
            {"201": json_response("The subscription and `secret` (shown this once).",
                                  _WEBHOOK), "400": _REFUSED},
            requestBody=json_body({"type": "object", "required": ["url", "events"],
                                   "properties": {"url": {"type": "string"},
                                                  "events": _TEXTS,
                                                  "description": {"type": "string"}}}),
            step_up=True)},
    API + "/webhooks/{webhook_id}": {
        "parameters": _path_id("webhook_id", "The subscription's id."),
        "delete": operation("Stop delivering to a subscription (needs a recent sign-in)",
                            "adminWebhookDelete",
                            {**_NO_CONTENT, "404": error_response("webhook_not_found.")},
                            step_up=True)},
    f"{API}/webhook-deliveries": {
        "get": operation(
            "The newest webhook deliveries: sent, queued, retrying (with the last error) or "
            "given up", "adminWebhookDeliveries",
            {"200": json_response("{items}: the newest `limit` deliveries, newest first.", {
                "type": "object", "required": ["items"],
                "properties": {"items": {"type": "array", "items": _DELIVERY}}}),
             "400": error_response("invalid_field (limit).")},
            parameters=[{"name": "limit", "in": "query", "required": False, "schema": {
                "type": "integer", "minimum": console.PAGE_LIMITS[0],
                "maximum": console.PAGE_LIMITS[1], "default": console.DEFAULT_PAGE_LIMIT}}])},
    API + "/webhook-deliveries/{delivery_id}/redeliver": {
        "parameters": _path_id("delivery_id", "The delivery's id."),
        "post": operation(
            "Queue a delivery that was given up once more: the same event to the same "
            "subscription, as a new delivery", "adminWebhookRedeliver",
            {"201": json_response("{id}: the new delivery.", {"type": "object"}),
             "404": error_response("webhook_delivery_not_found, webhook_not_found (its "
                                   "subscription was removed)."),
             "409": error_response("webhook_delivery_not_given_up: it is still being tried, "
                                   "or it was sent.")}, step_up=True)},
}
