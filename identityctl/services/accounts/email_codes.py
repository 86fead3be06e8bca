"""One-time codes by e-mail: their rules, and the account page's codes. In flows,
EmailExecutor sends one and OTPExecutor checks it (services/flows/executors/email.py):

- ``EmailExecutor`` mode ``verify`` (sign-up): a code to the address the person just gave;
  the flow goes on without it (``onFailure``) when there is no address or no mail.
- ``EmailExecutor`` mode ``recovery``: a code to the verified address of the account the
  person names (by that address, or username: :func:`account_named`). Every name gets the
  same answer and the same work: for a name with no verified address the message is
  written and not sent.
- Both are asked for by someone nobody knows yet, so each is mailed only within
  :func:`code_mail_allowed`: a share per (address, requester) and a ceiling per address,
  so one requester spends only their own share and a flood to one mailbox is bounded.
- ``OTPExecutor``: the code, for this execution only (the code's digest binds the execution
  id, which only the browser that asked holds), within ``email.code_ttl``; at most
  ``email.code_attempts`` wrong codes per execution (then the execution ends), and wrong
  codes per account are throttled like passwords, from all addresses together.

On the account page (:func:`send_address_code`, :func:`confirm_address_code`): a code to
the person's address, or to the one they want instead, which they type back there; the
address is proven (and becomes their ``email``) only then, the old one stays until it is.
At most ``email.code_attempts`` wrong codes per code, throttled per account like passwords;
at most ``CODES_PER_HOUR`` codes per person. That allowance is the person's own (the page is
theirs, bearer-authenticated): what strangers asked for never refuses it, and it spends
nothing of the strangers' allowance. Security notices count in neither.

Only a keyed digest of a code is stored (the execution's context, the account's pending
code), never the code; the queued message holds it until it is sent (services/delivery/mail.py
drops the body then).
"""

from __future__ import annotations

import time

from identityctl.errors import BadRequest, TooManyRequests
from identityctl.security import codes
from identityctl.security.email_address import EMAIL, checked_address
from identityctl.services import audit, throttle
from identityctl.services.attempts import CredentialAttempt
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import mail
from identityctl.services.directory import users as directory_service
from identityctl.services.origin import RequestOrigin
from identityctl.store import db, directory
from identityctl.store import email_codes as code_store
from identityctl.store import keys as key_store
from identityctl.store import recovery as recovery_store
from identityctl.store.directory import UserRecord
from identityctl.store.email_codes import PendingCode
from identityctl.store.passkeys import NOBODY

#: The secret the digests of e-mailed codes are keyed with.
CODE_SECRET = "one-time-codes"
#: Codes (a sign-up's, a recovery's) mailed to one address per hour for one requester: the
#: requester's own share, which nobody else's requests spend.
CODE_MAILS_PER_REQUESTER = 5
#: Codes mailed to one address per hour for all requesters together: a flood's bound.
CODE_MAILS_PER_ADDRESS = 30
#: Codes the account page sends one person per hour, to whichever addresses.
CODES_PER_HOUR = 5
HOUR = 3600
ADDRESS_CODE_ACTION = "account.email_code"


def code_mail_allowed(address: str, origin: RequestOrigin) -> bool:
    """Whether a code that nobody signed in asked for (from ``origin``) may be mailed to
    ``address``: the requester has some of their share left, and the address some of its
    ceiling. Only :func:`count_code_mail` spends them."""
    return throttle.code_mails_left(address, origin=origin,
                                    per_requester=CODE_MAILS_PER_REQUESTER,
                                    per_recipient=CODE_MAILS_PER_ADDRESS, window=HOUR)


def count_code_mail(address: str, origin: RequestOrigin) -> None:
    """(In the transaction that queues it.) A code mailed to ``address`` for ``origin``."""
    throttle.count_code_mail(address, origin=origin, window=HOUR)


def account_named(name: str) -> UserRecord | None:
    """The account a person names by its verified address or by username. A name with an @
    is the account that proved that address, and only when nobody did the account with that
    username: a username is anyone's choice, a proven address one person's, so nobody takes
    another's address by choosing it as a username, whenever they chose it. (Both are looked
    up for a name with an @, found or not: the same work either way.)"""
    user = directory.find_user_by_username(name) if name else None
    if "@" in name:
        user_id = recovery_store.user_with_verified_address(name)
        by_address = directory.find_user_by_id(user_id or NOBODY)
        user = by_address or user
    return user


# --- the account page: confirming (or changing) the address --------------------------------


def _address_binding(user_id: str, address: str) -> str:
    # The code proves this address for this person, nothing else.
    return f"address:{user_id}:{address.lower()}"


def send_address_code(ctx: ServiceContext, user: UserRecord, address: object, *,
                      language: str, origin: RequestOrigin) -> PendingCode:
    """E-mail a code to ``address`` (the person's own, or the one they want instead); any
    earlier code of theirs stops working. Nothing changes until the code comes back
    (:func:`confirm_address_code`)."""
    mail.require_mail(ctx)
    address = checked_address(address, field=EMAIL)
    now = time.time()
    earlier = code_store.pending(user.id)
    sends, since = ((earlier.sends + 1, earlier.sends_since)
                    if earlier is not None and earlier.sends_since > now - HOUR else (1, now))
    if sends > CODES_PER_HOUR:  # the person's own allowance, and nothing else
        audit.record(ADDRESS_CODE_ACTION, "throttled", origin=origin, user_id=user.id,
                     details={"code": "too_many_codes"})
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
                   code=code, count=ttl // 60)
        audit.record("email.code_sent", "success", origin=origin, user_id=user.id,
                     details={"change": address.lower() != _current_address(user)})
    return pending


def _current_address(user: UserRecord) -> str:
    return str(user.attributes.get(EMAIL) or "").strip().lower()


def confirm_address_code(ctx: ServiceContext, user: UserRecord, code: object, *,
                         origin: RequestOrigin) -> str:
    """The code the person typed back: the address it went to is proven theirs and is their
    ``email`` from now on (another one's is replaced, and its owner told). The address."""
    pending = code_store.pending(user.id)
    if pending is None or pending.tries >= ctx.config.email.code_attempts:
        raise BadRequest("There is no code to enter; ask for a new one.",
                         code="email_code_not_sent")
    if pending.expires_at <= time.time():
        raise BadRequest("This code has expired; ask for a new one.", code="email_code_expired")
    with CredentialAttempt(ctx, action=ADDRESS_CODE_ACTION, origin=origin,
                           password=True) as attempt:
        attempt.actor = origin.actor
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
                                          origin=origin)
        directory_service.address_proven(user.id, pending.address, origin=origin, how="code")
    return pending.address
