"""The person's own account (``/account`` and its API): profile and e-mail address,
passkeys, the devices (browser sessions) and clients they are signed in on, password and
authenticator app (TOTP), and the consents they gave.

Every call carries an access token with scope ``account`` of this issuer, and acts for the
token's own user only. Changing credentials (adding or removing a passkey, the password, the
authenticator app) needs a sign-in within ``passkey.enrolment_window``, whatever the token's
age: an older one is refused with RFC 9470's ``insufficient_user_authentication`` and
``max_age``, and the page signs the person in again (with their passkey).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from identityctl.errors import Conflict, Forbidden, InvalidField, NotFound, Unauthorized
from identityctl.oauth.consent import scope_description
from identityctl.oauth.dpop import PresentedToken
from identityctl.passkey.authenticators import authenticator_fields
from identityctl.passkey.codec import CredentialReader
from identityctl.security.tokens import ENROLMENT_LINK_TYP, require_scope
from identityctl.services import audit
from identityctl.services.accounts import email_codes, recovery, sessions, totp
from identityctl.services.accounts.passkeys import ceremonies
from identityctl.services.accounts.passkeys import sessions as ceremony_sessions
from identityctl.services.accounts.passkeys.admin import delete_credential, rename_credential
from identityctl.services.clients import grants as grants_service
from identityctl.services.clients.bearer import verify_presented
from identityctl.services.clients.client import client_of
from identityctl.services.clients.revocation import end_grant
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import mail
from identityctl.services.directory import users as directory_service
from identityctl.services.directory.roles import roles_of
from identityctl.services.directory.users import is_usable
from identityctl.services.origin import RequestOrigin
from identityctl.store import catalog as catalog_store
from identityctl.store import directory
from identityctl.store import email_codes as code_store
from identityctl.store import grants as grant_store
from identityctl.store import oauth as oauth_store
from identityctl.store import passkeys as passkey_store
from identityctl.store import recovery as recovery_store
from identityctl.store import sessions as session_store
from identityctl.store.db import transaction
from identityctl.store.directory import UserRecord
from identityctl.store.oauth import IssuedToken

ACCOUNT_SCOPE = "account"
ACCOUNT_CLIENT_ID = "identityctl-account"
#: A link to add a passkey on another device works this long, once.
ENROLMENT_LINK_TTL = 600


@dataclass(frozen=True, slots=True)
class AccountHolder:
    """Who an account call acts for, and when they last signed in."""

    user: UserRecord
    auth_time: float
    #: The request, acting as ``account:<userId>`` (what the audit log names).
    origin: RequestOrigin
    #: How they signed in (RFC 8176 values of the token's ``amr``).
    amr: tuple[str, ...] = ()
    #: The token's grant (``sid``): which browser session this page was signed in through.
    grant_id: str | None = None


def account_holder(ctx: ServiceContext, presented: PresentedToken | None,
                   origin: RequestOrigin) -> AccountHolder:
    """The user an account call (from ``origin``) acts for: its access token's, with scope
    ``account``."""
    if presented is None:
        raise Unauthorized("Your account needs 'Authorization: Bearer <token>' (sign in on "
                           "the account page).", code="missing_token",
                           headers={"WWW-Authenticate": 'Bearer realm="identityctl"'})
    claims = bearer_claims(ctx, presented, audience=ctx.config.issuer)
    require_scope(claims, ACCOUNT_SCOPE)
    user = directory.find_user_by_id(str(claims["sub"]))
    if user is None or not is_usable(user):
        raise Unauthorized("The account is disabled or no longer exists.",
                           code="user_inactive")
    return AccountHolder(user=user, auth_time=float(claims.get("auth_time") or 0),
                         origin=origin.acting_as(f"account:{user.id}"),
                         amr=tuple(claims.get("amr") or ()),
                         grant_id=str(claims["sid"]) if claims.get("sid") else None)


def bearer_claims(ctx: ServiceContext, presented: PresentedToken, *,
                  audience: str) -> dict[str, Any]:
    """The claims of a token presented to an API of ``audience`` (the account API's, the
    admin API's); a token that is not live, or is another API's, is 401 with RFC 6750's
    challenge (§3.1 ``invalid_token``), so a client knows to get a new one. A DPoP refusal
    keeps its own challenge."""
    try:
        return verify_presented(ctx, presented, audience=audience)
    except Unauthorized as refusal:
        refusal.headers.setdefault("WWW-Authenticate",
                                   'Bearer realm="identityctl", error="invalid_token"')
        raise


def require_recent_sign_in(ctx: ServiceContext, holder: AccountHolder) -> None:
    """Changing credentials needs a fresh sign-in (RFC 9470 step-up)."""
    require_sign_in_within(holder.auth_time, ctx.config.passkey.enrolment_window)


def require_sign_in_within(auth_time: float, window: int) -> None:
    """RFC 9470 step-up, the one rule of the account API and the admin API: a sign-in more
    than ``window`` seconds ago is 401 ``insufficient_user_authentication`` with the
    ``max_age`` the page signs in again with."""
    if time.time() - auth_time > window:
        raise Unauthorized(
            "This change needs a recent sign-in; sign in again with your passkey.",
            code="sign_in_too_old", headers={"WWW-Authenticate": (
                f'Bearer error="insufficient_user_authentication", max_age={window}')})


def profile(ctx: ServiceContext, holder: AccountHolder) -> dict[str, Any]:
    """The person, their roles, whether their address is confirmed, the code on its way to
    an address (``emailPending``: until it expires), and their recovery codes left."""
    address = str(holder.user.attributes.get("email") or "").strip().lower()
    pending = code_store.pending(holder.user.id)
    return {**holder.user.to_api(), "roles": [role.name for role in roles_of(holder.user.id)],
            "authTime": holder.auth_time,
            "emailVerified": bool(address)
            and recovery_store.verified_address(holder.user.id) == address,
            "emailPending": {"address": pending.address, "expiresAt": pending.expires_at}
            if pending is not None and pending.expires_at > time.time() else None,
            "canSendEmail": ctx.config.email.enabled,
            "recoveryCodesLeft": recovery.recovery_codes_left(holder.user.id),
            "passwordsAllowed": directory_service.passwords_allowed(holder.user),
            "totpEnrolled": totp.is_enrolled(holder.user.id)}


def send_email_code(ctx: ServiceContext, holder: AccountHolder, address: Any, *,
                    language: str) -> dict[str, Any]:
    """A code to ``address``: the person's own (to confirm it) or the one they want instead
    (it replaces the old only once the code comes back). Another address needs a recent
    sign-in: recovery mail goes to it."""
    current = str(holder.user.attributes.get("email") or "").strip().lower()
    if not isinstance(address, str) or address.strip().lower() != current:
        require_recent_sign_in(ctx, holder)
    pending = email_codes.send_address_code(ctx, holder.user, address, language=language,
                                            origin=holder.origin)
    return {"address": pending.address, "expiresAt": pending.expires_at}


def confirm_email_code(ctx: ServiceContext, holder: AccountHolder, code: Any
                       ) -> dict[str, Any]:
    """The code the person typed: the address it went to is theirs, confirmed."""
    address = email_codes.confirm_address_code(ctx, holder.user, code,
                                               origin=holder.origin)
    return {"address": address, "emailVerified": True}


def new_recovery_codes(ctx: ServiceContext, holder: AccountHolder) -> list[str]:
    """Fresh recovery codes (after a recent sign-in); the old ones stop working."""
    require_recent_sign_in(ctx, holder)
    return recovery.new_recovery_codes(holder.user.id, origin=holder.origin)


# --- passkeys ---------------------------------------------------------------------------------


def passkeys(ctx: ServiceContext, holder: AccountHolder) -> list[dict[str, Any]]:
    """The person's passkeys, each with its authenticator's name and icons."""
    return [{**record.to_api(),
             **authenticator_fields(record.aaguid, base_url=ctx.config.base_url)}
            for record in passkey_store.list_credentials(holder.user.id)]


def webauthn_user(ctx: ServiceContext, holder: AccountHolder) -> dict[str, str]:
    """What the page tells the person's browser about them (the Signal API: which of their
    passkeys still count, the names to show): the relying party and their user handle."""
    return {"rpId": ctx.config.passkey.rp_id, "userId": holder.user.user_handle,
            "name": holder.user.username, "displayName": ceremonies.display_name(holder.user)}


def rename_passkey(holder: AccountHolder, credential_id: str, name: Any) -> dict[str, Any]:
    return rename_credential(holder.user.id, credential_id, name, origin=holder.origin).to_api()


def delete_passkey(ctx: ServiceContext, holder: AccountHolder, credential_id: str) -> None:
    """Remove one of the person's passkeys; never their last way to sign in."""
    require_recent_sign_in(ctx, holder)
    own = passkey_store.list_credentials(holder.user.id)
    if not any(record.credential_id == credential_id for record in own):
        raise NotFound("You have no passkey with this id.", code="credential_not_found")
    if len(own) == 1 and not holder.user.password_hash is not None:
        raise Conflict("This is your only way to sign in: add another passkey or a password "
                       "first.", code="last_credential")
    [removed] = [record for record in own if record.credential_id == credential_id]
    with transaction():
        delete_credential(holder.user.id, credential_id, origin=holder.origin)
        mail.notify(ctx, holder.user, "passkey_removed", name=removed.name)


def start_passkey(ctx: ServiceContext, holder: AccountHolder) -> ceremonies.CeremonyStart:
    """Add a passkey on this device: the creation options for the person."""
    require_recent_sign_in(ctx, holder)
    return ceremonies.start_registration(ctx, user_id=holder.user.id,
                                         rp_id=ctx.config.passkey.rp_id,
                                         origin=holder.origin)


def finish_passkey(ctx: ServiceContext, *, user_id: str, credential: CredentialReader,
                   session_token: str, name: Any, origin: RequestOrigin, language: str,
                   how: str = "account") -> dict[str, Any]:
    """The passkey the person's device made, for the ceremony ``session_token`` started for
    ``user_id`` (another person's ceremony token is refused); unnamed, it is named after
    its authenticator in ``language``. The person is told by e-mail (``how``: on the
    account page, or with an invitation)."""
    session = ceremony_sessions.open_session(session_token, ceremony=passkey_store.REGISTRATION,
                                             now=time.time())
    if session.user_id != user_id:
        raise Forbidden("This passkey ceremony is another person's.",
                        code="token_for_another_user")
    registered = ceremonies.finish_registration(
        ctx, credential=credential, session_token=session_token, credential_name=name,
        origin=origin, language=language)
    with transaction():
        mail.notify(ctx, directory.get_user(user_id), "passkey_added", name=registered.name,
                    how=how)
    return registered.to_api()


def enrolment_link(ctx: ServiceContext, holder: AccountHolder) -> dict[str, Any]:
    """A one-time link (and its QR code's text) with which another device adds a passkey for
    this person, for ``ENROLMENT_LINK_TTL`` seconds. It lives in the URL's fragment, which
    browsers never send to a server or in a Referer."""
    require_recent_sign_in(ctx, holder)
    token = ctx.tokens.sign({"sub": holder.user.id, "aud": ctx.config.issuer},
                            typ=ENROLMENT_LINK_TYP, ttl=ENROLMENT_LINK_TTL)
    audit.record("passkey.enrolment_link", "success", origin=holder.origin,
                 user_id=holder.user.id)
    url = f"{ctx.config.base_url}/account/enrol#{token}"
    return {"url": url, "expiresAt": time.time() + ENROLMENT_LINK_TTL,
            "qrCode": recovery.qr_code(url)}


def start_linked_passkey(ctx: ServiceContext, link_token: str, *,
                         origin: RequestOrigin) -> tuple[str, ceremonies.CeremonyStart]:
    """The other device opened the link: the link is spent, and the ceremony starts for the
    person it was made for. Returns their username (shown on the page) and the ceremony."""
    claims = ctx.tokens.verify_enrolment_link(link_token)
    if not oauth_store.use_once(IssuedToken(jti=str(claims["jti"]),
                                            expires_at=float(claims["exp"]))):
        raise Unauthorized("This link was used already; ask for a new one (on the account "
                           "page, or from the person who invited you).", code="link_used")
    user = directory.find_user_by_id(str(claims["sub"]))
    if user is None or not is_usable(user):
        raise Unauthorized("The account is disabled or no longer exists.",
                           code="user_inactive")
    return user.username, ceremonies.start_registration(
        ctx, user_id=user.id, rp_id=ctx.config.passkey.rp_id, origin=origin)


def finish_linked_passkey(ctx: ServiceContext, link_token: str, *, credential: CredentialReader,
                          session_token: str, name: Any, origin: RequestOrigin,
                          language: str) -> dict[str, Any]:
    """The other device's passkey: it shows the (spent) link again, and the ceremony must be
    the one started for the link's person."""
    claims = ctx.tokens.verify_enrolment_link(link_token)
    return finish_passkey(ctx, user_id=str(claims["sub"]), credential=credential,
                          session_token=session_token, name=name,
                          origin=origin, language=language,
                          how="invite" if claims.get("purpose") == "invite" else "account")


# --- signed-in clients, password, consents ------------------------------------------------------


def signed_in_clients(holder: AccountHolder) -> list[dict[str, Any]]:
    return [record.to_api() for record in grant_store.signed_in_clients(holder.user.id)]


def sign_out_client(ctx: ServiceContext, holder: AccountHolder, family: str) -> None:
    """End one of the person's token families: that client's refresh fails from now on."""
    application_id = grant_store.family_of(holder.user.id, family)
    if application_id is None:
        raise NotFound("You have no session with this id.", code="session_not_found")
    end_grant(ctx, family, client_of(catalog_store.get_application(application_id)))
    audit.record("account.session_end", "success", origin=holder.origin, user_id=holder.user.id,
                 details={"family": family})


# --- devices: the browser sessions the person is signed in on ------------------------------


def _this_session(holder: AccountHolder) -> str | None:
    """The browser session this page signed in through (None: a token from elsewhere)."""
    return session_store.session_of_grant(holder.grant_id) if holder.grant_id else None


def signed_in_devices(ctx: ServiceContext, holder: AccountHolder) -> list[dict[str, Any]]:
    """Every live browser session of the person, this page's first, then the newest: the
    browser and system in plain words, from where, since and last seen, the applications
    signed in through it, and which one is this page's."""
    live = sessions.list_user_sessions(ctx, holder.user.id)
    this = _this_session(holder)
    applications = session_store.applications_of([session.id for session in live])
    return [{"id": session.public_id, **sessions.describe_browser(session.user_agent),
             "address": session.client_address, "signedInAt": session.created_at,
             "lastSeenAt": session.last_seen_at, "current": session.id == this,
             "applications": [{"clientId": client_id, "name": name}
                              for client_id, name in applications[session.id]]}
            for session in sorted(live, key=lambda session: (session.id != this,
                                                             -session.created_at))]


def sign_out_device(ctx: ServiceContext, holder: AccountHolder, device_id: str) -> None:
    """End one of the person's browser sessions; its applications are signed out with it
    (back-channel logout)."""
    session = next((session for session in sessions.list_user_sessions(ctx, holder.user.id)
                    if session.public_id == device_id), None)
    if session is None:
        raise NotFound("You are not signed in on such a device (any more).",
                       code="device_not_found")
    sessions.end_sessions(ctx, [session.id], origin=holder.origin,
                          reason="signed out on the account page")


#: What "sign out" ends: every session but this page's, or every one.
SIGN_OUT_SCOPES = ("others", "everywhere")


def sign_out_devices(ctx: ServiceContext, holder: AccountHolder, scope: str) -> int:
    """Sign the person out of every device but this one (``others``) or of every one
    (``everywhere``), each with back-channel logout; how many sessions ended."""
    if scope not in SIGN_OUT_SCOPES:
        raise InvalidField("scope", "must be 'others' or 'everywhere'")
    keep = _this_session(holder) if scope == "others" else None
    ending = [session_id for session_id in session_store.open_session_ids(holder.user.id)
              if session_id != keep]
    return sessions.end_sessions(ctx, ending, origin=holder.origin,
                                 reason=f"signed out {scope} on the account page")


def change_password(ctx: ServiceContext, holder: AccountHolder, new_password: str) -> None:
    """Set or change the person's password (after a recent sign-in)."""
    require_recent_sign_in(ctx, holder)
    directory_service.set_password(holder.user.id, new_password, origin=holder.origin)


def start_totp(ctx: ServiceContext, holder: AccountHolder) -> dict[str, Any]:
    """Set up an authenticator app (after a recent sign-in): its QR code and secret; it is
    active once :func:`confirm_totp` gets a first code."""
    require_recent_sign_in(ctx, holder)
    return totp.start_enrolment(ctx, holder.user, origin=holder.origin)


def confirm_totp(ctx: ServiceContext, holder: AccountHolder, code: str) -> None:
    totp.confirm_enrolment(ctx, holder.user, code, origin=holder.origin)


def remove_totp(ctx: ServiceContext, holder: AccountHolder) -> None:
    """Remove the authenticator app (after a recent sign-in)."""
    require_recent_sign_in(ctx, holder)
    totp.remove(ctx, holder.user, origin=holder.origin)


def consents(holder: AccountHolder) -> list[dict[str, Any]]:
    """The applications the person allowed; not this page itself, which a person cannot
    take back while using it."""
    return [{**grant.to_api(),
             "scopeDescriptions": [scope_description(scope) for scope in grant.scopes]}
        for grant in grants_service.list_grants(user=holder.user.id)
        if grant.client_id != ACCOUNT_CLIENT_ID]


def revoke_consent(ctx: ServiceContext, holder: AccountHolder, client_id: str) -> int:
    return grants_service.revoke_grant(ctx, holder.user.id, client_id, origin=holder.origin)
