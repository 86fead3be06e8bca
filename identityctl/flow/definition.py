"""Flow definitions: the reference system's JSON format, validated on save.

A flow is a directed graph of nodes (START, PROMPT, TASK_EXECUTION, END). Saving rejects,
with a message naming the node, anything the engine could not run to completion: unknown
node types or executors, dangling next-node references, an END that cannot be reached,
cycles that never stop at a PROMPT (they would spin without user input), and passkey
registration that could run before the flow has created or identified the user (spec
prerequisite 5). The format and our extensions are documented in docs/flows.md.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from identityctl.errors import InvalidField

FLOW_TYPES = ("AUTHENTICATION", "REGISTRATION", "RECOVERY")
NODE_TYPES = ("START", "PROMPT", "TASK_EXECUTION", "END")
INPUT_TYPES = ("TEXT_INPUT", "PASSWORD_INPUT", "EMAIL_INPUT", "OTP_INPUT", "HIDDEN")

#: Executor name -> allowed modes (empty tuple: the executor takes no mode).
EXECUTORS: dict[str, tuple[str, ...]] = {
    "BasicAuthExecutor": (),
    "IdentifyingExecutor": (),
    #: ``upgrade``: after a sign-in without a passkey, the page is asked to make one
    #: (Conditional Create, else a visible step: ``passkey_upgrade``, onIncomplete: that
    #: PROMPT); ``upgrade_finish`` stores it. Never a reason for the sign-in to fail.
    "PasskeyAuthExecutor": ("challenge", "verify", "register_start", "register_finish",
                            "upgrade", "upgrade_finish"),
    "AttributeCollector": (),
    "ProvisioningExecutor": (),
    "AuthorizationExecutor": (),
    "AuthAssertExecutor": (),
    #: Marks where the flow accepts the browser's existing sign-in (single sign-on); its
    #: optional property ``maxAge`` bounds the sign-in's age. A flow without it always asks.
    "SSOCheckExecutor": (),
    #: Sends a one-time code by e-mail: to a new account's address (``verify``), or to the
    #: verified address of the account a person names (``recovery``).
    "EmailExecutor": ("verify", "recovery"),
    #: Checks the code EmailExecutor sent to this execution (input ``otp``).
    "OTPExecutor": (),
    #: After a password: the code of the person's authenticator app (input ``totpCode``), or
    #: one of their recovery codes (``recoveryCode``); a person without an app goes on, and
    #: without either input the step is incomplete with no reason (onIncomplete: its PROMPT).
    "TOTPExecutor": ("verify",),
    #: One of the named account's recovery codes (inputs ``username``, ``recoveryCode``).
    "RecoveryCodeExecutor": (),
    #: Sets the identified person's new password (input ``password``).
    "CredentialSetter": (),
    #: Sign-in through an upstream identity provider (property or input ``idpId``): a
    #: REDIRECTION step, then the provider's answer (inputs ``code``, ``state``).
    "OIDCAuthExecutor": (),
    "GoogleOIDCAuthExecutor": (),
    "GithubOAuthExecutor": (),
    #: An upstream account that waited for its owner (``federated_link_required``): after
    #: the person signed in, the default mode asks them (``federated_link_confirm``, with
    #: both accounts named in ``additionalData.federatedLink``; onIncomplete: that PROMPT);
    #: ``confirm`` links it. Never linked as a side effect of a sign-in.
    "FederatedAuthResolverExecutor": ("", "confirm"),
}
#: Executors (name, mode) after which the flow knows who the user is.
USER_ESTABLISHING = {("BasicAuthExecutor", ""), ("IdentifyingExecutor", ""),
                     ("PasskeyAuthExecutor", "verify"), ("ProvisioningExecutor", ""),
                     ("OTPExecutor", ""), ("RecoveryCodeExecutor", ""),
                     ("OIDCAuthExecutor", ""), ("GoogleOIDCAuthExecutor", ""),
                     ("GithubOAuthExecutor", "")}
PASSKEY_MODES_NEEDING_RP = ("challenge", "register_start", "upgrade")
#: Passkey modes that create a passkey for the user the flow knows.
PASSKEY_REGISTRATION_MODES = (("PasskeyAuthExecutor", "register_start"),
                              ("PasskeyAuthExecutor", "upgrade"))
_HANDLE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_NEXT_KEYS = ("onSuccess", "onIncomplete", "onFailure")


def _fail(where: str, problem: str) -> InvalidField:
    return InvalidField(where, problem, code="invalid_flow")


def executor_of(node: dict[str, Any]) -> tuple[str, str]:
    executor = node.get("executor") or {}
    return executor.get("name", ""), executor.get("mode", "") or ""


def successors(node: dict[str, Any]) -> list[str]:
    """Every node id this node can hand over to."""
    nexts = [node[key] for key in _NEXT_KEYS if node.get(key)]
    nexts += [prompt["action"]["nextNode"] for prompt in node.get("prompts", [])]
    return nexts


@dataclass(frozen=True, slots=True)
class SessionCheck:
    """Where a flow accepts an existing browser session, and how old its sign-in may be."""

    max_age: int | None


def session_check(nodes: list[dict[str, Any]]) -> SessionCheck | None:
    """The flow's ``SSOCheckExecutor`` (the reference system's name), or None: a flow
    without one signs the person in every time (a fresh passkey for this application)."""
    for node in nodes:
        if executor_of(node) == ("SSOCheckExecutor", ""):
            properties = (node.get("executor") or {}).get("properties") or {}
            return SessionCheck(max_age=properties.get("maxAge"))
    return None


def _check_node(node: Any, index: int) -> str:
    if not isinstance(node, dict):
        raise _fail(f"nodes[{index}]", "must be an object")
    node_id = node.get("id")
    if not isinstance(node_id, str) or not node_id:
        raise _fail(f"nodes[{index}].id", "is required")
    where = f"node '{node_id}'"
    kind = node.get("type")
    if kind not in NODE_TYPES:
        raise _fail(where, f"type {kind!r} is not one of {', '.join(NODE_TYPES)}")
    for key in _NEXT_KEYS:
        if key in node and not isinstance(node[key], str):
            raise _fail(where, f"{key} must be a node id")
    if kind == "PROMPT":
        prompts = node.get("prompts")
        if not isinstance(prompts, list) or not prompts:
            raise _fail(where, "a PROMPT needs at least one entry in 'prompts'")
        refs = set()
        for p_index, prompt in enumerate(prompts):
            action = prompt.get("action") if isinstance(prompt, dict) else None
            if not isinstance(action, dict) or not action.get("ref") or not action.get("nextNode"):
                raise _fail(f"{where} prompts[{p_index}]", "needs action {ref, nextNode}")
            if action["ref"] in refs:
                raise _fail(where, f"action ref {action['ref']!r} is used twice")
            refs.add(action["ref"])
            for i_index, item in enumerate(prompt.get("inputs", [])):
                if not isinstance(item, dict) or not item.get("identifier"):
                    raise _fail(f"{where} prompts[{p_index}].inputs[{i_index}]",
                                "needs an identifier")
                if item.get("type", "TEXT_INPUT") not in INPUT_TYPES:
                    raise _fail(f"{where} input {item['identifier']!r}",
                                f"type must be one of {', '.join(INPUT_TYPES)}")
    elif kind == "TASK_EXECUTION":
        name, mode = executor_of(node)
        if name not in EXECUTORS:
            raise _fail(where, f"unknown executor {name!r} (known: {', '.join(EXECUTORS)})")
        if EXECUTORS[name] and mode not in EXECUTORS[name]:
            raise _fail(where, f"executor {name} needs mode one of "
                        f"{', '.join(mode or '(none)' for mode in EXECUTORS[name])}")
        properties = (node.get("executor") or {}).get("properties") or {}
        if name == "PasskeyAuthExecutor" and mode in PASSKEY_MODES_NEEDING_RP \
                and not properties.get("relyingPartyId"):
            raise _fail(where, f"executor {name} (mode {mode}) needs property relyingPartyId")
        max_age = properties.get("maxAge")
        if name == "SSOCheckExecutor" and max_age is not None and (
                not isinstance(max_age, int) or isinstance(max_age, bool) or max_age < 0):
            raise _fail(where, "property maxAge must be a number of seconds (0 or more)")
        if not node.get("onSuccess"):
            raise _fail(where, "a TASK_EXECUTION needs onSuccess")
    elif kind == "START" and not node.get("onSuccess"):
        raise _fail(where, "the START node needs onSuccess")
    return node_id


def _reachable(nodes: dict[str, dict[str, Any]], start: str,
               blocked: set[str] = frozenset()) -> set[str]:
    seen, stack = set(), [start]
    while stack:
        node_id = stack.pop()
        if node_id in seen or node_id in blocked:
            continue
        seen.add(node_id)
        stack.extend(successors(nodes[node_id]))
    return seen


def _find_silent_cycle(nodes: dict[str, dict[str, Any]]) -> str | None:
    """A node on a cycle that passes no PROMPT (the engine would loop without input)."""
    silent = {node_id for node_id, node in nodes.items() if node["type"] != "PROMPT"}
    state: dict[str, int] = {}

    def visit(node_id: str) -> str | None:
        state[node_id] = 1
        for nxt in successors(nodes[node_id]):
            if nxt not in silent:
                continue
            if state.get(nxt) == 1:
                return nxt
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node_id] = 2
        return None

    for node_id in sorted(silent):
        if node_id not in state and (found := visit(node_id)):
            return found
    return None


def validate_flow(document: Any) -> dict[str, Any]:
    """Check a flow document and return its normalised copy; raise naming what is wrong."""
    if not isinstance(document, dict):
        raise InvalidField("flow", "must be a JSON object", code="invalid_flow")
    flow = copy.deepcopy(document)
    handle, name, flow_type = flow.get("handle"), flow.get("name"), flow.get("flowType")
    if not isinstance(handle, str) or not _HANDLE.match(handle):
        raise _fail("handle", "use 1-64 lowercase letters, digits, '-' or '_'")
    if not isinstance(name, str) or not name.strip():
        raise _fail("name", "is required")
    if flow_type not in FLOW_TYPES:
        raise _fail("flowType", f"must be one of {', '.join(FLOW_TYPES)}")
    raw_nodes = flow.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise _fail("nodes", "must be a non-empty array")
    nodes: dict[str, dict[str, Any]] = {}
    for index, node in enumerate(raw_nodes):
        node_id = _check_node(node, index)
        if node_id in nodes:
            raise _fail(f"node '{node_id}'", "id is used twice")
        nodes[node_id] = node
    starts = [n for n in nodes.values() if n["type"] == "START"]
    ends = [n for n in nodes.values() if n["type"] == "END"]
    if len(starts) != 1:
        raise _fail("nodes", f"a flow needs exactly one START node, found {len(starts)}")
    if not ends:
        raise _fail("nodes", "a flow needs an END node")
    for node in nodes.values():
        for nxt in successors(node):
            if nxt not in nodes:
                raise _fail(f"node '{node['id']}'", f"points to unknown node '{nxt}'")
    start = starts[0]["id"]
    reachable = _reachable(nodes, start)
    if not any(end["id"] in reachable for end in ends):
        raise _fail("nodes", f"no END node is reachable from START '{start}'")
    if (looping := _find_silent_cycle(nodes)) is not None:
        raise _fail(f"node '{looping}'", "is on a cycle without a PROMPT; it would loop "
                    "forever without user input")
    _check_user_before_registration(nodes, start)
    return {"handle": handle, "name": name.strip(), "flowType": flow_type, "nodes": raw_nodes}


def _check_user_before_registration(nodes: dict[str, dict[str, Any]], start: str) -> None:
    """Spec prerequisite 5: passkey registration only once the flow knows the user."""
    establishing = {node_id for node_id, node in nodes.items()
                    if node["type"] == "TASK_EXECUTION" and executor_of(node) in USER_ESTABLISHING}
    for node_id in _reachable(nodes, start, blocked=establishing):
        if executor_of(nodes[node_id]) in PASSKEY_REGISTRATION_MODES:
            raise _fail(f"node '{node_id}'", "passkey registration can run before the flow "
                        "has created or identified the user; put a ProvisioningExecutor, "
                        "BasicAuthExecutor or IdentifyingExecutor step before it")
