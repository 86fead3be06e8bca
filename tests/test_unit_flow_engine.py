"""The flow engine walks a flow graph: it stops at a PROMPT, finishes at an END, and follows
task outcomes (onSuccess, onIncomplete, onFailure) or ends in ERROR where a flow has nowhere
to go. Continuing picks one action of the PROMPT and needs that action's required inputs.

No HTTP, no store, no executors: tasks are answered by a script keyed by node id, the way the
service layer's runner answers with what each executor made of its step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from identityctl.errors import BadRequest, MissingField, ServiceUnavailable
from identityctl.flow.definition import validate_flow
from identityctl.flow.engine import (
    COMPLETE,
    ERROR,
    INCOMPLETE,
    SUCCESS,
    FlowGraph,
    Halt,
    TaskOutcome,
)
from identityctl.services.admin.bootstrap import default_flow_documents

DEFAULT_FLOWS = {(document["handle"], document["flowType"]): document
                 for document in default_flow_documents("example.test")}


def graph_of(handle: str, flow_type: str = "AUTHENTICATION") -> FlowGraph:
    """The engine's graph of a flow shipped in identityctl/flow/defaults."""
    return FlowGraph(validate_flow(DEFAULT_FLOWS[handle, flow_type])["nodes"])


PASSWORD = "default-basic-flow"
PASSKEY = "default-passkey-flow"
PASSWORD_OR_PASSKEY = "default-basic-passkey-flow"


@dataclass
class ScriptedTasks:
    """A task runner answering from a script: each node's outcomes in turn, then success."""

    script: dict[str, list[TaskOutcome]] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)

    def __call__(self, node: dict[str, Any]) -> TaskOutcome:
        self.ran.append(node["id"])
        answers = self.script.get(node["id"])
        return answers.pop(0) if answers else SUCCESS


def scripted(**outcomes: TaskOutcome | Iterable[TaskOutcome]) -> ScriptedTasks:
    return ScriptedTasks({node_id: [answer] if isinstance(answer, TaskOutcome) else list(answer)
                          for node_id, answer in outcomes.items()})


def incomplete(reason: str) -> TaskOutcome:
    return TaskOutcome("incomplete", reason)


def failure(reason: str) -> TaskOutcome:
    return TaskOutcome("failure", reason)


# --- walking ----------------------------------------------------------------------------------

def test_the_graph_starts_at_its_start_node_wherever_it_is_listed() -> None:
    nodes = DEFAULT_FLOWS[PASSWORD, "AUTHENTICATION"]["nodes"]
    assert FlowGraph(nodes[::-1]).start == "start"


def test_a_walk_from_the_start_runs_the_session_check_and_waits_at_the_first_prompt() -> None:
    graph, tasks = graph_of(PASSWORD), ScriptedTasks()
    assert graph.walk(graph.start, tasks) == Halt(INCOMPLETE, "prompt_credentials")
    assert tasks.ran == ["sso_check"]  # no session answered (authorize checks it first)


def test_tasks_that_succeed_run_in_order_until_the_end_completes_the_flow() -> None:
    tasks = ScriptedTasks()
    assert graph_of(PASSWORD).walk("credentials_auth", tasks) == Halt(COMPLETE, "end")
    assert tasks.ran == ["credentials_auth", "totp_check", "passkey_upgrade",
                         "authorization_check", "auth_assert"]


def test_the_runner_is_given_the_node_with_its_executor_and_properties() -> None:
    seen: list[dict[str, Any]] = []

    def record(node: dict[str, Any]) -> TaskOutcome:
        seen.append(node)
        return failure("stop here")

    graph_of(PASSKEY).walk("passkey_challenge", record)
    assert seen[0]["executor"] == {"name": "PasskeyAuthExecutor", "mode": "challenge",
                                   "properties": {"relyingPartyId": "example.test"}}


def test_tasks_run_through_to_the_next_prompt_and_stop_there() -> None:
    tasks = ScriptedTasks()
    assert graph_of(PASSKEY).walk("identify_user", tasks) == Halt(INCOMPLETE, "prompt_passkey")
    assert tasks.ran == ["identify_user", "passkey_challenge"]


def test_an_incomplete_task_returns_to_its_on_incomplete_node_with_the_reason() -> None:
    tasks = scripted(credentials_auth=incomplete("invalid_credentials"))
    assert graph_of(PASSWORD).walk("credentials_auth", tasks) == \
        Halt(INCOMPLETE, "prompt_credentials", "invalid_credentials")
    assert tasks.ran == ["credentials_auth"]


def test_a_failed_task_goes_to_its_on_failure_node_with_the_reason() -> None:
    tasks = scripted(passkey_challenge=failure("no_passkeys"))
    assert graph_of(PASSKEY).walk("identify_user", tasks) == \
        Halt(INCOMPLETE, "prompt_username", "no_passkeys")


def test_an_incomplete_task_without_on_incomplete_falls_back_to_on_failure() -> None:
    tasks = scripted(passkey_challenge=incomplete("rate_limited"))
    assert graph_of(PASSKEY).walk("passkey_challenge", tasks) == \
        Halt(INCOMPLETE, "prompt_username", "rate_limited")


def test_a_failed_task_without_on_failure_ends_in_error_even_if_it_has_on_incomplete() -> None:
    tasks = scripted(credentials_auth=failure("account_disabled"))
    assert graph_of(PASSWORD).walk("credentials_auth", tasks) == \
        Halt(ERROR, "credentials_auth", "account_disabled")


@pytest.mark.parametrize("outcome", [failure("access_denied"), incomplete("access_denied")],
                         ids=["failure", "incomplete"])
def test_a_task_outcome_with_nowhere_to_go_ends_in_error_at_that_task(
        outcome: TaskOutcome) -> None:
    tasks = scripted(authorization_check=outcome)
    assert graph_of(PASSWORD).walk("credentials_auth", tasks) == \
        Halt(ERROR, "authorization_check", "access_denied")
    assert "auth_assert" not in tasks.ran


def test_a_recovered_failure_is_still_reported_at_the_prompt_reached_after_it() -> None:
    tasks = scripted(passkey_verify=incomplete("invalid_signature"))
    assert graph_of(PASSKEY).walk("passkey_verify", tasks) == \
        Halt(INCOMPLETE, "prompt_passkey", "invalid_signature")
    assert tasks.ran == ["passkey_verify", "passkey_challenge"]


def test_a_reason_handed_to_the_walk_is_shown_at_the_prompt_it_stops_at() -> None:
    graph = graph_of(PASSWORD)
    assert graph.walk("prompt_credentials", ScriptedTasks(), failure_reason="try_again") == \
        Halt(INCOMPLETE, "prompt_credentials", "try_again")


def test_a_task_outcome_reason_replaces_the_one_handed_to_the_walk() -> None:
    tasks = scripted(password_auth=incomplete("invalid_credentials"))
    assert graph_of(PASSWORD_OR_PASSKEY).walk("password_auth", tasks, failure_reason="old") == \
        Halt(INCOMPLETE, "prompt_signin", "invalid_credentials")


def test_a_completed_flow_carries_no_failure_reason() -> None:
    assert graph_of(PASSWORD).walk("credentials_auth", ScriptedTasks(),
                                   failure_reason="earlier") == Halt(COMPLETE, "end")


def test_a_walk_from_an_end_node_is_complete_at_once() -> None:
    tasks = ScriptedTasks()
    assert graph_of(PASSWORD).walk("end", tasks) == Halt(COMPLETE, "end")
    assert tasks.ran == []


def test_an_error_raised_by_a_task_is_not_turned_into_an_outcome() -> None:
    def overloaded(node: dict[str, Any]) -> TaskOutcome:
        raise ServiceUnavailable("busy")

    with pytest.raises(ServiceUnavailable):
        graph_of(PASSWORD).walk("credentials_auth", overloaded)


def test_a_registration_whose_passkey_step_fails_still_completes_without_a_passkey() -> None:
    tasks = scripted(passkey_register_start=failure("user_not_identified"),
                     email_verify_send=failure("email_not_sent"))  # no address, no mail
    assert graph_of(PASSKEY, "REGISTRATION").walk("provisioning", tasks) == \
        Halt(COMPLETE, "end")
    assert tasks.ran == ["provisioning", "passkey_register_start", "email_verify_send",
                         "authorization_check", "auth_assert"]


def test_a_cycle_without_a_prompt_edited_behind_validation_ends_in_error_not_forever() -> None:
    nodes = [{"id": "start", "type": "START", "onSuccess": "a"},
             {"id": "a", "type": "TASK_EXECUTION", "executor": {"name": "IdentifyingExecutor"},
              "onSuccess": "end", "onIncomplete": "b"},
             {"id": "b", "type": "TASK_EXECUTION", "executor": {"name": "IdentifyingExecutor"},
              "onSuccess": "a"},
             {"id": "end", "type": "END"}]
    with pytest.raises(BadRequest):
        validate_flow({"handle": "loop", "name": "Loop", "flowType": "AUTHENTICATION",
                       "nodes": nodes})
    tasks = scripted(a=[incomplete("again")] * 100)
    halt = FlowGraph(nodes).walk("start", tasks)
    assert (halt.status, halt.failure_reason) == (ERROR, "flow_loop")
    assert len(tasks.ran) <= 4 * len(nodes) + 4


# --- continuing at a prompt -------------------------------------------------------------------

def test_an_action_with_its_required_inputs_leads_to_its_next_node() -> None:
    inputs = {"username": "alice", "password": "correct horse"}
    assert graph_of(PASSWORD).choose("prompt_credentials", "password", inputs) == \
        "credentials_auth"


@pytest.mark.parametrize(("action", "inputs", "next_node"), [
    ("passkey", {}, "identify_user"),
    ("passkey", {"username": "alice"}, "identify_user"),
    ("password", {"username": "alice", "password": "pw"}, "password_auth"),
])
def test_each_action_of_a_prompt_leads_its_own_way(action: str, inputs: dict[str, Any],
                                                   next_node: str) -> None:
    assert graph_of(PASSWORD_OR_PASSKEY).choose("prompt_signin", action, inputs) == next_node


def test_an_action_without_inputs_needs_none() -> None:
    assert graph_of(PASSWORD_OR_PASSKEY).choose("prompt_passkey", "use_password", {}) == \
        "prompt_signin"


def test_inputs_the_action_does_not_name_are_ignored() -> None:
    inputs = {"username": "alice", "password": "pw", "otp": "123456"}
    assert graph_of(PASSWORD).choose("prompt_credentials", "password", inputs) == \
        "credentials_auth"


@pytest.mark.parametrize("password", [None, "", "   ", 1234, ["pw"]],
                         ids=["absent", "empty", "blank", "number", "list"])
def test_a_required_input_that_is_not_a_non_blank_string_is_missing(password: Any) -> None:
    inputs = {"username": "alice"} if password is None else \
        {"username": "alice", "password": password}
    with pytest.raises(MissingField) as refused:
        graph_of(PASSWORD).choose("prompt_credentials", "password", inputs)
    assert (refused.value.code, refused.value.field) == ("missing_field", "inputs.password")


def test_the_first_missing_required_input_is_the_one_named() -> None:
    with pytest.raises(MissingField) as refused:
        graph_of(PASSWORD).choose("prompt_credentials", "password", {})
    assert refused.value.field == "inputs.username"


@pytest.mark.parametrize("action", ["sign_in", "", None, "PASSWORD"])
def test_an_action_the_prompt_does_not_offer_is_refused_as_unknown(action: Any) -> None:
    with pytest.raises(BadRequest) as refused:
        graph_of(PASSWORD).choose("prompt_credentials", action, {})
    assert refused.value.code == "unknown_action"


@pytest.mark.parametrize("node_id", ["start", "credentials_auth", "end", "no_such_node"])
def test_continuing_anywhere_but_at_a_prompt_is_refused_as_not_waiting(node_id: str) -> None:
    with pytest.raises(BadRequest) as refused:
        graph_of(PASSWORD).choose(node_id, "password", {"username": "a", "password": "b"})
    assert refused.value.code == "execution_not_waiting"


def test_a_password_sign_in_goes_round_once_on_a_wrong_password_then_completes() -> None:
    graph = graph_of(PASSWORD)
    tasks = scripted(credentials_auth=incomplete("invalid_credentials"))
    inputs = {"username": "alice", "password": "pw"}
    halt = graph.walk(graph.start, tasks)
    for expected in (Halt(INCOMPLETE, "prompt_credentials", "invalid_credentials"),
                     Halt(COMPLETE, "end")):
        halt = graph.walk(graph.choose(halt.node_id, "password", inputs), tasks)
        assert halt == expected
    assert tasks.ran.count("credentials_auth") == 2


# --- the view of a prompt ---------------------------------------------------------------------

def test_the_view_lists_each_input_and_each_action_with_what_it_takes() -> None:
    view = graph_of(PASSWORD).view("prompt_credentials")
    assert view == {
        "inputs": [
            {"ref": "username", "identifier": "username", "type": "TEXT_INPUT",
             "required": True},
            {"ref": "password", "identifier": "password", "type": "PASSWORD_INPUT",
             "required": True}],
        "actions": [{"ref": "password", "type": "SUBMIT", "label": "Sign in",
                     "nextNode": "credentials_auth", "inputs": ["username", "password"]}]}


def test_an_input_of_several_actions_is_listed_once_and_required_only_if_all_need_it() -> None:
    view = graph_of(PASSWORD_OR_PASSKEY).view("prompt_signin")
    assert [(item["identifier"], item["required"]) for item in view["inputs"]] == \
        [("username", False), ("password", False), ("idpId", False)]
    assert [(action["ref"], action["inputs"]) for action in view["actions"]] == \
        [("passkey", ["username"]), ("password", ["username", "password"]),
         ("federated", ["idpId"])]


def test_an_input_without_ref_or_type_is_a_text_input_named_by_its_identifier() -> None:
    nodes = [{"id": "start", "type": "START", "onSuccess": "ask"},
             {"id": "ask", "type": "PROMPT", "prompts": [{
                 "inputs": [{"identifier": "code", "required": True}],
                 "action": {"ref": "go", "nextNode": "end"}}]},
             {"id": "end", "type": "END"}]
    view = FlowGraph(nodes).view("ask")
    assert view["inputs"] == [{"ref": "code", "identifier": "code", "type": "TEXT_INPUT",
                               "required": True}]
    assert view["actions"][0]["label"] == ""


def test_the_layout_meta_is_shown_only_in_verbose_views() -> None:
    meta = {"components": [{"type": "TEXT", "label": "Welcome"}]}
    nodes = [{"id": "start", "type": "START", "onSuccess": "ask"},
             {"id": "ask", "type": "PROMPT", "meta": meta,
              "prompts": [{"action": {"ref": "go", "nextNode": "end"}}]},
             {"id": "end", "type": "END"}]
    graph = FlowGraph(nodes)
    assert "meta" not in graph.view("ask")
    assert graph.view("ask", verbose=True)["meta"] == meta
    assert "meta" not in graph_of(PASSWORD).view("prompt_credentials", verbose=True)
