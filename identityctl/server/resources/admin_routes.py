"""Every route of the admin API (``/admin/api/v1``), in one place, and their OpenAPI
description (each resource module keeps its own; the served document takes them from
here)."""

from __future__ import annotations

import falcon

from identityctl.server.resources import admin, admin_changes, admin_records, admin_users
from identityctl.server.resources.admin import API
from identityctl.services.context import ServiceContext

OPENAPI_PATHS = {**admin.OPENAPI_PATHS, **admin_users.OPENAPI_PATHS,
                 **admin_records.OPENAPI_PATHS, **admin_changes.OPENAPI_PATHS}


def add_admin_routes(app: falcon.App, context: ServiceContext) -> None:
    app.add_route(f"{API}/me", admin.MeResource(context))
    app.add_route(f"{API}/users", admin_users.UsersResource(context))
    app.add_route(API + "/users/{user_id}", admin_users.UserResource(context))
    app.add_route(API + "/users/{user_id}/invite", admin_users.InviteResource(context))
    app.add_route(API + "/users/{user_id}/sessions", admin_users.SessionsResource(context))
    app.add_route(API + "/users/{user_id}/sessions/{session_id}",
                  admin_users.SessionResource(context))
    app.add_route(API + "/users/{user_id}/passkeys", admin_users.PasskeysResource(context))
    app.add_route(f"{API}/applications", admin_records.ApplicationsResource(context))
    app.add_route(API + "/applications/{app_id}", admin_records.ApplicationResource(context))
    app.add_route(API + "/applications/{app_id}/secret",
                  admin_records.ApplicationSecretResource(context))
    app.add_route(f"{API}/audit", admin_records.AuditResource(context))
    app.add_route(f"{API}/audit/export", admin_records.AuditExportResource(context))
    app.add_route(f"{API}/operations", admin_records.OperationsResource(context))
    app.add_route(f"{API}/configuration", admin_records.ConfigurationResource(context))
    app.add_route(f"{API}/configuration/plan", admin_records.ConfigurationPlanResource(context))
    app.add_route(f"{API}/configuration/apply",
                  admin_records.ConfigurationApplyResource(context))
    app.add_route(f"{API}/changes", admin_changes.ChangesResource(context))
    app.add_route(API + "/changes/{change_id}", admin_changes.ChangeResource(context))
    app.add_route(API + "/changes/{change_id}/approval", admin_changes.ApprovalResource(context))
    app.add_route(API + "/changes/{change_id}/approve", admin_changes.ApproveResource(context))
    app.add_route(API + "/changes/{change_id}/reject", admin_changes.RejectResource(context))
