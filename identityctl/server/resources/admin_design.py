"""The admin API's design: themes (and a preview of the hosted sign-in page in a theme not
yet saved) and flows (with their graph), through services/admin/design.py."""

from __future__ import annotations

import falcon

from identityctl.server.openapi import error_response, json_body, json_response
from identityctl.server.requests import json_object
from identityctl.server.resources.admin import API, AdminResource, operation
from identityctl.services.admin import design
from identityctl.services.catalog import themes


class ThemesResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        resp.media = {"items": themes.list_themes(), "next": None}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = design.create_theme(self.holder(req, resp), json_object(req))
        resp.status = falcon.HTTP_201


class ThemeResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, theme_id: str) -> None:
        self.holder(req, resp)
        resp.media = themes.require_theme(theme_id)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, theme_id: str) -> None:
        resp.media = design.update_theme(self.holder(req, resp), theme_id, json_object(req))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, theme_id: str) -> None:
        design.delete_theme(self.holder(req, resp), theme_id)
        resp.status = falcon.HTTP_204


class ThemePreviewResource(AdminResource):
    changes_nothing = True  # a stylesheet computed
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        resp.media = design.theme_preview(json_object(req))


class FlowsResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.holder(req, resp)
        resp.media = {"items": design.flows_of(req.get_param("flowType")), "next": None}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = design.create_flow(self.holder(req, resp), json_object(req))
        resp.status = falcon.HTTP_201


class FlowResource(AdminResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response, flow_id: str) -> None:
        self.holder(req, resp)
        resp.media = design.flow_with_graph(flow_id)

    def on_put(self, req: falcon.Request, resp: falcon.Response, flow_id: str) -> None:
        resp.media = design.update_flow(self.holder(req, resp), flow_id, json_object(req))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, flow_id: str) -> None:
        design.delete_flow(self.holder(req, resp), flow_id)
        resp.status = falcon.HTTP_204


# --- OpenAPI --------------------------------------------------------------------------------

_THEME = {"type": "object", "description": "{id, handle, displayName, description, theme: "
          "{colorSchemes: {light: {primary, ...}, dark: {...}}, typography: {...}, "
          "branding: {...}}, createdAt, updatedAt} (docs/hosted-ui.md)."}
_THEME_ID = [{"name": "theme_id", "in": "path", "required": True,
              "description": "The theme's id or handle.", "schema": {"type": "string"}}]
_REFUSED_THEME = error_response("invalid_field (the message names the colour or setting), "
                                "unknown_key.")
_FLOW = {"type": "object", "description": "{id, handle, name, flowType, nodes, createdAt, "
         "updatedAt, graph: {nodes: [{id, type, executor, layer, row}], edges: [{from, to, "
         "kind (onSuccess, onIncomplete, onFailure, action), label?}]}} (docs/flows.md)."}
_FLOW_ID = [{"name": "flow_id", "in": "path", "required": True,
             "description": "The flow's id or handle.", "schema": {"type": "string"}}]
_DOCUMENT = {"type": "object", "required": ["handle", "name", "flowType", "nodes"],
             "description": "A flow document {handle, name, flowType, nodes} (docs/flows.md)."}
_REFUSED_FLOW = error_response("invalid_flow (the message names the node in a sentence; the "
                               "description keeps the field path), unknown_key.")
_NOT_FOUND_THEME = error_response("theme_not_found.")
_NOT_FOUND_FLOW = error_response("flow_not_found.")

OPENAPI_PATHS = {
    f"{API}/themes": {
        "get": operation("Every theme (a small catalog, answered whole)", "adminThemes",
                         {"200": json_response("{items, next: null}", {"type": "object"})}),
        "post": operation("Create a theme", "adminThemeCreate",
                          {"201": json_response("Created.", _THEME), "400": _REFUSED_THEME,
                           "409": error_response("theme_exists.")},
                          requestBody=json_body({"type": "object",
                                                 "required": ["handle", "displayName"],
                                                 "description": "{handle, displayName, "
                                                 "description?, theme?}"}), step_up=True)},
    API + "/themes/{theme_id}": {
        "parameters": _THEME_ID,
        "get": operation("A theme", "adminTheme", {"200": json_response("The theme.", _THEME),
                                                   "404": _NOT_FOUND_THEME}),
        "patch": operation("Change some of a theme's fields (theme: the whole document)",
                           "adminThemeUpdate", {"200": json_response("Changed.", _THEME),
                                                "400": _REFUSED_THEME,
                                                "404": _NOT_FOUND_THEME},
                           requestBody=json_body({"type": "object"}), step_up=True),
        "delete": operation("Delete a theme (needs a recent sign-in)", "adminThemeDelete",
                            {"204": {"description": "Deleted."}, "404": _NOT_FOUND_THEME},
                            step_up=True)},
    f"{API}/theme-preview": {
        "post": operation(
            "The hosted sign-in page's look in a theme document not yet saved: checked as a "
            "save checks it", "adminThemePreview",
            {"200": json_response("{stylesheet: the CSS /gate/theme.css would serve, "
                                  "branding: {productName?, logo?, termsUrl?, privacyUrl?}}",
                                  {"type": "object"}),
             "400": _REFUSED_THEME},
            requestBody=json_body({"type": "object", "description": "A theme document "
                                   "{colorSchemes, typography, branding}."}))},
    f"{API}/flows": {
        "get": operation("Every flow, by handle (a small catalog, answered whole)",
                         "adminFlows", {"200": json_response("{items, next: null}",
                                                             {"type": "object"}),
                                        "400": error_response("invalid_field (flowType).")},
                         parameters=[{"name": "flowType", "in": "query", "required": False,
                                      "schema": {"type": "string"},
                                      "description": "Only flows of this type "
                                                     "(AUTHENTICATION, REGISTRATION, "
                                                     "RECOVERY)."}]),
        "post": operation("Create a flow from its JSON document", "adminFlowCreate",
                          {"201": json_response("Created, with its graph.", _FLOW),
                           "400": _REFUSED_FLOW, "409": error_response("flow_exists.")},
                          requestBody=json_body(_DOCUMENT), step_up=True)},
    API + "/flows/{flow_id}": {
        "parameters": _FLOW_ID,
        "get": operation("A flow and its graph (nodes in layers, edges)", "adminFlow",
                         {"200": json_response("The flow.", _FLOW), "404": _NOT_FOUND_FLOW}),
        "put": operation("Replace a flow's handle, name and nodes (its type stays)",
                         "adminFlowUpdate", {"200": json_response("Saved, with its graph.",
                                                                  _FLOW),
                                             "400": _REFUSED_FLOW, "404": _NOT_FOUND_FLOW},
                         requestBody=json_body(_DOCUMENT), step_up=True),
        "delete": operation("Delete a flow (needs a recent sign-in)", "adminFlowDelete",
                            {"204": {"description": "Deleted."}, "404": _NOT_FOUND_FLOW},
                            step_up=True)},
}
