"""TOTPExecutor (mode ``verify``): the code from an authenticator app after a password (the
rules: services/accounts/totp.py).
"""

from __future__ import annotations

from typing import Any

from identityctl.flow.engine import SUCCESS, TaskOutcome
from identityctl.services.accounts import totp
from identityctl.services.flows.step import StepRequest
from identityctl.store import directory

#: What the step takes: the app's code, or a recovery code in its place (a lost phone).
CODE_INPUT, RECOVERY_CODE_INPUT = "totpCode", "recoveryCode"


def verify(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """TOTPExecutor, mode ``verify``: a person with an authenticator app gives its code (or
    a recovery code); a person without one goes on. With neither input the step is
    ``incomplete`` without a reason: the flow goes to its prompt for the code."""
    if not step.user_id:
        return TaskOutcome("failure", "user_not_identified")
    if not totp.is_enrolled(step.user_id):
        return SUCCESS
    code, recovery_code = step.text(CODE_INPUT), step.text(RECOVERY_CODE_INPUT)
    if not code and not recovery_code:
        return TaskOutcome("incomplete")
    user = directory.get_user(step.user_id)
    totp.verify_second_step(step.ctx, user, code=code, recovery_code=recovery_code,
                            origin=step.origin)
    step.signed_in(user.id, ["otp", "mfa"])
    return SUCCESS
