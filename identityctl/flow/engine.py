"""Stepping through a validated flow graph: no HTTP, no store, no executors.

The engine walks from a node until it needs the user (a PROMPT), finishes (an END) or
fails (a task outcome with nowhere to go). Tasks are run by a callback the service layer
supplies, so the same walk serves every executor. Each continuation picks one action of the
PROMPT the execution waits at and must carry that action's required inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from identityctl.errors import BadRequest, MissingField

INCOMPLETE, COMPLETE, ERROR = "INCOMPLETE", "COMPLETE", "ERROR"
#: The input type of a password (flow/definition.INPUT_TYPES).
PASSWORD_INPUT = "PASSWORD_INPUT"


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """What an executor made of its step.

    ``incomplete``: the user can fix it (wrong password): go to onIncomplete.
    ``failure``: this path cannot work (no passkeys): go to onFailure.
    Without the matching next node the execution ends with flowStatus ERROR.
    ``redirect``: the browser must go elsewhere first (an identity provider); the execution
    waits at this task, which runs again with what the browser brings back.
    """

    kind: Literal["success", "incomplete", "failure", "redirect"]
    reason: str = ""


SUCCESS = TaskOutcome("success")

#: Runs one TASK_EXECUTION node; may change the execution context it is given.
TaskRunner = Callable[[dict[str, Any]], TaskOutcome]


@dataclass(frozen=True, slots=True)
class Halt:
    """Where a walk stopped: waiting at a PROMPT, done at an END, or failed at a task."""

    status: str
    node_id: str
    failure_reason: str = ""
    #: Waiting at a task for the browser to come back (a REDIRECTION step), not at a PROMPT.
    redirect: bool = False


class FlowGraph:
    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = {node["id"]: node for node in nodes}
        self.start = next(node["id"] for node in nodes if node["type"] == "START")

    def walk(self, node_id: str, run_task: TaskRunner, *, failure_reason: str = "") -> Halt:
        """Follow the graph from ``node_id`` until a PROMPT, an END or a dead end.

        Validation rejected cycles without a PROMPT, so each walk ends; the hop limit only
        guards against a flow edited behind validation's back.
        """
        reason = failure_reason
        for _ in range(4 * len(self.nodes) + 4):
            node = self.nodes[node_id]
            kind = node["type"]
            if kind == "PROMPT":
                return Halt(INCOMPLETE, node_id, reason)
            if kind == "END":
                return Halt(COMPLETE, node_id)
            if kind == "START":
                node_id = node["onSuccess"]
                continue
            outcome = run_task(node)
            if outcome.kind == "redirect":
                return Halt(INCOMPLETE, node_id, redirect=True)
            if outcome.kind == "success":
                node_id = node["onSuccess"]
                continue
            reason = outcome.reason
            following = node.get("onFailure") if outcome.kind == "failure" else (
                node.get("onIncomplete") or node.get("onFailure"))
            if not following:
                return Halt(ERROR, node_id, reason)
            node_id = following
        return Halt(ERROR, node_id, "flow_loop")

    def choose(self, node_id: str, action: Any, inputs: dict[str, Any], *,
               redirected: bool = False) -> str:
        """The next node for ``action`` at the PROMPT ``node_id``; its required inputs must
        be present (400 naming the first one missing). ``redirected``: the execution waits
        at the task ``node_id`` that sent the browser away (REDIRECTION): that task again,
        with what the browser brought back."""
        node = self.nodes.get(node_id)
        if redirected and node is not None and node["type"] == "TASK_EXECUTION":
            return node_id
        if node is None or node["type"] != "PROMPT":
            raise BadRequest("This execution is not waiting for input.",
                             code="execution_not_waiting")
        refs = [prompt["action"]["ref"] for prompt in node["prompts"]]
        for prompt in node["prompts"]:
            if prompt["action"]["ref"] != action:
                continue
            for item in prompt.get("inputs", []):
                value = inputs.get(item["identifier"])
                if item.get("required") and (not isinstance(value, str) or not value.strip()):
                    name = f"inputs.{item['identifier']}"
                    raise MissingField(name, f"Field '{name}' is required for action "
                                             f"'{action}'.")
            return prompt["action"]["nextNode"]
        raise BadRequest(f"Action {action!r} is not offered at this step; offered: "
                         f"{', '.join(refs)}.", code="unknown_action")

    def password_actions(self, node_id: str) -> frozenset[str]:
        """The actions of the PROMPT ``node_id`` that ask for a password: they require one,
        or they lead to a PROMPT every action of which does ("Set a new password
        instead")."""
        def asks(prompt: dict[str, Any]) -> bool:
            return any(item.get("type") == PASSWORD_INPUT and item.get("required")
                       for item in prompt.get("inputs", []))

        def leads_to_one(prompt: dict[str, Any]) -> bool:
            following = self.nodes.get(prompt["action"]["nextNode"], {})
            return following.get("type") == "PROMPT" and all(map(asks, following["prompts"]))

        return frozenset(prompt["action"]["ref"] for prompt in self.nodes[node_id]["prompts"]
                         if asks(prompt) or leads_to_one(prompt))

    def view(self, node_id: str, *, verbose: bool = False,
             leaving_out: frozenset[str] = frozenset()) -> dict[str, Any]:
        """The ``data`` of a VIEW step for the PROMPT ``node_id`` (without additionalData);
        without the actions ``leaving_out`` names, unless that would leave none.

        An input several actions share is listed once, required only if every action needs
        it (the page must not block the action that does not).
        """
        prompts = [prompt for prompt in self.nodes[node_id]["prompts"]
                   if prompt["action"]["ref"] not in leaving_out] \
            or self.nodes[node_id]["prompts"]
        inputs: dict[str, dict[str, Any]] = {}
        for prompt in prompts:
            for item in prompt.get("inputs", []):
                shown = inputs.setdefault(item["identifier"], {
                    "ref": item.get("ref", item["identifier"]),
                    "identifier": item["identifier"], "type": item.get("type", "TEXT_INPUT"),
                    "required": all(_requires(other, item["identifier"]) for other in prompts)})
                if item.get("label"):  # what a person reads (our extension)
                    shown.setdefault("label", item["label"])
        # ``inputs`` (our extension) names what each action takes, so a client runs the
        # passkey ceremony only for the action that needs its result.
        actions = [{"ref": prompt["action"]["ref"], "type": "SUBMIT",
                    "label": prompt["action"].get("label", ""),
                    "nextNode": prompt["action"]["nextNode"],
                    "inputs": [item["identifier"] for item in prompt.get("inputs", [])]}
                   for prompt in prompts]
        data: dict[str, Any] = {"inputs": list(inputs.values()), "actions": actions}
        if verbose and self.nodes[node_id].get("meta"):
            data["meta"] = self.nodes[node_id]["meta"]
        return data


def _requires(prompt: dict[str, Any], identifier: str) -> bool:
    return any(item["identifier"] == identifier and item.get("required")
               for item in prompt.get("inputs", []))
