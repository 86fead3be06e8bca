"""Passkey credentials and the server-side state of WebAuthn ceremonies.

A ceremony session lives in the store, not in a process, so a ceremony started on one
instance finishes on another. Single use is decided by one conditional DELETE whose row
count picks the winner; credential writes that go with it run in the caller's transaction
(see services/accounts/passkeys/ceremonies.py), so a lost race or a failed check leaves nothing
behind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import peewee

from identityctl.errors import NotFound
from identityctl.store import crud
from identityctl.store.compiled import CompiledQuery, Row
from identityctl.store.db import transaction
from identityctl.store.directory import UserRecord, owner_columns, owner_record
from identityctl.store.models import CeremonySession, PasskeyCredential, User, UserType

REGISTRATION = "registration"
AUTHENTICATION = "authentication"


@dataclass(slots=True)
class CeremonySessionRecord:
    token_hash: str
    ceremony: str
    user_id: str | None
    rp_id: str
    #: Base64URL of the challenge bytes.
    challenge: str
    state: dict[str, Any]
    superseded: bool
    created_at: float
    expires_at: float


@dataclass(slots=True)
class PasskeyRecord:
    credential_id: str
    user_id: str
    public_key: bytes
    algorithm: int
    sign_count: int
    transports: tuple[str, ...]
    aaguid: str
    attestation_format: str
    backup_eligible: bool
    backup_state: bool
    user_verified: bool
    name: str
    created_at: float
    last_used_at: float | None

    def to_api(self) -> dict[str, Any]:
        return {"credentialId": self.credential_id, "name": self.name,
                "createdAt": self.created_at, "lastUsedAt": self.last_used_at,
                "algorithm": self.algorithm, "signCount": self.sign_count,
                "transports": list(self.transports), "aaguid": self.aaguid,
                "attestationFormat": self.attestation_format,
                "backupEligible": self.backup_eligible, "backupState": self.backup_state}


@dataclass(slots=True)
class SignInCredential:
    """What verifying an assertion needs of a stored credential (a hot path reads no more)."""

    credential_id: str
    user_id: str
    public_key: bytes
    sign_count: int
    backup_eligible: bool


def _session_record(row: CeremonySession | Row) -> CeremonySessionRecord:
    return CeremonySessionRecord(
        token_hash=row.token_hash, ceremony=row.ceremony, user_id=row.user_id, rp_id=row.rp_id,
        challenge=row.challenge, state=row.state or {}, superseded=row.superseded,
        created_at=row.created_at, expires_at=row.expires_at)


def _passkey_record(row: PasskeyCredential | Row) -> PasskeyRecord:
    return PasskeyRecord(
        credential_id=row.credential_id, user_id=row.user_id, public_key=bytes(row.public_key),
        algorithm=row.algorithm, sign_count=row.sign_count,
        transports=tuple(row.transports or ()), aaguid=row.aaguid,
        attestation_format=row.attestation_format, backup_eligible=row.backup_eligible,
        backup_state=row.backup_state, user_verified=row.user_verified, name=row.name,
        created_at=row.created_at, last_used_at=row.last_used_at)


# --- ceremony sessions ----------------------------------------------------------------------

#: A user id no user has (ids are UUIDs).
NOBODY = "nobody"


def create_session(*, token_hash: str, ceremony: str, user_id: str | None, scope: str,
                   rp_id: str, challenge: str, state: dict[str, Any], now: float,
                   expires_at: float) -> None:
    """Store a new session; it supersedes the open sessions of the same user, ``ceremony``
    and ``scope`` (who started it: see services.accounts.passkeys.sessions), and no others."""
    with transaction():
        # Also without a user (usernameless, or a decoy for a name nobody has): the same
        # statement, on nobody, so a start by username takes as long whether the name
        # exists or not (WebAuthn L3 §14.6.2).
        _SUPERSEDE.execute(user_id=user_id or NOBODY, ceremony=ceremony, scope=scope)
        _INSERT_SESSION.execute(token_hash=token_hash, ceremony=ceremony, user_id=user_id,
                                rp_id=rp_id, challenge=challenge,
                                state=CeremonySession.state.db_value(state), scope=scope,
                                created_at=now, expires_at=expires_at)


#: ``superseded = ?`` (still_open) is the form the index (user, ceremony, scope,
#: superseded) serves; ``NOT superseded`` would scan rows.
_SUPERSEDE = CompiledQuery(lambda user_id, ceremony, scope, superseded=True, still_open=False:
                           CeremonySession.update(superseded=superseded).where(
    (CeremonySession.user == user_id) & (CeremonySession.ceremony == ceremony)
    & (CeremonySession.scope == scope) & (CeremonySession.superseded == still_open)))


def _users_credentials(*columns: peewee.Field) -> CompiledQuery:
    """A user's credentials, oldest first: ``columns`` of each (every column when none)."""
    return CompiledQuery(lambda user_id: PasskeyCredential.select(*columns).where(
        PasskeyCredential.user == user_id).order_by(PasskeyCredential.created_at,
                                                    PasskeyCredential.id))


_USER_CREDENTIALS = _users_credentials()
_USER_DESCRIPTORS = _users_credentials(PasskeyCredential.credential_id,
                                       PasskeyCredential.transports)


def _record_use(counter_moves: Callable[[Any], peewee.Expression]) -> CompiledQuery:
    """The conditional counter update of a sign-in (see :func:`record_use`)."""
    return CompiledQuery(
        lambda sign_count, backup_state, now, credential_id, backup_eligible:
        PasskeyCredential.update(sign_count=sign_count, backup_state=backup_state,
                                 last_used_at=now).where(
            (PasskeyCredential.credential_id == credential_id) & counter_moves(sign_count)
            & (PasskeyCredential.backup_eligible == backup_eligible)))


_RECORD_USE = _record_use(lambda presented: PasskeyCredential.sign_count < presented)
#: Authenticators without a counter (always 0): the stored counter must still be 0 too.
_RECORD_USE_WITHOUT_COUNTER = _record_use(
    lambda presented: PasskeyCredential.sign_count == presented)
#: ``state`` is JSON text (CeremonySession.state.db_value).
_INSERT_SESSION = CompiledQuery(
    lambda token_hash, ceremony, user_id, rp_id, challenge, state, scope, created_at,
    expires_at, superseded=False: CeremonySession.insert(
        token_hash=token_hash, ceremony=ceremony, user=user_id, rp_id=rp_id, scope=scope,
        challenge=challenge, state=state, superseded=superseded, created_at=created_at,
        expires_at=expires_at))
#: A session is consumed once: only while current and unexpired.
_CONSUME = CompiledQuery(lambda token_hash, ceremony, now: CeremonySession.delete().where(
    (CeremonySession.token_hash == token_hash) & (CeremonySession.ceremony == ceremony)
    & ~CeremonySession.superseded & (CeremonySession.expires_at > now)))
_SESSION = CompiledQuery(lambda token_hash: CeremonySession.select().where(
    CeremonySession.token_hash == token_hash))
_CREDENTIAL = CompiledQuery(lambda credential_id: PasskeyCredential.select().where(
    PasskeyCredential.credential_id == credential_id))
_CREDENTIAL_WITH_OWNER = CompiledQuery(lambda credential_id: PasskeyCredential.select(
    PasskeyCredential.credential_id, PasskeyCredential.user, PasskeyCredential.public_key,
    PasskeyCredential.sign_count, PasskeyCredential.backup_eligible,
    *owner_columns()).join(User).join(UserType).where(
    PasskeyCredential.credential_id == credential_id))


def find_session(token_hash: str) -> CeremonySessionRecord | None:
    row = _SESSION.first(CeremonySession, token_hash=token_hash)
    return _session_record(row) if row else None


def consume_session(token_hash: str, *, ceremony: str, now: float) -> bool:
    """Delete the session if it is still current and unexpired; True for the one caller
    that did. Run it in the transaction that stores the ceremony's outcome."""
    return _CONSUME.execute(token_hash=token_hash, ceremony=ceremony, now=now) == 1


def purge_sessions(*, expired_before: float) -> int:
    """Forget sessions that expired before ``expired_before`` (finished ones are gone)."""
    return CeremonySession.delete().where(CeremonySession.expires_at < expired_before).execute()


# --- credentials --------------------------------------------------------------------------

def find_credential(credential_id: str) -> PasskeyRecord | None:
    row = _CREDENTIAL.first(PasskeyCredential, credential_id=credential_id)
    return _passkey_record(row) if row else None


def find_credential_with_owner(credential_id: str) -> tuple[SignInCredential, UserRecord] | None:
    """The credential and its owner in one read (every passkey sign-in needs both)."""
    row = _CREDENTIAL_WITH_OWNER.first(PasskeyCredential, credential_id=credential_id)
    if row is None:
        return None
    return SignInCredential(credential_id=row.credential_id, user_id=row.user_id,
                            public_key=bytes(row.public_key), sign_count=row.sign_count,
                            backup_eligible=row.backup_eligible), owner_record(row)


def list_credentials(user_id: str) -> list[PasskeyRecord]:
    return [_passkey_record(row)
            for row in _USER_CREDENTIALS.all(PasskeyCredential, user_id=user_id)]


def credential_descriptors(user_id: str) -> list[tuple[str, tuple[str, ...]]]:
    """Id and transports of each of the user's credentials, oldest first: what ceremony
    options list (every start reads them)."""
    return [(row.credential_id, tuple(row.transports or ()))
            for row in _USER_DESCRIPTORS.all(PasskeyCredential, user_id=user_id)]


#: PERF: compiled: peewee's Model.create built this SQL at every registration (200-240 µs of
#: CPU per insert against 45-65 µs; 7% of the server's time in a profile of registrations
#: and sign-ins).
_INSERT_CREDENTIAL = CompiledQuery(
    lambda credential_id, user_id, public_key, algorithm, sign_count, transports, aaguid,
    attestation_format, backup_eligible, backup_state, user_verified, name, created_at:
    PasskeyCredential.insert(
        credential_id=credential_id, user=user_id, public_key=public_key, algorithm=algorithm,
        sign_count=sign_count, transports=transports, aaguid=aaguid,
        attestation_format=attestation_format, backup_eligible=backup_eligible,
        backup_state=backup_state, user_verified=user_verified, name=name,
        created_at=created_at))


def insert_credential(*, credential_id: str, user_id: str, public_key: bytes, algorithm: int,
                      sign_count: int, transports: list[str], aaguid: str,
                      attestation_format: str, backup_eligible: bool, backup_state: bool,
                      user_verified: bool, name: str, now: float) -> PasskeyRecord:
    """Store a new credential; an id registered already (to anyone) is a 409."""
    with crud.unique(code="credential_already_registered",
                     conflict="This credential is already registered; use another "
                              "authenticator."):
        _INSERT_CREDENTIAL.execute(
            credential_id=credential_id, user_id=user_id, public_key=public_key,
            algorithm=algorithm, sign_count=sign_count,
            transports=PasskeyCredential.transports.db_value(transports), aaguid=aaguid,
            attestation_format=attestation_format, backup_eligible=backup_eligible,
            backup_state=backup_state, user_verified=user_verified, name=name,
            created_at=now)
    return PasskeyRecord(
        credential_id=credential_id, user_id=user_id, public_key=public_key,
        algorithm=algorithm, sign_count=sign_count, transports=tuple(transports),
        aaguid=aaguid, attestation_format=attestation_format, backup_eligible=backup_eligible,
        backup_state=backup_state, user_verified=user_verified, name=name, created_at=now,
        last_used_at=None)


def record_use(credential_id: str, *, sign_count: int, backup_eligible: bool,
               backup_state: bool, now: float) -> bool:
    """Store a verified assertion's counter and backup state.

    Conditional on the stored counter still being below ``sign_count`` (or both zero) and
    BE unchanged: False when a concurrent sign-in got there first with a higher counter, so
    this assertion's counter no longer moves forward.
    """
    statement = _RECORD_USE if sign_count else _RECORD_USE_WITHOUT_COUNTER
    return statement.execute(sign_count=sign_count, backup_state=backup_state, now=now,
                             credential_id=credential_id, backup_eligible=backup_eligible) == 1


def _user_credential(user_id: str, credential_id: str) -> PasskeyCredential:
    row = PasskeyCredential.get_or_none((PasskeyCredential.user == user_id)
                                        & (PasskeyCredential.credential_id == credential_id))
    if row is None:
        raise NotFound(f"The user has no passkey with id '{credential_id}'.",
                       code="credential_not_found")
    return row


def rename_credential(user_id: str, credential_id: str, name: str) -> PasskeyRecord:
    with transaction():
        row = _user_credential(user_id, credential_id)
        row.name = name
        row.save()
    return _passkey_record(row)


def delete_credential(user_id: str, credential_id: str) -> None:
    with transaction():
        _user_credential(user_id, credential_id).delete_instance()
