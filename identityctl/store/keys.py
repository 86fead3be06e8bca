"""Signing keys and the deployment's other secrets: kept in the store so every server
instance signs, verifies and derives alike."""

from __future__ import annotations

import base64
import secrets
import threading
import weakref
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from identityctl.store.connection import database
from identityctl.store.db import transaction
from identityctl.store.models import ServiceSecret, SigningKey, now


@dataclass(frozen=True, slots=True)
class SigningKeyRecord:
    kid: str
    algorithm: str
    private_pem: str
    public_jwk: dict[str, Any]
    status: str
    created_at: float


def _record(row: SigningKey) -> SigningKeyRecord:
    return SigningKeyRecord(kid=row.kid, algorithm=row.algorithm, private_pem=row.private_pem,
                            public_jwk=row.public_jwk, status=row.status,
                            created_at=row.created_at)


def published_keys() -> list[SigningKeyRecord]:
    """The active key first, then previous keys still needed to verify unexpired tokens."""
    rows = (SigningKey.select().where(SigningKey.status.in_(("active", "previous")))
            .order_by(SigningKey.status.asc(), SigningKey.created_at.desc()))
    return [_record(row) for row in rows]


def add_active_key(*, kid: str, algorithm: str, private_pem: str,
                   public_jwk: dict[str, Any]) -> SigningKeyRecord:
    """Make a new key the signing key; the old active key keeps verifying as 'previous'."""
    with transaction():
        SigningKey.update(status="previous").where(SigningKey.status == "active").execute()
        row = SigningKey.create(kid=kid, algorithm=algorithm, private_pem=private_pem,
                                public_jwk=public_jwk, status="active")
    return _record(row)


def retire_previous_keys(older_than: float) -> int:
    """Retire previous keys that stopped signing before ``older_than``: nothing they signed
    is still live. A key stopped signing when the next key was created (not when it was)."""
    with transaction():
        rows = list(SigningKey.select().order_by(SigningKey.created_at.asc()))
        done_signing = [row.kid for row, successor in pairwise(rows)
                        if row.status == "previous" and successor.created_at < older_than]
        if not done_signing:
            return 0
        return (SigningKey.update(status="retired", retired_at=now())
                .where(SigningKey.kid.in_(done_signing)).execute())


#: Per open database (a process that opens another store, as the CLI and the tests do,
#: never reuses the first one's secrets): name -> secret.
_secrets: weakref.WeakKeyDictionary[Any, dict[str, bytes]] = weakref.WeakKeyDictionary()
_secrets_lock = threading.Lock()
SECRET_BYTES = 32


def service_secret(name: str) -> bytes:
    """The deployment's secret called ``name``: made at first use by whichever instance gets
    there first, the same for every instance after (the first insert wins), never changed.
    PERF: kept in process once read (it never changes)."""
    known = _secrets.get(database.obj, {}).get(name)
    if known is not None:
        return known
    with _secrets_lock:
        with transaction():
            ServiceSecret.insert(name=name, value=base64.b64encode(
                secrets.token_bytes(SECRET_BYTES)).decode(), created_at=now()) \
                .on_conflict_ignore().execute()
        row = ServiceSecret.get_by_id(name)
        value = base64.b64decode(row.value)
        _secrets.setdefault(database.obj, {})[name] = value
    return value
