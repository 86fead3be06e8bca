"""Saving a flow validates it: each rejection names the node at fault."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from identityctl.errors import InvalidField
from identityctl.flow.definition import validate_flow
from identityctl.services.admin.bootstrap import default_flow_documents

PASSKEY_RP = {"relyingPartyId": "localhost"}


def flow(*nodes: dict[str, Any], flow_type: str = "AUTHENTICATION") -> dict[str, Any]:
    return {"handle": "test-flow", "name": "Test", "flowType": flow_type, "nodes": list(nodes)}


def task(node_id: str, name: str, on_success: str, mode: str = "", **extra: Any) -> dict:
    executor: dict[str, Any] = {"name": name}
    if mode:
        executor.update(mode=mode, properties=PASSKEY_RP)
    return {"id": node_id, "type": "TASK_EXECUTION", "executor": executor,
            "onSuccess": on_success, **extra}


START = {"id": "start", "type": "START", "onSuccess": "ask"}
END = {"id": "end", "type": "END"}
ASK = {"id": "ask", "type": "PROMPT", "prompts": [{
    "inputs": [{"ref": "u", "identifier": "username", "type": "TEXT_INPUT", "required": True}],
    "action": {"ref": "go", "nextNode": "check"}}]}


def rejection(document: dict[str, Any]) -> str:
    with pytest.raises(InvalidField) as raised:
        validate_flow(document)
    assert raised.value.code == "invalid_flow"
    return raised.value.description


@pytest.mark.parametrize("document", default_flow_documents("localhost"),
                         ids=lambda d: f"{d['handle']}-{d['flowType']}")
def test_every_default_flow_is_valid(document: dict[str, Any]) -> None:
    assert validate_flow(document)["handle"] == document["handle"]


def test_an_unknown_executor_is_named() -> None:
    message = rejection(flow(START, ASK, task("check", "MagicExecutor", "end"), END))
    assert "node 'check'" in message and "unknown executor 'MagicExecutor'" in message


def test_a_passkey_step_needs_its_mode_and_relying_party() -> None:
    no_mode = task("check", "PasskeyAuthExecutor", "end")
    assert "needs mode" in rejection(flow(START, ASK, no_mode, END))
    no_rp = task("check", "PasskeyAuthExecutor", "end", mode="challenge")
    no_rp["executor"]["properties"] = {}
    message = rejection(flow(START, ASK, no_rp, END))
    assert "node 'check'" in message and "relyingPartyId" in message


def test_a_dangling_next_node_is_named() -> None:
    message = rejection(flow(START, ASK, task("check", "BasicAuthExecutor", "nowhere"), END))
    assert "node 'check'" in message and "points to unknown node 'nowhere'" in message


def test_an_unreachable_end_is_refused() -> None:
    stuck = copy.deepcopy(ASK)
    stuck["prompts"][0]["action"]["nextNode"] = "ask"
    assert "no END node is reachable" in rejection(flow(START, stuck, END))


def test_a_cycle_without_a_prompt_is_refused() -> None:
    looping = task("check", "BasicAuthExecutor", "again")
    again = task("again", "AuthorizationExecutor", "end", onFailure="check")
    message = rejection(flow(START, ASK, looping, again, END))
    assert "cycle without a PROMPT" in message and "node 'again'" in message


def test_a_cycle_through_a_prompt_is_fine() -> None:
    retry = task("check", "BasicAuthExecutor", "end", onIncomplete="ask")
    assert validate_flow(flow(START, ASK, retry, END))


def test_passkey_registration_alone_is_refused() -> None:
    start = {"id": "start", "type": "START", "onSuccess": "register"}
    register = task("register", "PasskeyAuthExecutor", "end", mode="register_start")
    message = rejection(flow(start, register, END, flow_type="REGISTRATION"))
    assert "node 'register'" in message and "before the flow has created or identified" \
        in message


def test_passkey_registration_on_a_path_that_skips_provisioning_is_refused() -> None:
    ask = copy.deepcopy(ASK)
    ask["prompts"].append({"inputs": [], "action": {"ref": "skip", "nextNode": "register"}})
    ask["prompts"][0]["action"]["nextNode"] = "provision"
    provision = task("provision", "ProvisioningExecutor", "register")
    register = task("register", "PasskeyAuthExecutor", "end", mode="register_start")
    assert "node 'register'" in rejection(flow(START, ask, provision, register, END,
                                               flow_type="REGISTRATION"))
    ask["prompts"].pop()
    assert validate_flow(flow(START, ask, provision, register, END, flow_type="REGISTRATION"))


@pytest.mark.parametrize(("change", "problem"), [
    ({"handle": "Bad Handle"}, "handle"),
    ({"flowType": "NOT_A_FLOW_TYPE"}, "flowType"),
    ({"nodes": []}, "nodes"),
])
def test_document_fields_are_checked(change: dict[str, Any], problem: str) -> None:
    document = {**flow(START, ASK, task("check", "BasicAuthExecutor", "end"), END), **change}
    assert rejection(document)
    with pytest.raises(InvalidField) as raised:
        validate_flow(document)
    assert raised.value.field == problem
