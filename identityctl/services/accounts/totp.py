"""Authenticator apps (TOTP, RFC 6238): a second step after a password.

- Only a person who signs in with a password sets one up, and not where the "passkeys only"
  rule holds (services/directory/users.ensure_passwords_allowed): a passkey needs no second
  factor. The account page shows the QR code and the secret; the seed is active once the
  person types a first code from their app.
- The seed is kept sealed (security/totp.py) under the deployment's secret ``totp-seeds``,
  bound to its account; it is never logged nor audited.
- Each accepted code spends its time step and every earlier one with one conditional update
  (store/totp.use_step): a code seen once opens nothing again, and of two requests with one
  code exactly one wins.
- Every code typed is a :class:`CredentialAttempt` counted like a password guess (per account
  at an address, per address, per account from all addresses), so the six digits cannot be
  guessed within their window, and a stranger blocks no one but themselves.
- A recovery code stands in for a lost phone: the TOTP step accepts one of the person's
  recovery codes instead (spent).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from identityctl.errors import BadRequest, Conflict
from identityctl.security import totp
from identityctl.services import audit
from identityctl.services.accounts.recovery import (
    RECOVERY_CODE_ACTION,
    qr_code,
    spend_recovery_code,
)
from identityctl.services.attempts import CredentialAttempt
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import mail
from identityctl.services.directory.users import ensure_passwords_allowed
from identityctl.services.origin import RequestOrigin
from identityctl.store import keys as key_store
from identityctl.store import totp as totp_store
from identityctl.store.db import transaction
from identityctl.store.directory import UserRecord

TOTP_ACTION = "flow.totp"
TOTP_SECRET = "totp-seeds"


def is_enrolled(user_id: str) -> bool:
    """Whether the person has an active authenticator app (a confirmed seed)."""
    return totp_store.is_active(user_id)


def start_enrolment(ctx: ServiceContext, user: UserRecord, *,
                    origin: RequestOrigin) -> dict[str, Any]:
    """A new seed for the person (pending until :func:`confirm_enrolment`): the QR code of its
    ``otpauth://`` URI and the secret as text, for an app that cannot scan."""
    if user.password_hash is None:
        raise Conflict("An authenticator app adds a code to your password, and you sign in "
                       "without one: your passkey needs no second step.",
                       code="totp_needs_password")
    ensure_passwords_allowed(user)
    if is_enrolled(user.id):
        raise Conflict("Your account has an authenticator app already: remove it first.",
                       code="totp_already_enrolled")
    issuer = urlsplit(ctx.config.issuer).hostname or ctx.config.issuer
    enrolment = totp.new_enrolment(account_name=user.username, issuer=issuer)
    with transaction():
        totp_store.start(user.id, totp.seal(key_store.service_secret(TOTP_SECRET),
                                            enrolment.secret, binding=user.id))
        audit.record("totp.enrolment_start", "success", origin=origin, user_id=user.id)
    return {"secret": enrolment.secret, "uri": enrolment.uri,
            "qrCode": qr_code(enrolment.uri)}


def confirm_enrolment(ctx: ServiceContext, user: UserRecord, code: str, *,
                      origin: RequestOrigin) -> None:
    """The first code from the person's app: the pending seed becomes active."""
    pending = totp_store.find(user.id)
    if pending is None or pending.confirmed:
        raise BadRequest("There is no authenticator app waiting to be confirmed: start "
                         "again.", code="totp_not_pending")
    _prove(ctx, user, code=code, recovery_code="", origin=origin, confirm=True)
    with transaction():
        audit.record("totp.enrol", "success", origin=origin, user_id=user.id)
        mail.notify(ctx, user, "totp_added")


def remove(ctx: ServiceContext, user: UserRecord, *, origin: RequestOrigin) -> None:
    """The person's authenticator app (active or pending) is removed."""
    with transaction():
        if not totp_store.remove(user.id):
            raise BadRequest("The account has no authenticator app.", code="totp_not_enrolled")
        audit.record("totp.remove", "success", origin=origin, user_id=user.id)
        mail.notify(ctx, user, "totp_removed")


def verify_second_step(ctx: ServiceContext, user: UserRecord, *, code: str,
                       recovery_code: str, origin: RequestOrigin) -> None:
    """A sign-in's second step: a code from the person's app, or one of their recovery codes
    (a lost phone). 400 ``invalid_totp_code`` / ``invalid_recovery_code`` when wrong."""
    _prove(ctx, user, code=code, recovery_code=recovery_code, origin=origin, confirm=False)


def _prove(ctx: ServiceContext, user: UserRecord, *, code: str, recovery_code: str,
           origin: RequestOrigin, confirm: bool) -> None:
    with_code = bool(code) or not recovery_code
    action = TOTP_ACTION if with_code else RECOVERY_CODE_ACTION
    with CredentialAttempt(ctx, action=action, origin=origin, password=True) as attempt:
        attempt.actor = user.username
        attempt.check(user.username)
        attempt.at_stake(user.id)
        right = _spend_code(user.id, code, confirm=confirm) if with_code \
            else spend_recovery_code(user.id, recovery_code)
        if not right:
            refusal = "invalid_totp_code" if with_code else "invalid_recovery_code"
            attempt.fail(refusal)
            raise BadRequest("That code is not right, or was used already." if with_code
                             else "That recovery code is not right, or was used already.",
                             code=refusal)
    attempt.succeeded()
    if not confirm:
        audit.record(action, "success", origin=origin.acting_as(user.id), user_id=user.id,
                     details={"with": "totp" if with_code else "recovery_code"})


def _spend_code(user_id: str, code: str, *, confirm: bool) -> bool:
    """Whether ``code`` is the seed's for a step not spent yet, and that step is now spent
    (``confirm``: the pending seed's, which becomes active)."""
    record = totp_store.find(user_id)
    if record is None or record.confirmed == confirm:
        return False
    secret = totp.unseal(key_store.service_secret(TOTP_SECRET), record.sealed_secret,
                         binding=user_id)
    step = totp.matching_step(secret, code, now=time.time(), after_step=record.last_step)
    return step is not None and totp_store.use_step(user_id, step, confirm=confirm)
