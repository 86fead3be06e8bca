"""Every route of the admin API (``/admin/api/v1``), in one place, and their OpenAPI
description (each resource module keeps its own; the served document takes them from
here)."""

from __future__ import annotations

import falcon

from identityctl.server.resources import (
    admin,
    admin_changes,
    admin_design,
    admin_integrations,
    admin_records,
    admin_users,
)
from identityctl.server.resources.admin import API
from identityctl.services.context import ServiceContext

OPENAPI_PATHS = {**admin.OPENAPI_PATHS, **admin_users.OPENAPI_PATHS,
                 **admin_records.OPENAPI_PATHS, **admin_changes.OPENAPI_PATHS,
                 **admin_integrations.OPENAPI_PATHS,
                 **admin_design.OPENAPI_PATHS}


def add_admin_routes(app: falcon.App, context: ServiceContext) -> None:
    app.add_route(f"{API}/me", admin.MeResource(context))
    app.add_route(f"{API}/users", admin_users.UsersResource(context))
    app.add_route(API + "/users/{user_id}", admin_users.UserResource(context))
    app.add_route(API + "/users/{user_id}/invite", admin_users.InviteResource(context))
    app.add_route(API + "/users/{user_id}/sessions", admin_users.SessionsResource(context))
    app.add_route(API + "/users/{user_id}/sessions/{session_id}",
                  admin_users.SessionResource(context))
    app.add_route(API + "/users/{user_id}/passkeys", admin_users.PasskeysResource(context))
    app.add_route(API + "/users/{user_id}/roles/{role}", admin_users.RoleResource(context))
    app.add_route(f"{API}/directory", admin_users.DirectoryResource(context))
    app.add_route(f"{API}/applications", admin_records.ApplicationsResource(context))
    app.add_route(API + "/applications/{app_id}", admin_records.ApplicationResource(context))
    app.add_route(API + "/applications/{app_id}/secret",
                  admin_records.ApplicationSecretResource(context))
    app.add_route(f"{API}/roles", admin_integrations.RolesResource(context))
    app.add_route(API + "/roles/{role_id}", admin_integrations.RoleResource(context))
    app.add_route(f"{API}/identity-providers", admin_integrations.ProvidersResource(context))
    app.add_route(API + "/identity-providers/{provider_id}",
                  admin_integrations.ProviderResource(context))
    app.add_route(f"{API}/resource-servers",
                  admin_integrations.ResourceServersResource(context))
    app.add_route(API + "/resource-servers/{server_id}",
                  admin_integrations.ResourceServerResource(context))
    app.add_route(f"{API}/webhooks", admin_integrations.WebhooksResource(context))
    app.add_route(API + "/webhooks/{webhook_id}", admin_integrations.WebhookResource(context))
    app.add_route(f"{API}/webhook-deliveries", admin_integrations.DeliveriesResource(context))
    app.add_route(API + "/webhook-deliveries/{delivery_id}/redeliver",
                  admin_integrations.RedeliverResource(context))
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
    app.add_route(f"{API}/themes", admin_design.ThemesResource(context))
    app.add_route(API + "/themes/{theme_id}", admin_design.ThemeResource(context))
    app.add_route(f"{API}/theme-preview", admin_design.ThemePreviewResource(context))
    app.add_route(f"{API}/flows", admin_design.FlowsResource(context))
    app.add_route(API + "/flows/{flow_id}", admin_design.FlowResource(context))
