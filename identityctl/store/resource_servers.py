"""Resource servers: the APIs (RFC 8707 resource identifiers) tokens may be issued for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from identityctl.store import crud
from identityctl.store.models import ResourceServer


@dataclass(frozen=True, slots=True)
class ResourceServerRecord:
    id: str
    identifier: str
    name: str
    scopes: list[str]

    def to_api(self) -> dict[str, Any]:
        return {"id": self.id, "identifier": self.identifier, "name": self.name,
                "scopes": self.scopes}


def _record(row: ResourceServer) -> ResourceServerRecord:
    return ResourceServerRecord(id=row.id, identifier=row.identifier, name=row.name,
                                scopes=list(row.scopes or []))


def list_resource_servers() -> list[ResourceServerRecord]:
    return [_record(row) for row in ResourceServer.select().order_by(ResourceServer.identifier)]


def find_resource_servers(identifiers: list[str]) -> list[ResourceServerRecord]:
    """Those of ``identifiers`` that are registered (one read)."""
    return [_record(row) for row in ResourceServer.select().where(
        ResourceServer.identifier.in_(identifiers))]


def find_resource_server(id_or_identifier: str) -> ResourceServerRecord | None:
    row = ResourceServer.get_or_none((ResourceServer.id == id_or_identifier)
                                     | (ResourceServer.identifier == id_or_identifier))
    return _record(row) if row else None


def create_resource_server(*, identifier: str, name: str,
                           scopes: list[str]) -> ResourceServerRecord:
    return _record(crud.insert(ResourceServer, code="resource_server_exists",
                               conflict=f"A resource server {identifier} is registered "
                               "already.", identifier=identifier, name=name, scopes=scopes))


def update_resource_server(server_id: str, *, name: str, scopes: list[str]) -> None:
    crud.update(ResourceServer, server_id, what="resource server",
                code="resource_server_not_found", name=name, scopes=scopes)


def delete_resource_server(server_id: str) -> None:
    crud.delete(ResourceServer, server_id, what="resource server",
                code="resource_server_not_found")


def all_scopes() -> set[str]:
    """Every scope some resource server defines."""
    return {scope for row in ResourceServer.select(ResourceServer.scopes)
            for scope in (row.scopes or [])}
