"""What the admin console shows of the deployment's design: themes (with a preview of the
hosted sign-in page in a theme not yet saved) and flows (drawn as a graph).

Every change goes through the functions the CLI, the MCP tools and configuration as code
call (catalog/themes, catalog/flows), with the caller's actor in their audit events. A
preview is checked by the very ``validate_theme`` a save runs and drawn from the stylesheet
``/gate/theme.css`` would serve, so the console never shows a theme the hosted page would
not. A refused theme or flow says
in its message, in a sentence, which colour, setting or node to fix (the field path stays in
the description, for programs).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from identityctl.errors import InvalidField
from identityctl.flow.definition import executor_of, successors
from identityctl.services import shapes
from identityctl.services.admin.console import AdminHolder
from identityctl.services.catalog import flows, themes
from identityctl.theme import stylesheet
from identityctl.theme.branding import page_branding

#: A refused field's path -> the words that name it (``{0}``, ``{1}``: the path's parts).
_SUBJECTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^node '([^']*)'"), "The node '{0}'"),
    (re.compile(r"^theme\.colorSchemes\.(\w+)\.(\w+)$"), "The {0} colour '{1}'"),
    (re.compile(r"^theme\.typography\.(\w+)$"), "The type setting '{0}'"),
    (re.compile(r"^theme\.branding\.(\w+)$"), "The branding's '{0}'"),
    (re.compile(r"^(handle|name|flowType|displayName)$"), "The {0}"),
    (re.compile(r"^theme"), "The theme"),
)


_NODE_AT = re.compile(r"^nodes\[(\d+)\]")


@contextmanager
def _in_plain_words(nodes: Any = None) -> Iterator[None]:
    """A refused field's message as a sentence naming what to fix ("The node 'otp': points
    to unknown node 'done'."): people read the message; the description keeps the path. A
    path into ``nodes`` by position (an unknown key) names the node by its id."""
    try:
        yield
    except InvalidField as refusal:
        problem = refusal.description.removeprefix(f"Field '{refusal.field}': ")
        field = refusal.field
        if (at := _NODE_AT.match(field)) and isinstance(nodes, list) \
                and int(at[1]) < len(nodes) and isinstance(nodes[int(at[1])], dict):
            field = f"node '{nodes[int(at[1])].get('id')}'"
        subject = next((words.format(*found.groups()) for pattern, words in _SUBJECTS
                        if (found := pattern.match(field))), "The flow")
        refusal.message = f"{subject}: {problem.rstrip('.')}."
        raise


def _text(body: dict[str, Any], field: str, *, required: bool = True) -> str:
    value = body.get(field, None if required else "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise InvalidField(field, "must be text" + (" (not empty)" if required else ""))
    return value


# --- themes ---------------------------------------------------------------------------------

#: A theme body's fields -> the catalog service's keyword.
_THEME_FIELDS = {"handle": "handle", "displayName": "display_name",
                 "description": "description", "theme": "theme"}


def _theme_fields(body: dict[str, Any], *, required: tuple[str, ...]) -> dict[str, Any]:
    """The catalog service's keywords from a theme body (its keys checked; ``theme``
    checked by the service)."""
    shapes.check(body, shapes.THEME)
    fields = {}
    for key, keyword in _THEME_FIELDS.items():
        if key == "theme":
            if key in body:
                fields[keyword] = body[key]
        elif key in body or key in required:
            fields[keyword] = _text(body, key, required=key != "description")
    return fields


def create_theme(holder: AdminHolder, body: dict[str, Any]) -> dict[str, Any]:
    """A new theme: ``{handle, displayName, description?, theme?}``."""
    fields = _theme_fields(body, required=("handle", "displayName"))
    with _in_plain_words():
        return themes.create_theme(**fields, origin=holder.origin)


def update_theme(holder: AdminHolder, theme_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """Change some of a theme's fields; ``theme``, when given, replaces the whole document."""
    fields = _theme_fields(body, required=())
    with _in_plain_words():
        return themes.update_theme(theme_id, **fields, origin=holder.origin)


def delete_theme(holder: AdminHolder, theme_id: str) -> None:
    themes.delete_theme(theme_id, origin=holder.origin)


def theme_preview(theme: Any) -> dict[str, Any]:
    """What the hosted sign-in page would show in ``theme`` (saved or not): the stylesheet
    ``/gate/theme.css`` would serve for it and the branding the page would show; a value a
    save would refuse is refused here the same way."""
    with _in_plain_words():
        validated = themes.validate_theme(theme)
    return {"stylesheet": stylesheet.stylesheet(validated),
            "branding": page_branding(validated)}


# --- flows ----------------------------------------------------------------------------------


def flows_of(flow_type: str | None) -> list[dict[str, Any]]:
    """Every flow (of ``flow_type``), by handle: a small catalog, answered whole."""
    return flows.list_flows(flow_type=flow_type or None, limit=None)[1]


def with_graph(flow: dict[str, Any]) -> dict[str, Any]:
    return {**flow, "graph": flow_graph(flow["nodes"])}


def flow_with_graph(flow_id: str) -> dict[str, Any]:
    return with_graph(flows.require_flow(flow_id))


def create_flow(holder: AdminHolder, document: dict[str, Any]) -> dict[str, Any]:
    """A new flow from its JSON document (docs/flows.md)."""
    with _in_plain_words(document.get("nodes")):
        return with_graph(flows.create_flow(document, origin=holder.origin))


def update_flow(holder: AdminHolder, flow_id: str, document: dict[str, Any]) -> dict[str, Any]:
    """Replace a flow's name, handle and nodes with the document's; its type stays (a flow
    of another type is another flow)."""
    current = flows.require_flow(flow_id)
    if document.get("flowType", current["flowType"]) != current["flowType"]:
        raise InvalidField("flowType", f"stays {current['flowType']}; create a new flow for "
                           "another type")
    with _in_plain_words(document.get("nodes")):
        shapes.check(document, shapes.FLOW)
        return with_graph(flows.update_flow(
            current["id"], name=_text(document, "name"), nodes=document.get("nodes"),
            handle=document.get("handle"), origin=holder.origin))


def delete_flow(holder: AdminHolder, flow_id: str) -> None:
    flows.delete_flow(flow_id, origin=holder.origin)


#: The keys of a node that lead to another, in the order the graph lists its edges.
_EDGE_KEYS = ("onSuccess", "onIncomplete", "onFailure")


def _edges(node: dict[str, Any]) -> Iterator[dict[str, str]]:
    for key in _EDGE_KEYS:
        if isinstance(node.get(key), str):
            yield {"from": node["id"], "to": node[key], "kind": key}
    for prompt in node.get("prompts") or []:
        action = prompt.get("action") or {}
        yield {"from": node["id"], "to": action.get("nextNode", ""), "kind": "action",
               "label": action.get("ref", "")}


def flow_graph(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """A flow's nodes in layers and its edges, for drawing: a node's ``layer`` is the
    longest path to it from the START node over the edges that do not go back (an
    ``onIncomplete`` to its prompt closes a loop; it is drawn, not counted); ``row`` its
    place within the layer. A node START does not reach is laid out as if it started."""
    known = {node["id"]: node for node in nodes}
    ordered = sorted(nodes, key=lambda node: node.get("type") != "START")
    forward: dict[str, list[str]] = {node_id: [] for node_id in known}
    state: dict[str, int] = {}

    def visit(node_id: str) -> None:  # depth first: an edge to a node on the path goes back
        state[node_id] = 1
        for nxt in successors(known[node_id]):
            if nxt in known and state.get(nxt) != 1:
                forward[node_id].append(nxt)
                if nxt not in state:
                    visit(nxt)
        state[node_id] = 2

    finished: list[str] = []
    for node in ordered:
        if node["id"] not in state:
            visit(node["id"])
    # Longest path over the forward edges, in topological order.
    indegree = {node_id: 0 for node_id in known}
    for targets in forward.values():
        for target in targets:
            indegree[target] += 1
    ready = [node["id"] for node in ordered if indegree[node["id"]] == 0]
    layer = dict.fromkeys(known, 0)
    while ready:
        node_id = ready.pop(0)
        finished.append(node_id)
        for target in forward[node_id]:
            layer[target] = max(layer[target], layer[node_id] + 1)
            indegree[target] -= 1
            if indegree[target] == 0:
                ready.append(target)
    rows: dict[int, int] = {}
    drawn = []
    for node_id in finished:
        node = known[node_id]
        row = rows[layer[node_id]] = rows.get(layer[node_id], -1) + 1
        name, mode = executor_of(node)
        drawn.append({"id": node_id, "type": node.get("type"),
                      "executor": f"{name} ({mode})" if mode else name,
                      "layer": layer[node_id], "row": row})
    edges = [edge for node in nodes for edge in _edges(node) if edge["to"] in known]
    return {"nodes": drawn, "edges": edges}
