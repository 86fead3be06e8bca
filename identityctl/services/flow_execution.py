"""POST /flow/execute: running an application's sign-in and sign-up flows step by step.

All state lives in the store (``store.flows``): the node the execution waits at and a small
context (who the user is so far, the passkey session token, what to show next). The client
only ever carries the execution id and an action. Inputs of a step (passwords, passkey
responses) are used within that request and never stored.

Executors are the functions in ``_EXECUTORS``; the graph walk is ``flow.engine``. Passkey
steps reuse ``services.passkeys`` and completion reuses ``services.signin``, so a flow
sign-in proves exactly what the atomic API proves and ends in the same assertion.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from identityctl.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    IdentityError,
    InvalidField,
    NotFound,
)
from identityctl.flow.definition import FLOW_TYPES, executor_of
from identityctl.flow.engine import COMPLETE, ERROR, SUCCESS, FlowGraph, TaskOutcome
from identityctl.security import passwords
from identityctl.services import catalog as catalog_service
from identityctl.services import directory as directory_service
from identityctl.services import signin
from identityctl.services.attempts import CredentialAttempt
from identityctl.services.context import ServiceContext
from identityctl.services.passkeys import ceremonies, sessions
from identityctl.store import audit, catalog, directory
from identityctl.store import flows as store

#: Expired executions are kept this long so a late step hears "expired", not "unknown".
EXPIRED_GRACE = 3600
PASSWORD_ACTION = "flow.password"
#: Inputs that are never copied into user attributes.
_CREDENTIAL_INPUTS = frozenset({"username", "password", "credentialId", "clientDataJSON",
                                "authenticatorData", "signature", "userHandle",
                                "attestationObject", "credentialName"})


@dataclass
class StepRequest:
    """What one request to an execution works with; ``context`` is saved afterwards."""

    ctx: ServiceContext
    execution_id: str
    application: dict[str, Any]
    context: dict[str, Any]
    inputs: dict[str, Any]
    client_address: str
    #: Set by AuthAssertExecutor; returned once, never stored.
    assertion: str | None = None
    additional: dict[str, str] = field(default_factory=dict)

    @property
    def user_id(self) -> str | None:
        return self.context.get("userId")

    def text(self, name: str) -> str:
        value = self.inputs.get(name)
        return value.strip() if isinstance(value, str) else ""

    def signed_in(self, user_id: str, methods: list[str]) -> None:
        self.context["userId"] = user_id
        self.context["amr"] = sorted({*self.context.get("amr", []), *methods})


# --- executors ------------------------------------------------------------------------------

def _password(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """BasicAuthExecutor: username + password; unknown users cost the same argon2 check."""
    username = step.text("username") or step.context.get("username", "")
    password = step.inputs.get("password")
    with CredentialAttempt(step.ctx, action=PASSWORD_ACTION, client_address=step.client_address,
                           password=True) as attempt:
        attempt.actor = username
        attempt.check(username)
        attempt.at_stake()  # a password is always the named account's
        user = directory.find_user_by_username(username) if username else None
        ok = passwords.verify_password(user.password_hash if user else None,
                                       password if isinstance(password, str) else "")
        if user is not None:
            attempt.user_id = user.id
        if not ok:
            attempt.fail("invalid_credentials")
            return TaskOutcome("incomplete", "invalid_credentials")
    directory_service.ensure_usable(user)
    attempt.succeeded()
    audit.record(PASSWORD_ACTION, "success", actor=user.id, user_id=user.id,
                 client_address=step.client_address)
    step.context["username"] = user.username
    step.signed_in(user.id, ["pwd"])
    return SUCCESS


def _identify(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """IdentifyingExecutor: remember who the user says they are; always succeeds, so the
    answer never tells whether the username exists. A blank username means 'let the
    passkey say' (usernameless)."""
    step.context["username"] = step.text("username")
    return SUCCESS


def _passkey_challenge(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """PasskeyChallengeExecutor: options for the signed-in user, for the username the
    person gave (decoys when it has no passkey: nothing tells whether it exists), or
    usernameless. Its scope is this execution: no other start cancels it."""
    rp_id, scope = properties.get("relyingPartyId"), "flow:" + step.execution_id
    username = step.context.get("username")
    if step.user_id:
        try:
            started = ceremonies.start_authentication(
                step.ctx, user_id=step.user_id, rp_id=rp_id,
                client_address=step.client_address, scope=scope)
        except NotFound as error:  # signed in another way, no passkey yet
            return TaskOutcome("failure", error.code)
    elif username:
        started = ceremonies.start_named_authentication(
            step.ctx, username=username, rp_id=rp_id, client_address=step.client_address,
            scope=scope)
    else:
        started = ceremonies.start_authentication(
            step.ctx, user_id=None, rp_id=rp_id, client_address=step.client_address,
            scope=scope)
    step.context["passkeySession"] = started.session_token
    step.additional["passkeyChallenge"] = json.dumps(started.options)
    return SUCCESS


def _credential(step: StepRequest, response_fields: tuple[str, ...]) -> dict[str, Any]:
    """The PublicKeyCredential JSON the passkey service reads, from the flat inputs."""
    credential_id = step.inputs.get("credentialId")
    return {"id": credential_id, "rawId": credential_id, "type": "public-key",
            "response": {name: step.inputs.get(name) for name in response_fields}}


def _passkey_verify(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    signed_in = ceremonies.finish_authentication(
        step.ctx, credential=_credential(step, ("clientDataJSON", "authenticatorData",
                                                "signature", "userHandle")),
        session_token=step.context.get("passkeySession", ""),
        client_address=step.client_address)
    del step.context["passkeySession"]
    if step.user_id and step.user_id != signed_in.user.id:
        return TaskOutcome("failure", "credential_of_another_user")
    step.context["username"] = signed_in.user.username
    step.signed_in(signed_in.user.id, signed_in.amr)
    return SUCCESS


def _passkey_register_start(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    if not step.user_id:
        return TaskOutcome("failure", "user_not_identified")
    started = ceremonies.start_registration(
        step.ctx, user_id=step.user_id, rp_id=properties.get("relyingPartyId"),
        scope="flow:" + step.execution_id,
        rp_name=properties.get("relyingPartyName"),
        authenticator_selection=properties.get("authenticatorSelection"),
        attestation=properties.get("attestation"), client_address=step.client_address)
    step.context["passkeySession"] = started.session_token
    step.additional["passkeyCreationOptions"] = json.dumps(started.options)
    return SUCCESS


def _passkey_register_finish(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    registered = ceremonies.finish_registration(
        step.ctx, credential=_credential(step, ("clientDataJSON", "attestationObject")),
        session_token=step.context.get("passkeySession", ""),
        credential_name=step.inputs.get("credentialName"), client_address=step.client_address)
    del step.context["passkeySession"]
    step.additional.update({"passkeyCredentialID": registered.credential_id,
                            "passkeyCredentialName": registered.name,
                            "credentialCreatedAt": ceremonies.rfc3339(registered.created_at)})
    return SUCCESS


def _attributes_of(step: StepRequest, schema: dict[str, Any]) -> dict[str, Any]:
    texts = {name: value for name, value in step.inputs.items()
             if name in schema and name not in _CREDENTIAL_INPUTS
             and isinstance(value, str) and value.strip()}
    return directory_service.coerce_attributes(schema, texts)


def _collect_attributes(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """AttributeCollector: keep the step's attribute inputs; a known user gets them saved."""
    if step.user_id:
        user = directory.get_user(step.user_id)
        schema = directory_service.require_user_type(user.user_type)["schema"]
        collected = _attributes_of(step, schema)
        directory_service.update_user(user.id, attributes={**user.attributes, **collected},
                                      actor=user.id)
    else:
        step.context.setdefault("attributes", {}).update(
            {name: value.strip() for name, value in step.inputs.items()
             if name not in _CREDENTIAL_INPUTS and isinstance(value, str) and value.strip()})
    return SUCCESS


def _self_registration_type(step: StepRequest, properties: dict[str, Any]) -> dict[str, Any]:
    allowed = step.application.get("allowedUserTypes") or []
    name = properties.get("userType") or (allowed[0] if allowed
                                          else directory_service.DEFAULT_USER_TYPE)
    return directory_service.require_user_type(name)


def _provision(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """ProvisioningExecutor: create the user from the collected inputs (self sign-up)."""
    kind = _self_registration_type(step, properties)
    if not kind["allowSelfRegistration"]:
        return TaskOutcome("failure", "self_registration_disabled")
    password = step.inputs.get("password")
    step.inputs = {**step.context.pop("attributes", {}), **step.inputs}
    user = directory_service.create_user(
        username=step.text("username"),
        password=password if isinstance(password, str) and password else None,
        attributes=_attributes_of(step, kind["schema"]), user_type=kind["name"],
        actor="self-registration")
    step.context["username"] = user.username
    step.signed_in(user.id, ["pwd"] if user.password_hash else [])
    return SUCCESS


def _authorize(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """AuthorizationExecutor: the user may use this application."""
    if not step.user_id:
        return TaskOutcome("failure", "user_not_identified")
    user = directory.get_user(step.user_id)
    directory_service.ensure_usable(user)
    allowed = step.application.get("allowedUserTypes") or []
    if allowed and user.user_type not in allowed:
        return TaskOutcome("failure", "access_denied")
    return SUCCESS


def _sign_in_assertion(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """AuthAssertExecutor: the assertion that completes the flow (as the atomic API's)."""
    if not step.user_id:
        return TaskOutcome("failure", "user_not_identified")
    user = directory.get_user(step.user_id)
    step.assertion = signin.issue_assertion(step.ctx, user, step.context.get("amr", []))
    audit.record("flow.complete", "success", actor=user.id, user_id=user.id,
                 client_address=step.client_address,
                 details={"applicationId": step.application["id"],
                          "amr": step.context.get("amr", [])})
    return SUCCESS


#: The refusals a person can answer within the flow (another password, another name, a
#: fresh try): an executor turns them into an ``incomplete`` outcome. Throttling (429), an
#: unavailable database (503) and the like are the request's errors, not the flow's.
CORRECTABLE_BY_THE_USER: tuple[type[IdentityError], ...] = (BadRequest, Forbidden, NotFound,
                                                            Conflict)


@dataclass(frozen=True, slots=True)
class Executor:
    """A flow executor: what it runs, and which refusals leave the flow able to go on."""

    run: Callable[[StepRequest, dict[str, Any]], TaskOutcome]
    recoverable: tuple[type[IdentityError], ...] = CORRECTABLE_BY_THE_USER


_EXECUTORS: dict[tuple[str, str], Executor] = {
    ("BasicAuthExecutor", ""): Executor(_password),
    ("IdentifyingExecutor", ""): Executor(_identify),
    ("PasskeyAuthExecutor", "challenge"): Executor(_passkey_challenge),
    ("PasskeyAuthExecutor", "verify"): Executor(_passkey_verify),
    ("PasskeyAuthExecutor", "register_start"): Executor(_passkey_register_start),
    ("PasskeyAuthExecutor", "register_finish"): Executor(_passkey_register_finish),
    ("AttributeCollector", ""): Executor(_collect_attributes),
    ("ProvisioningExecutor", ""): Executor(_provision),
    ("AuthorizationExecutor", ""): Executor(_authorize),
    ("AuthAssertExecutor", ""): Executor(_sign_in_assertion),
}


def _task_runner(step: StepRequest) -> Callable[[dict[str, Any]], TaskOutcome]:
    def run(node: dict[str, Any]) -> TaskOutcome:
        properties = (node.get("executor") or {}).get("properties") or {}
        executor = _EXECUTORS[executor_of(node)]
        try:
            return executor.run(step, properties)
        except executor.recoverable as error:
            return TaskOutcome("incomplete", error.code)
    return run


# --- executions -----------------------------------------------------------------------------

def _flow_for(application: dict[str, Any], flow_type: str) -> dict[str, Any]:
    if flow_type == "REGISTRATION" and not application.get("isRegistrationFlowEnabled"):
        raise Forbidden("This application does not allow signing up.",
                        code="registration_disabled")
    flow_id = application.get("authFlowId" if flow_type == "AUTHENTICATION"
                              else "registrationFlowId")
    if not flow_id:
        raise BadRequest(f"The application has no {flow_type} flow (machine-to-machine "
                         f"applications have no sign-in).", code="no_flow")
    return catalog.get_flow(flow_id)


def _respond(step: StepRequest, execution_id: str, graph: FlowGraph, status: str, node_id: str,
             failure_reason: str, *, verbose: bool) -> dict[str, Any]:
    response: dict[str, Any] = {"executionId": execution_id, "flowStatus": status}
    if status == ERROR:
        response["failureReason"] = failure_reason
        return response
    if status == COMPLETE:
        if step.assertion:
            response["assertion"] = step.assertion
        response["data"] = {"additionalData": step.context.get("additionalData", {})}
        return response
    response["type"] = "VIEW"
    response["data"] = {**graph.view(node_id, verbose=verbose),
                        "additionalData": step.context.get("additionalData", {})}
    if failure_reason:
        response["failureReason"] = failure_reason
    return response


def _walk_and_save(step: StepRequest, execution: store.ExecutionRecord, graph: FlowGraph,
                   from_node: str, *, claimed_version: int, verbose: bool) -> dict[str, Any]:
    halt = graph.walk(from_node, _task_runner(step))
    step.context["additionalData"] = step.additional
    if not store.save(execution.id, claimed_version=claimed_version, current_node=halt.node_id,
                      context=step.context, status=halt.status, now=time.time()):
        raise _concurrent()
    if halt.status == ERROR:
        audit.record("flow.error", "failure", actor=step.user_id or "",
                     user_id=step.user_id, client_address=step.client_address,
                     details={"executionId": execution.id, "node": halt.node_id,
                              "reason": halt.failure_reason})
    return _respond(step, execution.id, graph, halt.status, halt.node_id, halt.failure_reason,
                    verbose=verbose)


def _concurrent() -> Conflict:
    return Conflict("Another request is continuing this execution; wait for it and use the "
                    "step it returns.", code="execution_conflict")


def start_execution(ctx: ServiceContext, *, application_id: str, flow_type: str,
                    auth_request_id: str | None = None, client_address: str = "",
                    verbose: bool = False) -> dict[str, Any]:
    """Start the application's flow of ``flow_type``; its first step."""
    if flow_type not in FLOW_TYPES:
        raise InvalidField("flowType", f"must be one of {', '.join(FLOW_TYPES)}")
    application = catalog_service.require_application(application_id)
    flow = _flow_for(application, flow_type)
    now = time.time()
    if secrets.randbelow(sessions.PURGE_ONE_IN) == 0:  # housekeeping, now and then
        store.purge_executions(expired_before=now - EXPIRED_GRACE)
    execution = store.create_execution(
        flow_id=flow["id"], application_id=application["id"], flow_type=flow_type,
        auth_request_id=auth_request_id, now=now, expires_at=now + ctx.config.flow.execution_ttl)
    graph = FlowGraph(flow["nodes"])
    step = StepRequest(ctx=ctx, execution_id=execution.id, application=application,
                       context={}, inputs={}, client_address=client_address)
    return _walk_and_save(step, execution, graph, graph.start, claimed_version=0,
                          verbose=verbose)


def _open(execution_id: Any, now: float) -> store.ExecutionRecord:
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
    return execution


def continue_execution(ctx: ServiceContext, *, execution_id: str, action: Any,
                       inputs: dict[str, Any], client_address: str = "",
                       verbose: bool = False) -> dict[str, Any]:
    """Take ``action`` with ``inputs`` at the step the execution waits at; the next step."""
    now = time.time()
    execution = _open(execution_id, now)
    flow = catalog.get_flow(execution.flow_id)
    graph = FlowGraph(flow["nodes"])
    next_node = graph.choose(execution.current_node, action, inputs)
    if not store.claim(execution.id, version=execution.version, now=now):
        raise _concurrent()
    context = {key: value for key, value in execution.context.items()
               if key != "additionalData"}
    step = StepRequest(ctx=ctx, execution_id=execution.id,
                       application=catalog.get_application(execution.application_id),
                       context=context, inputs=inputs, client_address=client_address)
    return _walk_and_save(step, execution, graph, next_node,
                          claimed_version=execution.version + 1, verbose=verbose)
