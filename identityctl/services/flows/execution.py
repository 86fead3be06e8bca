"""POST /flow/execute: running an application's sign-in and sign-up flows step by step.

All state lives in the store (``store.flows``): the node the execution waits at and a small
context (who the user is so far, the passkey session token, what to show next). The client
only ever carries the execution id and an action. Inputs of a step (passwords, passkey
responses) are used within that request and never stored.

The executors are in ``services/flows/executors/`` (named in ``flows/registry.py``); the
graph walk is ``flow.engine``.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from identityctl import metrics
from identityctl.errors import BadRequest, Conflict, Forbidden, InvalidField, NotFound
from identityctl.flow.definition import FLOW_TYPES
from identityctl.flow.engine import COMPLETE, ERROR, INCOMPLETE, FlowGraph
from identityctl.security.secrets import constant_time_equal, token_hash
from identityctl.services import audit
from identityctl.services import catalog as catalog_service
from identityctl.services.accounts import federation, recovery
from identityctl.services.accounts.passkeys import sessions
from identityctl.services.context import ServiceContext
from identityctl.services.directory.users import passkeys_only
from identityctl.services.flows.registry import task_runner
from identityctl.services.flows.step import StepRequest
from identityctl.services.origin import RequestOrigin
from identityctl.store import catalog
from identityctl.store import flows as store

#: Expired executions are kept this long so a late step hears "expired", not "unknown".
EXPIRED_GRACE = 3600


# --- executions -----------------------------------------------------------------------------

#: Recovery runs this flow (seeded by init; a team may edit it) for every application that
#: has a sign-in flow.
RECOVERY_FLOW = "default-recovery-flow"


def ensure_startable(application_id: str, flow_type: str) -> None:
    """The application has a flow of ``flow_type`` that may start (else its refusal)."""
    _flow_for(catalog_service.applications.require_application(application_id), flow_type)


def _flow_for(application: dict[str, Any], flow_type: str) -> dict[str, Any]:
    if flow_type == "RECOVERY":
        _flow_for(application, "AUTHENTICATION")  # only where people sign in at all
        recovery.ensure_recovery_offered(application)
        return catalog_service.flows.require_flow_by_handle(RECOVERY_FLOW, "RECOVERY")
    if flow_type == "REGISTRATION" and not application.get("isRegistrationFlowEnabled"):
        raise Forbidden("This application does not allow signing up.",
                        code="registration_disabled")
    flow_id = application.get("authFlowId" if flow_type == "AUTHENTICATION"
                              else "registrationFlowId")
    if not flow_id:
        raise BadRequest(f"The application has no {flow_type} flow (machine-to-machine "
                         f"applications have no sign-in).", code="no_flow")
    return catalog.get_flow(flow_id)


#: Context key: the execution waits for the browser to come back from elsewhere.
REDIRECTED = "redirected"
#: Context key: the hash of the browser secret an execution is bound to (docs/security.md,
#: "Flow executions belong to the browser that started them").
BROWSER_BINDING = "browserBinding"
#: The browser secret: one random value per browser, HttpOnly, sent by the hosted pages'
#: same-origin requests. An execution started with it answers only requests that carry it.
BROWSER_COOKIE = "__Host-identityctl-flow"


def new_browser_secret() -> str:
    return secrets.token_urlsafe(32)


def _bound_to(execution: store.ExecutionRecord, browser: str) -> bool:
    """Whether ``browser`` (the request's browser secret, or "") may step ``execution``: an
    execution started with a browser secret only with that secret; one started without (an
    application's own page across origins) by whoever holds its id."""
    binding = execution.context.get(BROWSER_BINDING)
    return binding is None or (bool(browser)
                               and constant_time_equal(binding, token_hash(browser)))


def resumable_in(execution_id: str, browser: str) -> bool:
    """For the hosted page of a sign-in link: whether this browser may go on with the
    execution the link names. A link opened in another browser starts a fresh sign-in."""
    execution = store.find_execution(execution_id)
    return (execution is not None and execution.status == INCOMPLETE
            and execution.context.get(BROWSER_BINDING) is not None
            and _bound_to(execution, browser))


#: The input of an action that signs in through an upstream provider: the page offers one
#: "Continue with …" per provider (``additionalData.identityProviders``).
FEDERATED_INPUT = "idpId"


def _respond(step: StepRequest, execution_id: str, graph: FlowGraph, status: str, node_id: str,
             failure_reason: str, *, verbose: bool, redirect: bool = False) -> dict[str, Any]:
    response: dict[str, Any] = {"executionId": execution_id, "flowStatus": status}
    if status == ERROR:
        response["failureReason"] = failure_reason
        return response
    if status == COMPLETE:
        if step.assertion:
            response["assertion"] = step.assertion
        response["data"] = {"additionalData": step.context.get("additionalData", {})}
        return response
    if redirect:  # the browser goes to step.redirect_url, and comes back to go on
        response["type"] = "REDIRECTION"
        response["data"] = {"redirectURL": step.redirect_url,
                            "additionalData": step.context.get("additionalData", {})}
        return response
    response["type"] = "VIEW"
    view = graph.view(node_id, verbose=verbose, leaving_out=_refused_here(step, graph, node_id))
    additional = step.context.get("additionalData", {})
    if any(FEDERATED_INPUT in action["inputs"] for action in view["actions"]):
        additional = {**additional,
                      "identityProviders": federation.provider_choices_json()}
    response["data"] = {**view, "additionalData": additional}
    if failure_reason:
        response["failureReason"] = failure_reason
    return response


def _refused_here(step: StepRequest, graph: FlowGraph, node_id: str) -> frozenset[str]:
    """The actions of the PROMPT that ask for a password, where passkeys only hold: the
    application's rule, or the unit of the person the flow signed in (proven: never of a
    name only typed, which would tell anyone the unit of an account). Taken anyway, their
    executor refuses them."""
    asking = graph.password_actions(node_id)
    if asking and passkeys_only(application=step.application, user_id=step.user_id):
        return asking
    return frozenset()


def _walk_and_save(step: StepRequest, execution: store.ExecutionRecord, graph: FlowGraph,
                   from_node: str, *, claimed_version: int, verbose: bool) -> dict[str, Any]:
    halt = graph.walk(from_node, task_runner(step))
    step.context["additionalData"] = step.additional
    step.context[REDIRECTED] = halt.redirect
    if not store.save(execution.id, claimed_version=claimed_version, current_node=halt.node_id,
                      context=step.context, status=halt.status, now=time.time()):
        raise _concurrent()
    if halt.status != INCOMPLETE:
        metrics.count(metrics.FLOWS, execution.flow_type, halt.status)
    if halt.status == ERROR:
        audit.record("flow.error", "failure", origin=step.origin.acting_as(step.user_id or ""),
                     user_id=step.user_id,
                     details={"executionId": execution.id, "node": halt.node_id,
                              "reason": halt.failure_reason})
    return _respond(step, execution.id, graph, halt.status, halt.node_id, halt.failure_reason,
                    verbose=verbose, redirect=halt.redirect)


def _concurrent() -> Conflict:
    return Conflict("Another request is continuing this execution; wait for it and use the "
                    "step it returns.", code="execution_conflict")


def start_execution(ctx: ServiceContext, *, application_id: str, flow_type: str,
                    auth_request_id: str | None = None, origin: RequestOrigin,
                    language: str = "en", verbose: bool = False,
                    browser: str = "") -> dict[str, Any]:
    """Start the application's flow of ``flow_type``; its first step. With ``browser`` (the
    browser secret), only requests carrying that secret may continue it."""
    if flow_type not in FLOW_TYPES:
        raise InvalidField("flowType", f"must be one of {', '.join(FLOW_TYPES)}")
    application = catalog_service.applications.require_application(application_id)
    flow = _flow_for(application, flow_type)
    now = time.time()
    if secrets.randbelow(sessions.PURGE_ONE_IN) == 0:  # housekeeping, now and then
        store.purge_executions(expired_before=now - EXPIRED_GRACE)
    execution = store.create_execution(
        flow_id=flow["id"], application_id=application["id"], flow_type=flow_type,
        auth_request_id=auth_request_id, now=now, expires_at=now + ctx.config.flow.execution_ttl)
    graph = FlowGraph(flow["nodes"])
    step = StepRequest(ctx=ctx, execution_id=execution.id, application=application,
                       context={BROWSER_BINDING: token_hash(browser)} if browser else {},
                       inputs={}, origin=origin,
                       language=language)
    return _walk_and_save(step, execution, graph, graph.start, claimed_version=0,
                          verbose=verbose)


def _open(execution_id: Any, now: float, browser: str) -> store.ExecutionRecord:
    if not isinstance(execution_id, str) or not execution_id.strip():
        raise InvalidField("executionId", "must be the executionId of a previous step")
    execution = store.find_execution(execution_id)
    if execution is None:
        raise NotFound("No such flow execution; start the flow again.",
                       code="execution_not_found")
    if execution.status != "INCOMPLETE":
        raise BadRequest("This flow execution has already finished; start the flow again.",
                         code="execution_completed")
    if execution.expires_at <= now:
        raise BadRequest("This flow execution expired; start the flow again.",
                         code="execution_expired")
    if not _bound_to(execution, browser):
        raise Forbidden("This sign-in was started in another browser; start again here.",
                        code="execution_other_browser")
    return execution


def continue_execution(ctx: ServiceContext, *, execution_id: str, action: Any,
                       inputs: dict[str, Any], origin: RequestOrigin,
                       language: str = "en", verbose: bool = False,
                       browser: str = "") -> dict[str, Any]:
    """Take ``action`` with ``inputs`` at the step the execution waits at; the next step.
    ``browser``: the request's browser secret (see :func:`start_execution`)."""
    now = time.time()
    execution = _open(execution_id, now, browser)
    flow = catalog.get_flow(execution.flow_id)
    graph = FlowGraph(flow["nodes"])
    next_node = graph.choose(execution.current_node, action, inputs,
                             redirected=bool(execution.context.get(REDIRECTED)))
    if not store.claim(execution.id, version=execution.version, now=now):
        raise _concurrent()
    context = {key: value for key, value in execution.context.items()
               if key not in ("additionalData", REDIRECTED)}
    step = StepRequest(ctx=ctx, execution_id=execution.id,
                       application=catalog.get_application(execution.application_id),
                       context=context, inputs=inputs, origin=origin,
                       language=language)
    return _walk_and_save(step, execution, graph, next_node,
                          claimed_version=execution.version + 1, verbose=verbose)
