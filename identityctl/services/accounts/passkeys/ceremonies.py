"""Passkey registration and sign-in: the rules around the WebAuthn ceremonies.

Shared by the atomic REST API and the flow engine. A ceremony's state lives in the store
(``sessions``), so any instance can finish what another started. A finish either commits
everything it changes together with consuming the session token, or changes nothing and
leaves one audit event (``attempts``).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

from identityctl import i18n
from identityctl.errors import Conflict, InvalidField, MissingField, NotFound
from identityctl.passkey import codec
from identityctl.passkey.authenticators import authenticator_name
from identityctl.passkey.codec import CredentialReader, CredentialResponse
from identityctl.passkey.decoys import decoy_credentials
from identityctl.passkey.options import (
    COSE_ALGORITHMS,
    KnownCredential,
    RegistrationPolicy,
    creation_options,
    registration_policy,
    request_options,
)
from identityctl.passkey.verification import (
    AuthenticationExpectations,
    RegistrationExpectations,
    StoredPasskey,
    VerificationError,
    verify_authentication,
    verify_registration,
)
from identityctl.security.usernames import username_key
from identityctl.services import audit, throttle
from identityctl.services.accounts.passkeys.sessions import (
    ceremony_scope,
    consume_session,
    new_session,
    open_session,
    used_concurrently,
)
from identityctl.services.attempts import CredentialAttempt
from identityctl.services.context import ServiceContext
from identityctl.services.directory.users import ensure_usable, is_usable
from identityctl.services.origin import RequestOrigin
from identityctl.store import directory
from identityctl.store import keys as key_store
from identityctl.store import passkeys as store
from identityctl.store.db import transaction
from identityctl.store.directory import UserRecord

CHALLENGE_BYTES = 32
MAX_CREDENTIAL_NAME = 64
#: The name of the deployment's secret that decoy credentials are derived from.
DECOY_SECRET = "decoy-credentials"
REGISTER_EVENT = "passkey.register"
AUTHENTICATE_EVENT = "passkey.authenticate"


@dataclass(slots=True)
class CeremonyStart:
    #: WebAuthn JSON form (Base64URL strings): what parse*OptionsFromJSON takes.
    options: dict[str, Any]
    session_token: str


@dataclass(slots=True)
class RegisteredCredential:
    credential_id: str
    name: str
    created_at: float

    def to_api(self) -> dict[str, str]:
        return {"CredentialID": self.credential_id, "CredentialName": self.name,
                "CreatedAt": rfc3339(self.created_at)}


@dataclass(slots=True)
class AuthenticatedUser:
    user: UserRecord
    credential_id: str
    #: RFC 8176 style methods: "passkey", plus "hwk" for a device-bound (BE=0) credential.
    amr: list[str]
    user_verified: bool


def rfc3339(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- shared steps ---------------------------------------------------------------------------

def _require_rp_id(ctx: ServiceContext, rp_id: str | None) -> str:
    if rp_id is None or not rp_id.strip():
        raise MissingField("relyingPartyId")
    if rp_id != ctx.config.passkey.rp_id:
        raise InvalidField("relyingPartyId", f"this service's relying party is "
                           f"{ctx.config.passkey.rp_id!r}, got {rp_id!r}",
                           code="relying_party_mismatch")
    return rp_id


def _throttle_account(session: store.CeremonySessionRecord) -> str | None:
    """The account a sign-in's failures count against: the username its start named, with
    passkeys or with decoys alike (a name nobody has too: no enumeration by lockout).

    Usernameless sign-ins name no account before the key proved itself: the client address
    is their throttle. A session started before the start recorded the name reads it.
    """
    account = session.state.get("account")
    if account is None and session.user_id is not None:
        user = directory.find_user_by_id(session.user_id)
        account = user.username if user else None
    return account


def _known_credentials(user_id: str) -> list[KnownCredential]:
    return [KnownCredential(codec.decode(credential_id, field="credentialId"), transports)
            for credential_id, transports in store.credential_descriptors(user_id)]


def valid_credential_name(name: Any, *, field: str = "credentialName") -> str | None:
    """``name`` without surrounding blanks (1 to ``MAX_CREDENTIAL_NAME`` characters), or
    None when there is none (the passkey is named after its authenticator)."""
    if name is None or (isinstance(name, str) and not name.strip()):
        return None
    if not isinstance(name, str):
        raise InvalidField(field, f"must be a text of 1 to {MAX_CREDENTIAL_NAME} characters")
    if len(name.strip()) > MAX_CREDENTIAL_NAME:
        raise InvalidField(field, f"must be 1 to {MAX_CREDENTIAL_NAME} characters long; this "
                           f"one has {len(name.strip())}")
    return name.strip()


def authenticator_credential_name(aaguid: str, *, language: str, now: float) -> str:
    """The name of a passkey nobody named, in the person's ``language``: after the
    authenticator that made it ("Passkey in Google Password Manager"), else the day."""
    authenticator = authenticator_name(aaguid)
    if authenticator is not None:
        return i18n.translate(language, "Passkey in {authenticator}",
                              authenticator=authenticator)
    return i18n.translate(language, "Passkey from {date}",
                          date=datetime.fromtimestamp(now, UTC).date())


def display_name(user: UserRecord) -> str:
    """What the person's authenticators show under the username (WebAuthn displayName)."""
    parts = [user.attributes.get(key) for key in ("given_name", "family_name")]
    full = " ".join(part for part in parts if isinstance(part, str) and part.strip())
    return full or user.username


# --- registration -------------------------------------------------------------------------

def start_registration(ctx: ServiceContext, *, user_id: str, rp_id: str,
                       rp_name: str | None = None,
                       authenticator_selection: dict | None = None,
                       attestation: str | None = None,
                       origin: RequestOrigin, scope: str | None = None,
                       conditional: bool = False) -> CeremonyStart:
    """Creation options for a new passkey of ``user_id`` and the session to finish it.

    ``scope`` says which earlier start of the user's registration this one replaces (see
    :func:`ceremony_scope`, the default). ``conditional``: the page may create it with
    Conditional Create, so its finish accepts a credential made without user presence."""
    rp_id = _require_rp_id(ctx, rp_id)
    if user_id is None or not user_id.strip():
        raise MissingField("userId")
    config = ctx.config.passkey
    if config.restricts_authenticators:
        attestation = None  # the deployment's own: its policy needs the attestation
    policy = registration_policy(
        authenticator_selection=authenticator_selection, attestation=attestation,
        defaults=RegistrationPolicy(
            user_verification=config.user_verification, resident_key=config.resident_key,
            authenticator_attachment=config.authenticator_attachment,
            attestation=config.attestation,
            algorithms=tuple(int(COSE_ALGORITHMS[name]) for name in config.algorithms)))
    user = directory.get_user(user_id)
    ensure_usable(user)
    # A refused account or address gets no new challenge to guess against.
    throttle.ensure_allowed(ctx, action=REGISTER_EVENT, account=user.username,
                            origin=origin, start=True)
    challenge = secrets.token_bytes(CHALLENGE_BYTES)
    options = creation_options(
        rp_id=rp_id, rp_name=rp_name.strip() if rp_name and rp_name.strip() else config.rp_name,
        user_handle=codec.decode(user.user_handle, field="userHandle"),
        user_name=user.username, user_display_name=display_name(user), challenge=challenge,
        timeout_ms=config.timeout_ms, policy=policy,
        exclude_credentials=_known_credentials(user.id))
    state = {"userVerification": policy.user_verification,
             "authenticatorAttachment": policy.authenticator_attachment,
             "attestation": policy.attestation, "algorithms": list(policy.algorithms)}
    if conditional:
        state["userPresence"] = "optional"
    return CeremonyStart(options=options, session_token=new_session(
        ctx, ceremony=store.REGISTRATION, user_id=user.id,
        scope=scope or ceremony_scope(client_address=origin.address),
        origin=origin, challenge=challenge, state=state))


def finish_registration(ctx: ServiceContext, *, credential: CredentialReader, session_token: str,
                        credential_name: str | None, origin: RequestOrigin,
                        language: str = i18n.DEFAULT) -> RegisteredCredential:
    """Verify the authenticator's attestation and store the credential (WebAuthn §7.1),
    named ``credential_name`` or else after its authenticator, in ``language``."""
    now = time.time()
    with CredentialAttempt(ctx, action=REGISTER_EVENT,
                           origin=origin) as attempt:
        name = valid_credential_name(credential_name)
        response = credential(store.REGISTRATION)
        session = open_session(session_token, ceremony=store.REGISTRATION, now=now)
        attempt.user_id = session.user_id
        user = directory.get_user(session.user_id)
        ensure_usable(user)
        attempt.check(user.username)
        attempt.at_stake()  # the user's own registration, with the user's token
        state = session.state
        verified = verify_registration(response, expected=RegistrationExpectations(
            challenge=codec.decode(session.challenge, field="challenge"), rp_id=session.rp_id,
            allowed_origins=ctx.config.passkey.accepted_origins,
            user_verification_required=state["userVerification"] == "required",
            algorithms=tuple(state["algorithms"]),
            authenticator_attachment=state["authenticatorAttachment"],
            user_presence_required=state.get("userPresence") != "optional"))
        if ctx.config.passkey.restricts_authenticators:
            # PERF: fido2 loads with the first registration a policy checks, not at every start.
            from identityctl.services.accounts.passkeys import attestation as attestation_policy

            attestation_policy.check_registration(ctx.config.passkey, aaguid=verified.aaguid,
                                                  response=response)
        credential_id = codec.encode(verified.credential_id)
        if store.find_credential(credential_id) is not None:
            raise Conflict("This credential is already registered; use another authenticator.",
                           code="credential_already_registered")
        with transaction():
            consume_session(session, now)
            record = store.insert_credential(
                credential_id=credential_id, user_id=user.id, public_key=verified.public_key,
                algorithm=verified.algorithm, sign_count=verified.sign_count,
                transports=list(verified.transports), aaguid=verified.aaguid,
                attestation_format=verified.attestation_format,
                backup_eligible=verified.backup_eligible, backup_state=verified.backup_state,
                user_verified=verified.user_verified,
                name=name or authenticator_credential_name(verified.aaguid, language=language,
                                                           now=now), now=now)
            audit.record(REGISTER_EVENT, "success", origin=origin.acting_as(user.id),
                         user_id=user.id, details={"credentialId": credential_id,
                                                   "aaguid": verified.aaguid,
                                  "attestationFormat": verified.attestation_format})
        attempt.succeeded()
    return RegisteredCredential(credential_id=record.credential_id, name=record.name,
                                created_at=record.created_at)


# --- authentication -------------------------------------------------------------------------

def start_authentication(ctx: ServiceContext, *, user_id: str | None, rp_id: str,
                         origin: RequestOrigin, scope: str | None = None,
                         challenge: bytes | None = None) -> CeremonyStart:
    """Request options for ``user_id``'s passkeys, or usernameless when it is None/blank.

    ``scope`` says which earlier start this one replaces (see :func:`ceremony_scope`);
    ``challenge``: one the caller derived from what the assertion approves (a proposed
    change), instead of a random one; such an assertion must verify the user."""
    rp_id = _require_rp_id(ctx, rp_id)
    if user_id is None or not user_id.strip():
        return _start_authentication(ctx, user=None, allowed=[], account=None,
                                     origin=origin, scope=scope,
                                     challenge=challenge)
    user = directory.get_user(user_id)
    ensure_usable(user)
    allowed = _known_credentials(user.id)
    if not allowed:
        raise NotFound("The user has no passkey yet; register one first or sign in "
                       "another way.", code="no_passkeys")
    return _start_authentication(ctx, user=user, allowed=allowed, account=user.username,
                                 origin=origin, scope=scope,
                                 challenge=challenge)


def start_named_authentication(ctx: ServiceContext, *, username: str, rp_id: str,
                               origin: RequestOrigin, scope: str) -> CeremonyStart:
    """Request options for whoever a person says they are, by username (a flow's passkey
    step after "identify").

    No enumeration (WebAuthn §14.6.2): an unknown username, or a user without a passkey (or
    whose account cannot sign in), gets options of the same shape as a user with passkeys:
    decoy credential ids derived from a secret of the deployment and the username, the same
    on every try, that no authenticator holds. Its finish fails like any wrong credential.
    """
    rp_id = _require_rp_id(ctx, rp_id)
    user = directory.find_user_by_username(username)
    # The credential read happens for a name nobody has too: the same work, the same time.
    allowed = _known_credentials(user.id if user is not None else store.NOBODY)
    if user is None or not allowed or not is_usable(user):
        allowed = decoy_credentials(key_store.service_secret(DECOY_SECRET),
                                    username_key(username))
        user = None  # the session names nobody: no real credential can finish it
    return _start_authentication(ctx, user=user, allowed=allowed, account=username,
                                 origin=origin, scope=scope)


def _start_authentication(ctx: ServiceContext, *, user: UserRecord | None,
                          allowed: list[KnownCredential], account: str | None,
                          origin: RequestOrigin, scope: str | None,
                          challenge: bytes | None = None) -> CeremonyStart:
    config = ctx.config.passkey
    # Usernameless (nothing allowed): the credential itself names the user, so it must
    # verify the user. An approval (a challenge derived from what it approves) is a person's
    # decision, not a touch: it must verify the user too.
    user_verification = "required" if not allowed or challenge is not None \
        else config.user_verification
    throttle.ensure_allowed(ctx, action=AUTHENTICATE_EVENT, account=account,
                            origin=origin, start=True)
    challenge = challenge or secrets.token_bytes(CHALLENGE_BYTES)
    options = request_options(rp_id=config.rp_id, challenge=challenge,
                              timeout_ms=config.timeout_ms,
                              user_verification=user_verification, allow_credentials=allowed)
    state = {"userVerification": user_verification,
             "allowCredentials": [codec.encode(c.credential_id) for c in allowed]}
    if account is not None:
        state["account"] = account  # the finish's throttle account, without a read
    return CeremonyStart(options=options, session_token=new_session(
        ctx, ceremony=store.AUTHENTICATION, user_id=user.id if user else None,
        scope=scope or ceremony_scope(client_address=origin.address),
        origin=origin, challenge=challenge, state=state))


def finish_authentication(ctx: ServiceContext, *, credential: CredentialReader,
                          session_token: str,
                          origin: RequestOrigin) -> AuthenticatedUser:
    """Verify the assertion (WebAuthn §7.2) and say who signed in."""
    now = time.time()
    with CredentialAttempt(ctx, action=AUTHENTICATE_EVENT,
                           origin=origin) as attempt:
        response = credential(store.AUTHENTICATION)
        session = open_session(session_token, ceremony=store.AUTHENTICATION, now=now)
        attempt.user_id = session.user_id
        attempt.check(_throttle_account(session))
        listed, presented = session.state["allowCredentials"], codec.encode(
            response.credential_id)
        found = _registered_pair(response, presented=presented, listed=listed)
        if found is not None or presented in listed:
            # An offered id is the name's own to anyone outside, a real passkey's or a
            # decoy: its failures count against the name at this address alike.
            attempt.at_stake(found[0].user_id if found is not None else None)
        expectations = AuthenticationExpectations(
                challenge=codec.decode(session.challenge, field="challenge"),
                rp_id=session.rp_id, allowed_origins=ctx.config.passkey.accepted_origins,
                user_verification_required=session.state["userVerification"] == "required",
                allowed_credential_ids=tuple(codec.decode(c, field="allowCredentials")
                                             for c in session.state["allowCredentials"]),
                # Usernameless is an empty list, not a session naming nobody: a name's decoys
                # must be answered as its real passkeys are.
                user_handle_required=not session.state["allowCredentials"])
        if found is None:
            _refuse_unregistered(response, expectations)
        stored, owner = found
        try:
            verified = verify_authentication(response, expected=expectations, stored=StoredPasskey(
                credential_id=response.credential_id, public_key=stored.public_key,
                sign_count=stored.sign_count, backup_eligible=stored.backup_eligible,
                user_handle=codec.decode(owner.user_handle, field="userHandle")))
        except VerificationError as error:
            # A concurrent finish of this very token already stored the counter: a replay
            # of one assertion, not a cloned authenticator.
            if error.code == "possible_clone" and store.find_session(session.token_hash) is None:
                raise used_concurrently() from None
            raise
        # Checked only once the key proved itself: nobody learns an account's state cheaply.
        ensure_usable(owner)
        with transaction():
            consume_session(session, now)
            if not store.record_use(stored.credential_id, sign_count=verified.sign_count,
                                    backup_eligible=verified.backup_eligible,
                                    backup_state=verified.backup_state, now=now):
                raise VerificationError(
                    "possible_clone", "A concurrent sign-in with this credential already "
                    "reported a higher signature counter: the credential may have been cloned.",
                    presented_sign_count=verified.sign_count)
            audit.record(AUTHENTICATE_EVENT, "success", origin=origin.acting_as(owner.id),
                         user_id=owner.id, details={"credentialId": stored.credential_id,
                                  "userVerified": verified.user_verified,
                                  "usernameless": session.user_id is None})
        attempt.succeeded()
    amr = ["passkey"] if verified.backup_eligible else ["passkey", "hwk"]
    return AuthenticatedUser(user=owner, credential_id=stored.credential_id, amr=amr,
                             user_verified=verified.user_verified)


def _registered_pair(response: CredentialResponse, *, presented: str, listed: list[str]
                     ) -> tuple[store.SignInCredential, UserRecord] | None:
    """The passkey presented and its owner, or None when none is registered under it.

    Without a list (usernameless) what must be registered is the pair the authenticator
    keeps, credential id and user handle: a registered id under another's handle is as
    unknown as an id never seen, so ``unknown_credential`` tells a presenter nothing but
    that their own pair is not (or no longer) here. With a list, an id outside it is
    refused before any read (``credential_not_allowed``), whoever it may belong to.
    """
    if listed and presented not in listed:
        return None
    found = store.find_credential_with_owner(presented)
    handle = response.fields.get("userHandle")
    if found is not None and not listed and handle is not None and \
            codec.decode(found[1].user_handle, field="userHandle") != handle:
        return None
    return found


def _refuse_unregistered(response: CredentialResponse,
                         expectations: AuthenticationExpectations) -> NoReturn:
    """Refuse what :func:`_registered_pair` found unregistered with the answer a registered
    passkey with a wrong signature would get, after the same checks; a usernameless one
    that passes them all is ``unknown_credential`` (the page may tell the browser to forget
    it: the Signal API), a listed one (a decoy) stays ``invalid_signature``."""
    try:
        verify_authentication(response, expected=expectations, stored=None)
    except VerificationError as error:
        if error.code == "invalid_signature" and not expectations.allowed_credential_ids:
            raise VerificationError("unknown_credential", "No passkey with this credential "
                                    "id and user handle is registered here.") from None
        raise
    raise AssertionError("an assertion without a stored passkey verified")
