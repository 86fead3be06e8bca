"""Themes, flows and applications: the records admins manage (CLI, MCP)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import peewee
from peewee import fn

from identityctl.errors import NotFound
from identityctl.store import crud
from identityctl.store.compiled import CompiledQuery, Row
from identityctl.store.connection import database
from identityctl.store.models import (
    Application,
    AuthorizationCode,
    Flow,
    RefreshToken,
    Theme,
    now,
)

# --- themes -------------------------------------------------------------------------------


def _theme_api(row: Theme) -> dict[str, Any]:
    return {"id": row.id, "handle": row.handle, "displayName": row.display_name,
            "description": row.description, "theme": row.theme or {}}


def themes_page(*, limit: int | None = None, offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
    """Themes by handle, a page of them (all without a limit), and how many in all."""
    total, rows = crud.page(Theme.select().order_by(Theme.handle), limit=limit, offset=offset)
    return total, [_theme_api(row) for row in rows]


def list_themes() -> list[dict[str, Any]]:
    return themes_page()[1]


def find_theme(id_or_handle: str) -> dict[str, Any] | None:
    row = Theme.get_or_none((Theme.id == id_or_handle) | (Theme.handle == id_or_handle))
    return _theme_api(row) if row else None


def create_theme(*, handle: str, display_name: str, description: str,
                 theme: dict[str, Any]) -> dict[str, Any]:
    return _theme_api(crud.insert(Theme, code="theme_exists",
                                  conflict=f"Theme '{handle}' already exists.", handle=handle,
                                  display_name=display_name, description=description,
                                  theme=theme))


def update_theme(theme_id: str, **fields: Any) -> dict[str, Any]:
    crud.update(Theme, theme_id, what="theme", code="theme_not_found",
                conflict="Another theme has that handle.", conflict_code="theme_exists",
                **fields, updated_at=now())
    return find_theme(theme_id)


def delete_theme(theme_id: str) -> None:
    crud.delete(Theme, theme_id, what="theme", code="theme_not_found")


# --- flows ----------------------------------------------------------------------------------


def _flow_api(row: Flow) -> dict[str, Any]:
    return {"id": row.id, "handle": row.handle, "name": row.name, "flowType": row.flow_type,
            "nodes": row.nodes or [], "createdAt": row.created_at, "updatedAt": row.updated_at}


def list_flows(*, flow_type: str | None = None, limit: int | None = 30,
               offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
    """One page of flows (ordered by handle) and the total count matching the filter."""
    query = Flow.select()
    if flow_type:
        query = query.where(Flow.flow_type == flow_type)
    total, rows = crud.page(query.order_by(Flow.handle, Flow.flow_type), limit=limit,
                            offset=offset)
    return total, [_flow_api(row) for row in rows]


_FLOW_BY_ID = CompiledQuery(lambda flow_id: Flow.select().where(Flow.id == flow_id))


def get_flow(flow_id: str) -> dict[str, Any]:
    row = _FLOW_BY_ID.first(Flow, flow_id=flow_id)  # every flow step reads its flow
    if row is None:
        raise NotFound(f"No flow with id '{flow_id}'.", code="flow_not_found")
    return _flow_api(row)


def find_flow_by_handle(handle: str, flow_type: str) -> dict[str, Any] | None:
    row = Flow.get_or_none((Flow.handle == handle) & (Flow.flow_type == flow_type))
    return _flow_api(row) if row else None


def create_flow(*, handle: str, name: str, flow_type: str,
                nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return _flow_api(crud.insert(Flow, code="flow_exists",
                                 conflict=f"A {flow_type} flow with handle '{handle}' exists.",
                                 handle=handle, name=name, flow_type=flow_type, nodes=nodes))


def update_flow(flow_id: str, **fields: Any) -> dict[str, Any]:
    crud.update(Flow, flow_id, what="flow", code="flow_not_found",
                conflict="Another flow of that type has that handle.",
                conflict_code="flow_exists", **fields, updated_at=now())
    return get_flow(flow_id)


def delete_flow(flow_id: str) -> None:
    crud.delete(Flow, flow_id, what="flow", code="flow_not_found")


# --- applications -------------------------------------------------------------------------

_APPLICATION_COLUMNS = {
    "name": "name", "description": "description", "template": "template", "ouId": "ou",
    "authFlowId": "auth_flow", "registrationFlowId": "registration_flow",
    "isRegistrationFlowEnabled": "registration_enabled", "passkeyUpgrade": "passkey_upgrade",
    "themeId": "theme", "allowedUserTypes": "allowed_user_types",
    "passkeysOnly": "passkeys_only", "clientId": "client_id",
    "clientSecretHash": "client_secret_hash", "oauth": "oauth",
}


def _application_api(row: Application | Row) -> dict[str, Any]:
    """The application as the API shows it (camelCase; never the client secret)."""
    return {
        "id": row.id, "name": row.name, "description": row.description,
        "template": row.template, "ouId": row.ou_id, "authFlowId": row.auth_flow_id,
        "registrationFlowId": row.registration_flow_id,
        "isRegistrationFlowEnabled": row.registration_enabled,
        "passkeyUpgrade": bool(row.passkey_upgrade), "themeId": row.theme_id,
        "allowedUserTypes": row.allowed_user_types or [],
        "passkeysOnly": bool(row.passkeys_only),
        "inboundAuthConfig": [{"type": "oauth2",
                               "config": {"clientId": row.client_id, **(row.oauth or {})}}],
        "createdAt": row.created_at, "updatedAt": row.updated_at,
    }


def _columns(fields: dict[str, Any]) -> dict[str, Any]:
    return {_APPLICATION_COLUMNS[key]: value for key, value in fields.items()}


def applications_page(*, limit: int | None = None,
                      offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
    """Applications by name, a page of them (all without a limit), and how many in all."""
    total, rows = crud.page(Application.select().order_by(Application.name, Application.id),
                            limit=limit, offset=offset)
    return total, [_application_api(row) for row in rows]


def applications_after(name: str | None, *, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` applications by name, those after ``name`` (keyset: the unique index
    on the name seeks the page's start)."""
    query = Application.select()
    if name is not None:
        query = query.where(Application.name > name)
    return [_application_api(row) for row in query.order_by(Application.name).limit(limit)]


def list_applications() -> list[dict[str, Any]]:
    return applications_page()[1]


_BY_ID = CompiledQuery(lambda app_id: Application.select().where(Application.id == app_id))
_BY_CLIENT_ID = CompiledQuery(lambda client_id: Application.select().where(
    Application.client_id == client_id))
_BY_CLIENT_ID_OR_ID = CompiledQuery(lambda id_or_client_id: Application.select().where(
    (Application.client_id == id_or_client_id) | (Application.id == id_or_client_id)))


def get_application(app_id: str) -> dict[str, Any]:
    row = _BY_ID.first(Application, app_id=app_id)
    if row is None:
        raise NotFound(f"No application with id '{app_id}'.", code="application_not_found")
    return _application_api(row)


def find_application_by_client_id(client_id: str) -> dict[str, Any] | None:
    row = _BY_CLIENT_ID.first(Application, client_id=client_id)
    return _application_api(row) if row else None


def find_application(id_or_client_id: str) -> dict[str, Any] | None:
    """The application with this client id, else the one with this id (one read: flows
    start with it)."""
    rows = _BY_CLIENT_ID_OR_ID.all(Application, id_or_client_id=id_or_client_id)
    row = next((row for row in rows if row.client_id == id_or_client_id),
               rows[0] if rows else None)
    return _application_api(row) if row else None


@dataclass(slots=True)
class ClientRecord:
    """What a token request needs of its client's application (a hot path: one read of
    six columns, not the whole application)."""

    application_id: str
    #: The application's oauth2 configuration, ``clientId`` included (as in the API).
    config: dict[str, Any]
    secret_hash: str | None
    allowed_user_types: list[str]
    passkeys_only: bool = False


_CLIENT = CompiledQuery(lambda client_id: Application.select(
    Application.id, Application.client_id, Application.client_secret_hash,
    Application.oauth, Application.allowed_user_types, Application.passkeys_only).where(
        Application.client_id == client_id))


def find_oauth_client(client_id: str) -> ClientRecord | None:
    row = _CLIENT.first(Application, client_id=client_id)
    return ClientRecord(application_id=row.id,
                        config={"clientId": row.client_id, **(row.oauth or {})},
                        secret_hash=row.client_secret_hash,
                        allowed_user_types=row.allowed_user_types or [],
                        passkeys_only=bool(row.passkeys_only)) if row else None


#: Its one row's ``version`` rises with every change to an application (migration 21).
_CATALOG_VERSION = peewee.Table("catalog_version", ("id", "version")).bind(database)
_VERSION = CompiledQuery(lambda: _CATALOG_VERSION.select(_CATALOG_VERSION.version))


def catalog_version() -> tuple[object, int]:
    """Which database, and the version of its applications: two reads give the same pair
    only if no application was created, changed or deleted in between, on any instance
    (triggers raise the version in the change's own transaction). A one-row table."""
    return database.obj, _VERSION.scalar()


def client_secret_hash(client_id: str) -> str | None:
    found = find_oauth_client(client_id)
    return found.secret_hash if found else None


def create_application(**fields: Any) -> dict[str, Any]:
    """Insert an application; ``fields`` are named as in the API (see _APPLICATION_COLUMNS)."""
    row = crud.insert(Application, code="application_exists",
                      conflict=f"An application named '{fields.get('name')}' or with that "
                               "client id already exists.", **_columns(fields))
    return _application_api(row)


def update_application(app_id: str, **fields: Any) -> dict[str, Any]:
    crud.update(Application, app_id, what="application", code="application_not_found",
                conflict="Another application has that name or client id.",
                conflict_code="application_exists", **_columns(fields), updated_at=now())
    return get_application(app_id)


def delete_application(app_id: str) -> None:
    crud.delete(Application, app_id, what="application", code="application_not_found")


def last_uses() -> dict[str, float]:
    """When each application was last used: its newest code or refresh token, else its
    creation (one read per table; for the removal of idle self-registered clients)."""
    used = {row_id: created for row_id, created in
            Application.select(Application.id, Application.created_at).tuples()}
    for model in (AuthorizationCode, RefreshToken):
        for app_id, latest in (model.select(model.application, fn.MAX(model.created_at))
                               .group_by(model.application).tuples()):
            if app_id in used and latest is not None:
                used[app_id] = max(used[app_id], latest)
    return used
