"""The flow executors: what each TASK_EXECUTION node of a flow does (spec names kept:
BasicAuthExecutor, IdentifyingExecutor, PasskeyAuthExecutor, AttributeCollector,
ProvisioningExecutor, AuthorizationExecutor, AuthAssertExecutor; the reference system's for
e-mail and recovery: EmailExecutor, OTPExecutor, CredentialSetter, in
services/accounts/email_codes.py
and services/accounts/recovery.py).

Each gets the :class:`StepRequest` of the request that runs it and answers a
``flow.engine.TaskOutcome``; an executor declares which refusals the user can answer within
the flow (:class:`Executor`). Passkey steps reuse ``services.passkeys`` and completion reuses
``services.signin``, so a flow sign-in proves exactly what the atomic API proves.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from identityctl.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    IdentityError,
    NotFound,
)
from identityctl.federation import GITHUB, GOOGLE
from identityctl.flow.definition import executor_of
from identityctl.flow.engine import SUCCESS, TaskOutcome
from identityctl.passkey import codec
from identityctl.security import passwords
from identityctl.security.email_address import EMAIL, checked_address
from identityctl.services.accounts import email_codes, federation, recovery, signin
from identityctl.services.accounts.passkeys import ceremonies
from identityctl.services.attempts import CredentialAttempt
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import mail
from identityctl.services.directory import users as directory_service
from identityctl.store import audit, directory

PASSWORD_ACTION = "flow.password"
#: Inputs that are never copied into user attributes.
_CREDENTIAL_INPUTS = frozenset({"username", "password", "credentialId", "clientDataJSON",
                                "authenticatorData", "signature", "userHandle",
                                "attestationObject", "transports", "credentialName"})


@dataclass
class StepRequest:
    """What one request to an execution works with; ``context`` is saved afterwards."""

    ctx: ServiceContext
    execution_id: str
    application: dict[str, Any]
    context: dict[str, Any]
    inputs: dict[str, Any]
    client_address: str
    #: The language of the person's page (their browser's), for what is sent to them.
    language: str = "en"
    #: Set by an executor that sends the browser elsewhere (REDIRECTION).
    redirect_url: str | None = None
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


T = TypeVar("T")


def _finish_ceremony(step: StepRequest, finish: Callable[..., T], **arguments: Any) -> T:
    """Finish the ceremony this execution started (its session token is in the context)
    with the step's inputs; the token is forgotten once the ceremony consumed it."""
    finished = finish(step.ctx, credential=codec.flow_credential(step.inputs),
                      session_token=step.context.get("passkeySession", ""),
                      client_address=step.client_address, **arguments)
    del step.context["passkeySession"]
    return finished


def _passkey_verify(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    signed_in = _finish_ceremony(step, ceremonies.finish_authentication)
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
    registered = _finish_ceremony(step, ceremonies.finish_registration,
                                  credential_name=step.inputs.get("credentialName"),
                                  language=step.language)
    step.additional.update({"passkeyCredentialID": registered.credential_id,
                            "passkeyCredentialName": registered.name,
                            "credentialCreatedAt": ceremonies.rfc3339(registered.created_at)})
    if step.user_id:  # making it needed the authenticator and its user verification
        step.signed_in(step.user_id, ["passkey"])
        if step.context.get("recovering"):  # the person is told, at their proven address
            mail.notify(step.ctx, directory.get_user(step.user_id), "passkey_added",
                        name=registered.name, how="recovery")
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
        collected = {name: value.strip() for name, value in step.inputs.items()
                     if name not in _CREDENTIAL_INPUTS and isinstance(value, str)
                     and value.strip()}
        if EMAIL in collected:  # refused here, not kept until the account is made
            collected[EMAIL] = checked_address(collected[EMAIL])
        step.context.setdefault("attributes", {}).update(collected)
    return SUCCESS


def _provision(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """ProvisioningExecutor: create the user from the collected inputs (self sign-up)."""
    kind = directory_service.self_registration_type(step.application,
                                                    properties.get("userType"))
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
    if not directory_service.may_use(user, step.application.get("allowedUserTypes") or ()):
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
    # Reached only when no session answered the request (authorize checks it before the
    # flow starts, services/accounts/sessions.py): the flow goes on to its sign-in.
    ("SSOCheckExecutor", ""): Executor(lambda step, properties: SUCCESS),
    ("EmailExecutor", "verify"): Executor(email_codes.send_verification),
    ("EmailExecutor", "recovery"): Executor(email_codes.send_recovery),
    ("OTPExecutor", ""): Executor(email_codes.check_code),
    ("RecoveryCodeExecutor", ""): Executor(recovery.use_recovery_code),
    ("CredentialSetter", ""): Executor(recovery.set_credential),
    ("OIDCAuthExecutor", ""): Executor(federation.federated_sign_in),
    ("GoogleOIDCAuthExecutor", ""): Executor(partial(federation.federated_sign_in,
                                                     kinds=(GOOGLE,))),
    ("GithubOAuthExecutor", ""): Executor(partial(federation.federated_sign_in,
                                                  kinds=(GITHUB,))),
    ("FederatedAuthResolverExecutor", ""): Executor(federation.link_pending),
    ("FederatedAuthResolverExecutor", "confirm"): Executor(federation.confirm_link),
}


def task_runner(step: StepRequest) -> Callable[[dict[str, Any]], TaskOutcome]:
    def run(node: dict[str, Any]) -> TaskOutcome:
        properties = (node.get("executor") or {}).get("properties") or {}
        executor = _EXECUTORS[executor_of(node)]
        try:
            return executor.run(step, properties)
        except executor.recoverable as error:
            return TaskOutcome("incomplete", error.code)
    return run
