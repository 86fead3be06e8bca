"""The executors by (name, mode): what each TASK_EXECUTION node of a flow runs. A new
executor is its module under executors/ and one line here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from identityctl.federation import GITHUB, GOOGLE
from identityctl.flow.definition import executor_of
from identityctl.flow.engine import SUCCESS, TaskOutcome
from identityctl.services.flows.executors import (
    basic,
    email,
    federation,
    passkey,
    recovery,
    totp,
)
from identityctl.services.flows.step import Executor, StepRequest

EXECUTORS: dict[tuple[str, str], Executor] = {
    ("BasicAuthExecutor", ""): Executor(basic.password),
    ("IdentifyingExecutor", ""): Executor(basic.identify),
    ("PasskeyAuthExecutor", "challenge"): Executor(passkey.challenge),
    ("PasskeyAuthExecutor", "verify"): Executor(passkey.verify),
    ("PasskeyAuthExecutor", "register_start"): Executor(passkey.register_start),
    ("PasskeyAuthExecutor", "register_finish"): Executor(passkey.register_finish),
    ("PasskeyAuthExecutor", "upgrade"): Executor(passkey.upgrade),
    ("PasskeyAuthExecutor", "upgrade_finish"): Executor(passkey.upgrade_finish),
    ("AttributeCollector", ""): Executor(basic.collect_attributes),
    ("ProvisioningExecutor", ""): Executor(basic.provision),
    ("AuthorizationExecutor", ""): Executor(basic.authorize),
    ("AuthAssertExecutor", ""): Executor(basic.sign_in_assertion),
    # Reached only when no session answered the request (authorize checks it before the
    # flow starts, services/accounts/sessions.py): the flow goes on to its sign-in.
    ("SSOCheckExecutor", ""): Executor(lambda step, properties: SUCCESS),
    ("EmailExecutor", "verify"): Executor(email.send_verification),
    ("EmailExecutor", "recovery"): Executor(email.send_recovery),
    ("OTPExecutor", ""): Executor(email.check_code),
    ("TOTPExecutor", "verify"): Executor(totp.verify),
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
        executor = EXECUTORS[executor_of(node)]
        try:
            return executor.run(step, properties)
        except executor.recoverable as error:
            return TaskOutcome("incomplete", error.code)
    return run
