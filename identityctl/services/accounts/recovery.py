"""Getting back in without an admin: recovery codes, a new password in a recovery flow, and
invitations to enrol a first passkey.

- Recovery codes are made on request (account page, ``identityctl user recovery-codes``),
  shown once, kept as keyed digests, each used once (a conditional update: two requests
  with one code, one wins). New codes replace the old ones.
- ``RecoveryCodeExecutor``: a username (or verified address) and one of its codes; throttled
  per account like a password (services/flows/executors/recovery.py, as the next).
- ``CredentialSetter``: the recovering person's new password (the password policy applies).
- An invitation is a one-time link (the account page's link to add a passkey on another
  device, valid for days) with which a person who never had a password enrols a first
  passkey.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from identityctl.errors import BadRequest, Forbidden
from identityctl.security import codes
from identityctl.security.email_address import EMAIL, checked_address
from identityctl.security.tokens import ENROLMENT_LINK_TYP
from identityctl.services import audit
from identityctl.services.clients.client import client_of
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import mail
from identityctl.services.directory import users as directory_service
from identityctl.services.origin import RequestOrigin
from identityctl.store import db
from identityctl.store import keys as key_store
from identityctl.store import recovery as recovery_store
from identityctl.store.directory import UserRecord

RECOVERY_CODE_SECRET = "recovery-codes"
RECOVERY_CODE_ACTION = "flow.recovery_code"
#: How many recovery codes a person gets at a time.
RECOVERY_CODES = 10
#: An invitation works this long unless the admin says otherwise.
INVITE_DAYS = 7


def offers_recovery(application: dict[str, Any]) -> bool:
    """Whether ``application`` may run the RECOVERY flow. Recovery acts on an account beyond
    any one client (it ends in a new credential for everything the person uses here), so it
    runs only for applications an administrator made: a client that described itself
    (registered itself, or a client metadata document) is a stranger's, and may not send a
    person's recovery mail nor start a recovery the person never asked for."""
    return not client_of(application).described_itself


def ensure_recovery_offered(application: dict[str, Any]) -> None:
    """:func:`offers_recovery`, or 403 ``recovery_not_offered``."""
    if not offers_recovery(application):
        raise Forbidden("Account recovery is not offered through an application that "
                        "registered itself. Recover your account on this service's account "
                        "page, then sign in to the application again.",
                        code="recovery_not_offered")


def recovery_code_digest(code: str) -> str:
    return codes.digest(key_store.service_secret(RECOVERY_CODE_SECRET), binding="recovery",
                        code=codes.normalize_recovery_code(code))


def spend_recovery_code(user_id: str, code: str) -> bool:
    """Whether ``code`` was one of ``user_id``'s unused recovery codes, now spent (of two
    requests with one code, one wins)."""
    return recovery_store.use_code(recovery_code_digest(code), user_id) == user_id


def new_recovery_codes(user_id: str, *, origin: RequestOrigin) -> list[str]:
    """Fresh recovery codes for the user (the old ones stop working); shown once."""
    user = directory_service.require_user(user_id)
    made = [codes.new_recovery_code() for _ in range(RECOVERY_CODES)]
    with db.transaction():
        recovery_store.replace_codes(user.id, [recovery_code_digest(code) for code in made])
        audit.record("recovery_codes.create", "success", origin=origin, user_id=user.id,
                     details={"count": len(made)})
    return made


def confirm_email(id_or_username: str, *, origin: RequestOrigin) -> None:
    """An administrator vouches for the user's current ``email`` attribute (as a code sent
    there and typed back would): e-mail verified, usable for recovery."""
    user = directory_service.require_user(id_or_username)
    address = _address_of(user)
    with db.transaction():
        directory_service.address_proven(user.id, address, origin=origin, how="administrator")


def _address_of(user: UserRecord) -> str:
    """The user's ``email`` attribute, which must be one address (:func:`checked_address`)."""
    address = str(user.attributes.get(EMAIL) or "").strip()
    if not address:
        raise BadRequest(f"{user.username} has no e-mail address (attribute email).",
                         code="no_email_address")
    return checked_address(address, field=f"attributes.{EMAIL}")


def recovery_codes_left(user_id: str) -> int:
    return recovery_store.codes_left(user_id)


def invite(ctx: ServiceContext, id_or_username: str, *, send_email: bool,
           days: int = INVITE_DAYS, origin: RequestOrigin) -> dict[str, Any]:
    """A one-time link with which the user enrols a passkey (their first, or another),
    mailed to their ``email`` attribute when ``send_email``."""
    user = directory_service.require_user(id_or_username)
    directory_service.ensure_usable(user)
    address = None
    if send_email:
        mail.require_mail(ctx)
        address = _address_of(user)
    ttl = days * 86400
    token = ctx.tokens.sign({"sub": user.id, "aud": ctx.config.issuer, "purpose": "invite"},
                            typ=ENROLMENT_LINK_TYP, ttl=ttl)
    url = f"{ctx.config.base_url}/account/enrol#{token}"
    expires_at = time.time() + ttl
    with db.transaction():
        if address is not None:
            mail.queue(ctx, "invite", to=address, language=mail.language_of(user),
                       username=user.username, link=url,
                       expires=datetime.fromtimestamp(expires_at, UTC))
        audit.record("user.invite", "success", origin=origin, user_id=user.id,
                     details={"emailed": send_email, "days": days})
    return {"url": url, "expiresAt": expires_at, "emailedTo": address, "qrCode": qr_code(url)}


def qr_code(text: str) -> str:
    """``text`` as a QR code (an SVG data URI) a phone's camera reads off the screen."""
    import segno  # PERF: imported at the first QR code, not at every start

    return segno.make(text, error="m").svg_data_uri(scale=3)
