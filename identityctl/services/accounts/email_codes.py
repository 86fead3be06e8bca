"""One-time codes by e-mail in flows: EmailExecutor sends one, OTPExecutor checks it.

- ``EmailExecutor`` mode ``verify`` (sign-up): a code to the address the person just gave;
  the flow goes on without it (``onFailure``) when there is no address or no mail.
- ``EmailExecutor`` mode ``recovery``: a code to the verified address of the account the
  person names (by username or that address). Every name gets the same answer and the same
  work: for a name with no verified address the message is written and not sent.
- ``OTPExecutor``: the code, for this execution only (the code's digest binds the execution
  id, which only the browser that asked holds), within ``email.code_ttl``; at most
  ``email.code_attempts`` wrong codes per execution (then the execution ends), and wrong
  codes per account are throttled like passwords, from all addresses together.

On the account page (:func:`send_address_code`, :func:`confirm_address_code`): a code to
the person's address, or to the one they want instead, which they type back there; the
address is proven (and becomes their ``email``) only then, the old one stays until it is.
At most ``email.code_attempts`` wrong codes per code, throttled per account like passwords;
at most ``CODES_PER_HOUR`` codes per person and ``CODE_MAILS_PER_HOUR`` mails per address.

Only a keyed digest of a code is stored (the execution's context, the account's pending
code), never the code; the queued message holds it until it is sent (services/delivery/mail.py
drops the body then).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from identityctl.errors import BadRequest, TooManyRequests
from identityctl.flow.engine import SUCCESS, TaskOutcome
from identityctl.security import codes
from identityctl.security.email_address import EMAIL, checked_address
from identityctl.services.attempts import CredentialAttempt
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import mail
from identityctl.services.directory import users as directory_service
from identityctl.store import audit, db, directory, outbox
from identityctl.store import email_codes as code_store
from identityctl.store import keys as key_store
from identityctl.store import recovery as recovery_store
from identityctl.store.directory import UserRecord
from identityctl.store.email_codes import PendingCode
from identityctl.store.passkeys import NOBODY

if TYPE_CHECKING:
    from identityctl.services.flows.executors import StepRequest

#: The secret the digests of e-mailed codes are keyed with.
CODE_SECRET = "one-time-codes"
OTP_ACTION = "flow.otp"
#: Codes one execution may have sent (the first and two more on request).
SENDS_PER_EXECUTION = 3
#: Recovery messages one address gets per hour, whoever asks (no mail bombing).
RECOVERY_MAILS_PER_HOUR = 5
#: Mails an address gets per hour before the account page sends it no more codes.
CODE_MAILS_PER_HOUR = RECOVERY_MAILS_PER_HOUR
#: Codes the account page sends one person per hour, to whichever addresses.
CODES_PER_HOUR = 5
HOUR = 3600
ADDRESS_CODE_ACTION = "account.email_code"
VERIFY, RECOVERY = "verify", "recovery"
#: The address probed for a name without one: no message is ever queued to it, so the probe
#: reads as little as for a real address (never the stand-ins, which have no address).
UNADDRESSED = "nobody@invalid"


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
    """EmailExecutor, mode ``verify``: a code to the signed-up person's address."""
    user = directory.get_user(step.user_id) if step.user_id else None
    address = str((user.attributes if user else {}).get("email") or "").strip()
    if user is None or not address or not step.ctx.config.email.enabled:
        return TaskOutcome("failure", "email_not_sent")
    try:
        code = _new_code(step, purpose=VERIFY, user_id=user.id, address=address)
    except TooManySends:
        return TaskOutcome("incomplete", "too_many_codes")
    mail.queue(step.ctx, "verify_email", to=address, language=step.language, code=code,
               brand=mail.brand_of(step.application),
               minutes=str(step.ctx.config.email.code_ttl // 60))
    step.additional["emailSentTo"] = address
    return SUCCESS


def account_named(name: str) -> UserRecord | None:
    """The account a person names by username or by its verified address (both looked up
    for a name with an @, found or not: the same work either way)."""
    user = directory.find_user_by_username(name) if name else None
    if "@" in name:
        user_id = recovery_store.user_with_verified_address(name)
        by_address = directory.find_user_by_id(user_id or NOBODY)
        user = user or by_address
    return user


def send_recovery(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """EmailExecutor, mode ``recovery``: a code to the named account's verified address,
    and the same answer (and work) for any other name."""
    if not step.ctx.config.email.enabled:  # the deployment's fact, the same for every name
        return TaskOutcome("failure", "email_not_configured")
    name = str(step.context.get("username") or "").strip()
    user = account_named(name)
    # The same reads for every name: nothing in the timing tells whether it is known.
    address = recovery_store.verified_address(user.id if user else NOBODY)
    recently = outbox.sent_to_since(mail.EMAIL, address or UNADDRESSED, time.time() - 3600)
    deliverable = (address is not None and directory_service.is_usable(user)
                   and recently < RECOVERY_MAILS_PER_HOUR)
    try:
        code = _new_code(step, purpose=RECOVERY, user_id=user.id if deliverable and user
                         else None, address=address or "")
    except TooManySends:
        return TaskOutcome("incomplete", "too_many_codes")
    mail.queue(step.ctx, "recovery_code", to=address or UNADDRESSED,
               language=mail.language_of(user, step.language) if user else step.language,
               send=deliverable, code=code, brand=mail.brand_of(step.application),
               minutes=str(step.ctx.config.email.code_ttl // 60))
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
    with CredentialAttempt(step.ctx, action=OTP_ACTION, client_address=step.client_address,
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
            directory_service.address_proven(user.id, sent["address"], actor=user.id,
                                             how="code", client_address=step.client_address)
        return SUCCESS
    directory_service.ensure_usable(user)
    audit.record("recovery.email_code", "success", actor=user.id, user_id=user.id,
                 client_address=step.client_address)
    step.context["username"] = user.username
    step.context["recovering"] = True
    step.signed_in(user.id, ["otp"])
    return SUCCESS


# --- the account page: confirming (or changing) the address --------------------------------


def _address_binding(user_id: str, address: str) -> str:
    # The code proves this address for this person, nothing else.
    return f"address:{user_id}:{address.lower()}"


def send_address_code(ctx: ServiceContext, user: UserRecord, address: object, *,
                      language: str, client_address: str, actor: str) -> PendingCode:
    """E-mail a code to ``address`` (the person's own, or the one they want instead); any
    earlier code of theirs stops working. Nothing changes until the code comes back
    (:func:`confirm_address_code`)."""
    mail.require_mail(ctx)
    address = checked_address(address, field=EMAIL)
    now = time.time()
    earlier = code_store.pending(user.id)
    sends, since = ((earlier.sends + 1, earlier.sends_since)
                    if earlier is not None and earlier.sends_since > now - HOUR else (1, now))
    if sends > CODES_PER_HOUR \
            or outbox.sent_to_since(mail.EMAIL, address, now - HOUR) >= CODE_MAILS_PER_HOUR:
        audit.record(ADDRESS_CODE_ACTION, "throttled", actor=actor, user_id=user.id,
                     client_address=client_address, details={"code": "too_many_codes"})
        raise TooManyRequests("Too many codes were sent; try again in an hour.",
                              retry_after=int(since + HOUR - now) + 1, code="too_many_codes")
    code, ttl = codes.new_code(), ctx.config.email.code_ttl
    pending = PendingCode(user_id=user.id, address=address,
                          code_hash=codes.digest(key_store.service_secret(CODE_SECRET),
                                                 binding=_address_binding(user.id, address),
                                                 code=code),
                          expires_at=now + ttl, tries=0, sends=sends, sends_since=since)
    with db.transaction():
        code_store.replace(pending)
        mail.queue(ctx, "confirm_email", to=address, language=mail.language_of(user, language),
                   code=code, minutes=str(ttl // 60))
        audit.record("email.code_sent", "success", actor=actor, user_id=user.id,
                     client_address=client_address,
                     details={"change": address.lower() != _current_address(user)})
    return pending


def _current_address(user: UserRecord) -> str:
    return str(user.attributes.get(EMAIL) or "").strip().lower()


def confirm_address_code(ctx: ServiceContext, user: UserRecord, code: object, *,
                         client_address: str, actor: str) -> str:
    """The code the person typed back: the address it went to is proven theirs and is their
    ``email`` from now on (another one's is replaced, and its owner told). The address."""
    pending = code_store.pending(user.id)
    if pending is None or pending.tries >= ctx.config.email.code_attempts:
        raise BadRequest("There is no code to enter; ask for a new one.",
                         code="email_code_not_sent")
    if pending.expires_at <= time.time():
        raise BadRequest("This code has expired; ask for a new one.", code="email_code_expired")
    with CredentialAttempt(ctx, action=ADDRESS_CODE_ACTION, client_address=client_address,
                           password=True) as attempt:
        attempt.actor = actor
        attempt.check(user.username)
        attempt.at_stake(user.id)
        if not codes.matches(key_store.service_secret(CODE_SECRET),
                             binding=_address_binding(user.id, pending.address),
                             code=code.strip() if isinstance(code, str) else "",
                             expected=pending.code_hash):
            code_store.count_try(user.id, pending.code_hash)
            attempt.fail("email_code_invalid")
            raise BadRequest("This is not the code we sent; check it and try again.",
                             code="email_code_invalid")
    attempt.succeeded()
    with db.transaction():
        if not code_store.use(user.id, pending.code_hash):  # another request spent it
            raise BadRequest("There is no code to enter; ask for a new one.",
                             code="email_code_not_sent")
        if pending.address.lower() != _current_address(user):
            mail.notify(ctx, user, "email_changed", address=pending.address)  # to the old one
            directory_service.update_user(user.id, attributes={**user.attributes,
                                                                EMAIL: pending.address},
                                          actor=actor)
        directory_service.address_proven(user.id, pending.address, actor=actor, how="code",
                                         client_address=client_address)
    return pending.address

