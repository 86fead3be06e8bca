"""Device authorizations (RFC 8628): unanswered until the person answers on /device
(``approved`` true or false), then redeemed once by the polling client."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import peewee

from identityctl.store.db import transaction
from identityctl.store.models import DeviceAuthorization, now

#: One new device authorization in this many also deletes those expired an hour ago.
PURGE_ONE_IN = 100
_PURGE_AFTER = 3600.0


@dataclass(frozen=True, slots=True)
class StoredDeviceAuthorization:
    device_code_hash: str
    user_code: str
    application_id: str
    scope: str
    extra: dict[str, Any]
    #: None until the person answers.
    approved: bool | None
    redeemed: bool
    expires_at: float
    interval: float
    last_polled_at: float | None
    user_id: str | None
    auth_time: float | None
    amr: list[str]


def _record(row: DeviceAuthorization) -> StoredDeviceAuthorization:
    return StoredDeviceAuthorization(
        device_code_hash=row.device_code_hash, user_code=row.user_code,
        application_id=row.application_id, scope=row.scope, extra=dict(row.extra or {}),
        approved=row.approved, redeemed=row.redeemed_at is not None,
        expires_at=row.expires_at, interval=row.interval, last_polled_at=row.last_polled_at,
        user_id=row.user_id, auth_time=row.auth_time, amr=list(row.amr or []))


def create(*, device_code_hash: str, user_code: str, application_id: str, scope: str,
           extra: dict[str, Any], interval: float, expires_at: float) -> bool:
    """Store a new authorization; False when ``user_code`` is taken (the caller draws
    another)."""
    if secrets.randbelow(PURGE_ONE_IN) == 0:
        DeviceAuthorization.delete().where(
            DeviceAuthorization.expires_at < now() - _PURGE_AFTER).execute()
    try:
        with transaction():
            DeviceAuthorization.create(device_code_hash=device_code_hash, user_code=user_code,
                                       application=application_id, scope=scope, extra=extra,
                                       interval=interval, expires_at=expires_at)
    except peewee.IntegrityError:
        return False
    return True


def by_device_code(device_code_hash: str) -> StoredDeviceAuthorization | None:
    row = DeviceAuthorization.get_or_none(
        DeviceAuthorization.device_code_hash == device_code_hash)
    return _record(row) if row else None


def unanswered_by_user_code(user_code: str) -> StoredDeviceAuthorization | None:
    """The unanswered, unexpired authorization a person typed the code of."""
    row = DeviceAuthorization.get_or_none(
        (DeviceAuthorization.user_code == user_code)
        & DeviceAuthorization.approved.is_null() & (DeviceAuthorization.expires_at > now()))
    return _record(row) if row else None


def answer(user_code: str, *, approved: bool, user_id: str, auth_time: float,
           amr: list[str]) -> bool:
    """Record the person's answer; False when it was answered already (on another page) or
    has expired."""
    with transaction():
        return bool(DeviceAuthorization.update(
            approved=approved, user=user_id, auth_time=auth_time, amr=amr).where(
            (DeviceAuthorization.user_code == user_code)
            & DeviceAuthorization.approved.is_null()
            & (DeviceAuthorization.expires_at > now())).execute())


def polled(device_code_hash: str, *, at: float, interval: float) -> None:
    with transaction():
        DeviceAuthorization.update(last_polled_at=at, interval=interval).where(
            DeviceAuthorization.device_code_hash == device_code_hash).execute()


def redeem(device_code_hash: str) -> bool:
    """Approved and not yet redeemed -> redeemed, once: of two concurrent polls one wins."""
    with transaction():
        return bool(DeviceAuthorization.update(redeemed_at=now()).where(
            (DeviceAuthorization.device_code_hash == device_code_hash)
            & (DeviceAuthorization.approved == True)  # noqa: E712
            & DeviceAuthorization.redeemed_at.is_null()
            & (DeviceAuthorization.expires_at > now())).execute())
