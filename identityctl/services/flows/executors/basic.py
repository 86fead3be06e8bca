"""The executors of a sign-in's and a sign-up's own steps (spec names): BasicAuthExecutor
(username and password), IdentifyingExecutor, AttributeCollector, ProvisioningExecutor,
AuthorizationExecutor, AuthAssertExecutor.
"""

from __future__ import annotations

from typing import Any

from identityctl.flow.engine import SUCCESS, TaskOutcome
from identityctl.security import passwords
from identityctl.security.email_address import EMAIL, checked_address
from identityctl.services import audit
from identityctl.services.accounts import signin, totp
from identityctl.services.attempts import CredentialAttempt
from identityctl.services.directory import users as directory_service
from identityctl.services.flows.step import StepRequest
from identityctl.store import directory

PASSWORD_ACTION = "flow.password"


#: Inputs that are never copied into user attributes.
_CREDENTIAL_INPUTS = frozenset({"username", "password", "credentialId", "clientDataJSON",
                                "authenticatorData", "signature", "userHandle",
                                "attestationObject", "transports", "credentialName"})


def password(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """BasicAuthExecutor: username + password; unknown users cost the same argon2 check.
    Where "passkeys only" holds (the application, or the person's unit) it refuses with
    ``passwords_not_allowed``."""
    # An application that allows passkeys only refuses before any account is looked at.
    directory_service.ensure_passwords_allowed(None, step.application)
    username = step.text("username") or step.context.get("username", "")
    password = step.inputs.get("password")
    with CredentialAttempt(step.ctx, action=PASSWORD_ACTION, origin=step.origin,
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
        # Said only to whoever knows the password (audited): the rule of the person's unit.
        directory_service.ensure_passwords_allowed(user)
    directory_service.ensure_usable(user)
    # With an authenticator app to come, its code's success clears and trusts.
    attempt.succeeded(final=not totp.is_enrolled(user.id))
    audit.record(PASSWORD_ACTION, "success", origin=step.origin.acting_as(user.id), user_id=user.id)
    step.context["username"] = user.username
    step.signed_in(user.id, [directory_service.PASSWORD_AMR])
    return SUCCESS


def identify(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """IdentifyingExecutor: remember who the user says they are; always succeeds, so the
    answer never tells whether the username exists. A blank username means 'let the
    passkey say' (usernameless)."""
    step.context["username"] = step.text("username")
    return SUCCESS


def _attributes_of(step: StepRequest, schema: dict[str, Any]) -> dict[str, Any]:
    texts = {name: value for name, value in step.inputs.items()
             if name in schema and name not in _CREDENTIAL_INPUTS
             and isinstance(value, str) and value.strip()}
    return directory_service.coerce_attributes(schema, texts)


def collect_attributes(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """AttributeCollector: keep the step's attribute inputs; a known user gets them saved."""
    if step.user_id:
        user = directory.get_user(step.user_id)
        schema = directory_service.require_user_type(user.user_type)["schema"]
        collected = _attributes_of(step, schema)
        directory_service.update_user(user.id, attributes={**user.attributes, **collected},
                                      origin=step.origin.acting_as(user.id))
    else:
        collected = {name: value.strip() for name, value in step.inputs.items()
                     if name not in _CREDENTIAL_INPUTS and isinstance(value, str)
                     and value.strip()}
        if EMAIL in collected:  # refused here, not kept until the account is made
            collected[EMAIL] = checked_address(collected[EMAIL])
        step.context.setdefault("attributes", {}).update(collected)
    return SUCCESS


def provision(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
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
        origin=step.origin.acting_as("self-registration"))
    step.context["username"] = user.username
    step.signed_in(user.id, [directory_service.PASSWORD_AMR] if user.password_hash else [])
    return SUCCESS


def authorize(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """AuthorizationExecutor: the user may use this application."""
    if not step.user_id:
        return TaskOutcome("failure", "user_not_identified")
    user = directory.get_user(step.user_id)
    directory_service.ensure_usable(user)
    if not directory_service.may_use(user, step.application.get("allowedUserTypes") or ()):
        return TaskOutcome("failure", "access_denied")
    return SUCCESS


def sign_in_assertion(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """AuthAssertExecutor: the assertion that completes the flow (as the atomic API's)."""
    if not step.user_id:
        return TaskOutcome("failure", "user_not_identified")
    user = directory.get_user(step.user_id)
    step.assertion = signin.issue_assertion(step.ctx, user, step.context.get("amr", []),
                                            application_id=step.application["id"])
    audit.record("flow.complete", "success", origin=step.origin.acting_as(user.id), user_id=user.id,
                 details={"applicationId": step.application["id"],
                          "amr": step.context.get("amr", [])})
    return SUCCESS
