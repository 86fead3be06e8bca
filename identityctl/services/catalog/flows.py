"""Flow definitions: validated graphs of sign-in and sign-up steps (docs/flows.md)."""

from __future__ import annotations

from typing import Any

from identityctl.errors import InvalidField, NotFound
from identityctl.flow.definition import FLOW_TYPES, validate_flow
from identityctl.services import audit, shapes
from identityctl.services.origin import RequestOrigin
from identityctl.store import catalog

DEFAULT_AUTH_FLOW = "default-basic-passkey-flow"
DEFAULT_REGISTRATION_FLOW = "default-basic-passkey-flow"


def list_flows(*, flow_type: str | None = None, limit: int | None = 30,
               offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
    """One page of flows, optionally of one type, and how many there are in all."""
    if flow_type is not None and flow_type not in FLOW_TYPES:
        raise InvalidField("flowType", f"must be one of {', '.join(FLOW_TYPES)}")
    return catalog.list_flows(flow_type=flow_type, limit=limit, offset=offset)


def require_flow(id_or_handle: str, flow_type: str | None = None) -> dict[str, Any]:
    """A flow by id, or by handle (with ``flow_type`` when both types share the handle)."""
    for kind in ([flow_type] if flow_type else FLOW_TYPES):
        found = catalog.find_flow_by_handle(id_or_handle, kind)
        if found:
            return found
    try:
        return catalog.get_flow(id_or_handle)
    except NotFound:
        raise NotFound(f"No flow '{id_or_handle}'.", code="flow_not_found") from None


def get_flow(flow_id: str) -> dict[str, Any]:
    """The flow with this id (not a handle), else NotFound."""
    return catalog.get_flow(flow_id)


def require_flow_by_handle(handle: str, flow_type: str) -> dict[str, Any]:
    """The flow of ``flow_type`` with ``handle`` (ids are not tried)."""
    found = catalog.find_flow_by_handle(handle, flow_type)
    if found is None:
        raise NotFound(f"No {flow_type} flow with handle '{handle}'.", code="flow_not_found")
    return found


def create_flow(document: dict[str, Any], *, origin: RequestOrigin) -> dict[str, Any]:
    """Validate a flow definition (see docs/flows.md) and store it."""
    shapes.check(document, shapes.FLOW)
    flow = validate_flow(document)
    created = catalog.create_flow(handle=flow["handle"], name=flow["name"],
                                  flow_type=flow["flowType"], nodes=flow["nodes"])
    audit.record("flow.create", "success", origin=origin, details={"id": created["id"]})
    return created


def update_flow(flow_id: str, *, name: str, nodes: list[dict[str, Any]],
                handle: str | None = None, origin: RequestOrigin) -> dict[str, Any]:
    current = require_flow(flow_id)
    document = {"handle": handle or current["handle"], "name": name,
                "flowType": current["flowType"], "nodes": nodes}
    shapes.check(document, shapes.FLOW)
    flow = validate_flow(document)
    updated = catalog.update_flow(current["id"], handle=flow["handle"], name=flow["name"],
                                  nodes=flow["nodes"])
    audit.record("flow.update", "success", origin=origin, details={"id": current["id"]})
    return updated


def delete_flow(id_or_handle: str, *, flow_type: str | None = None, origin: RequestOrigin) -> None:
    flow_id = require_flow(id_or_handle, flow_type)["id"]
    catalog.delete_flow(flow_id)
    audit.record("flow.delete", "success", origin=origin, details={"id": flow_id})
