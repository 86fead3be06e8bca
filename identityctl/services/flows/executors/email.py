"""EmailExecutor (modes ``verify`` and ``recovery``) and OTPExecutor: one-time codes by
e-mail within an execution (the rules: services/accounts/email_codes.py).
"""

from __future__ import annotations

import time
from typing import Any

from identityctl.flow.engine import SUCCESS, TaskOutcome
from identityctl.security import codes
from identityctl.services import audit
from identityctl.services.accounts.email_codes import (
    CODE_SECRET,
    account_named,
    code_mail_allowed,
    count_code_mail,
)
from identityctl.services.attempts import CredentialAttempt
from identityctl.services.delivery import mail
from identityctl.services.directory import users as directory_service
from identityctl.services.flows.step import StepRequest
from identityctl.store import db, directory
from identityctl.store import keys as key_store
from identityctl.store import recovery as recovery_store
from identityctl.store.passkeys import NOBODY

OTP_ACTION = "flow.otp"
#: Codes one execution may have sent (the first and two more on request).
SENDS_PER_EXECUTION = 3
#: The address probed for a name without one: no message is ever queued to it, so the probe
#: reads as much as for a real address.
UNADDRESSED = "nobody@invalid"
VERIFY, RECOVERY = "verify", "recovery"


def _new_code(step: StepRequest, *, purpose: str, user_id: str | None, address: str) -> str:
    """A fresh code for this execution; its digest (not the code) joins the context."""
    sent = step.context.get("otp", {}).get("sends", 0)
    if sent >= SENDS_PER_EXECUTION:
        raise TooManySends()
    code = codes.new_code()
    step.context["otp"] = {
        "digest": codes.digest(key_store.service_secret(CODE_SECRET),
                               binding=step.execution_id, code=code),
        "expiresAt": time.time() + step.ctx.config.email.code_ttl, "tries": 0,
        "sends": sent + 1, "purpose": purpose, "userId": user_id, "address": address}
    return code


class TooManySends(Exception):
    pass


def send_verification(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """EmailExecutor, mode ``verify``: a code to the signed-up person's address. Past the
    address's allowance of code mails (anyone may sign up with any address) nothing is sent
    and the sign-up goes on as without mail: the address stays unconfirmed until its person
    confirms it on the account page, which a stranger's requests never refuse."""
    user = directory.get_user(step.user_id) if step.user_id else None
    address = str((user.attributes if user else {}).get("email") or "").strip()
    if user is None or not address or not step.ctx.config.email.enabled \
            or not code_mail_allowed(address, step.origin):
        return TaskOutcome("failure", "email_not_sent")
    try:
        code = _new_code(step, purpose=VERIFY, user_id=user.id, address=address)
    except TooManySends:
        return TaskOutcome("incomplete", "too_many_codes")
    with db.transaction():
        mail.queue(step.ctx, "verify_email", to=address, language=step.language, code=code,
                   brand=mail.brand_of(step.application),
                   count=step.ctx.config.email.code_ttl // 60)
        count_code_mail(address, step.origin)
    step.additional["emailSentTo"] = address
    return SUCCESS


def send_recovery(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """EmailExecutor, mode ``recovery``: a code to the named account's verified address,
    and the same answer (and work) for any other name."""
    if not step.ctx.config.email.enabled:  # the deployment's fact, the same for every name
        return TaskOutcome("failure", "email_not_configured")
    name = str(step.context.get("username") or "").strip()
    user = account_named(name)
    # The same reads and writes for every name: nothing in the timing tells whether it is
    # known. A mail not sent is counted on a stand-in of the name (never on the address,
    # nor on one row that every such request would queue for).
    address = recovery_store.verified_address(user.id if user else NOBODY)
    unsent = f"{UNADDRESSED}:{name}"
    allowed = code_mail_allowed(address or unsent, step.origin)
    deliverable = address is not None and directory_service.is_usable(user) and allowed
    try:
        code = _new_code(step, purpose=RECOVERY, user_id=user.id if deliverable and user
                         else None, address=address or "")
    except TooManySends:
        return TaskOutcome("incomplete", "too_many_codes")
    with db.transaction():
        mail.queue(step.ctx, "recovery_code", to=address or UNADDRESSED,
                   language=mail.language_of(user, step.language) if user else step.language,
                   send=deliverable, code=code, brand=mail.brand_of(step.application),
                   count=step.ctx.config.email.code_ttl // 60)
        count_code_mail(address if deliverable and address else unsent, step.origin)
    return SUCCESS


def check_code(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """OTPExecutor: the code sent to this execution."""
    sent = step.context.get("otp")
    if not sent:
        return TaskOutcome("failure", "code_not_sent")
    if sent["tries"] >= step.ctx.config.email.code_attempts:
        return TaskOutcome("failure", "too_many_attempts")
    if sent["expiresAt"] <= time.time():
        return TaskOutcome("incomplete", "code_expired")
    account = sent["userId"] or sent["address"] or step.context.get("username") or None
    with CredentialAttempt(step.ctx, action=OTP_ACTION, origin=step.origin,
                           password=True) as attempt:
        attempt.actor = account or ""
        attempt.check(account)
        attempt.at_stake(sent["userId"])
        right = codes.matches(key_store.service_secret(CODE_SECRET), binding=step.execution_id,
                              code=step.text("otp"), expected=sent["digest"])
        if not right or not sent["userId"]:  # a code never sent to anyone opens nothing
            sent["tries"] += 1
            attempt.fail("invalid_code")
            return TaskOutcome("incomplete", "invalid_code")
    attempt.succeeded()
    del step.context["otp"]
    user = directory.get_user(sent["userId"])
    if sent["purpose"] == VERIFY:
        with db.transaction():
            directory_service.address_proven(user.id, sent["address"],
                                             origin=step.origin.acting_as(user.id),
                                             how="code")
        return SUCCESS
    directory_service.ensure_usable(user)
    audit.record("recovery.email_code", "success", origin=step.origin.acting_as(user.id),
                 user_id=user.id)
    step.context["username"] = user.username
    step.context["recovering"] = True
    step.signed_in(user.id, ["otp"])
    return SUCCESS
