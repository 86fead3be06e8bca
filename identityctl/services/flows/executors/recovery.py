"""RecoveryCodeExecutor and CredentialSetter: getting back in within a recovery flow (the
rules: services/accounts/recovery.py).
"""

from __future__ import annotations

from typing import Any

from identityctl.flow.engine import SUCCESS, TaskOutcome
from identityctl.services import audit
from identityctl.services.accounts.email_codes import account_named
from identityctl.services.accounts.recovery import (
    RECOVERY_CODE_ACTION,
    spend_recovery_code,
)
from identityctl.services.attempts import CredentialAttempt
from identityctl.services.directory import users as directory_service
from identityctl.services.flows.step import StepRequest
from identityctl.store import recovery as recovery_store
from identityctl.store.passkeys import NOBODY


def use_recovery_code(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """RecoveryCodeExecutor: the named account's recovery code, spent."""
    name = step.text("username")
    with CredentialAttempt(step.ctx, action=RECOVERY_CODE_ACTION,
                           origin=step.origin, password=True) as attempt:
        attempt.actor = name
        attempt.check(name)
        attempt.at_stake()
        user = account_named(name)
        spent = spend_recovery_code(user.id if user else NOBODY, step.text("recoveryCode"))
        if user is None or not spent:
            attempt.fail("invalid_recovery_code")
            return TaskOutcome("incomplete", "invalid_recovery_code")
        attempt.user_id = user.id
    attempt.succeeded()
    directory_service.ensure_usable(user)
    audit.record("recovery.recovery_code", "success", origin=step.origin.acting_as(user.id),
                 user_id=user.id,
                 details={"left": recovery_store.codes_left(user.id)})
    step.context["username"] = user.username
    step.context["recovering"] = True
    step.signed_in(user.id, ["otp"])
    return SUCCESS


def set_credential(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """CredentialSetter: a new password for the person the flow identified; refused
    (``passwords_not_allowed``) where passkeys only hold: the person's unit, or the
    application the recovery is for."""
    if not step.user_id:
        return TaskOutcome("failure", "user_not_identified")
    password = step.inputs.get("password")
    directory_service.set_password(step.user_id, password if isinstance(password, str)
                                   else "", origin=step.origin.acting_as(step.user_id),
                                   application=step.application)
    step.signed_in(step.user_id, [directory_service.PASSWORD_AMR])
    return SUCCESS
