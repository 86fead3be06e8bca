"""One-time identifiers: the first use of each is recorded, every later one refused, on any
instance (the row is the memory; nothing is kept in a process)."""

from __future__ import annotations

import hashlib
import secrets

import peewee

from identityctl.store import db
from identityctl.store.models import SpentIdentifier, now

#: One first use in this many also purges the identifiers past their expiry (housekeeping,
#: not on every request's path).
PURGE_ONE_IN = 200


def first_use(kind: str, issuer: str, identifier: str, *, expires_at: float) -> bool:
    """True the first time ``identifier`` of ``issuer`` is used (it is remembered until
    ``expires_at``); False for every use after, at once or concurrently, on any instance."""
    if secrets.randbelow(PURGE_ONE_IN) == 0:
        SpentIdentifier.delete().where(SpentIdentifier.expires_at < now()).execute()
    key = hashlib.sha256(f"{kind}:{issuer}:{identifier}".encode()).hexdigest()
    try:
        with db.savepoint():
            SpentIdentifier.create(key=key, expires_at=expires_at)
    except peewee.IntegrityError:
        return False
    return True
