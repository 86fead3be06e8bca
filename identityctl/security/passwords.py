"""Password hashing (argon2id via argon2-cffi) and the ASVS 5.0 V6 password policy."""

from __future__ import annotations

from functools import cache
from importlib import resources

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from identityctl import waits
from identityctl.errors import InvalidField

MIN_LENGTH = 8
MAX_LENGTH = 128

#: argon2id at the OWASP Password Storage Cheat Sheet's first configuration (19 MiB, t=2,
#: p=1): about 7x cheaper per sign-in than argon2-cffi's default (64 MiB, t=3, p=4) on a
#: 2-core box, where p=4 only queues. Online guessing is throttled separately; hashes keep
#: their own parameters, so older ones still verify.
_hasher = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)
#: Verified against when the user does not exist, so both paths cost the same time.
#: PERF: written out, not hashed at import (one argon2 hash, ~50 ms of every start); made
#: afresh when _hasher's parameters no longer match it, so its cost always equals theirs.
_DUMMY_HASH = ("$argon2id$v=19$m=19456,t=2,p=1$4pu+tXcw2eGFAwIep1bAsw$"
               "CYQhVGJJazF0Yb4vvjeLipyWHO3Tu6dZgM95vMXhR/w")
if _hasher.check_needs_rehash(_DUMMY_HASH):
    _DUMMY_HASH = _hasher.hash("identityctl-timing-equaliser")


@cache
def _common_passwords() -> frozenset[str]:
    text = resources.files("identityctl.security").joinpath("common-passwords.txt").read_text()
    return frozenset(line.strip().lower() for line in text.splitlines() if line.strip())


def check_policy(password: str, *, username: str = "") -> None:
    """Length 8-128 (no truncation, no composition rules), not common, not the username."""
    if len(password) < MIN_LENGTH:
        raise InvalidField("password", f"must be at least {MIN_LENGTH} characters",
                           code="weak_password")
    if len(password) > MAX_LENGTH:
        raise InvalidField("password", f"must be at most {MAX_LENGTH} characters",
                           code="weak_password")
    lowered = password.lower()
    if lowered in _common_passwords() or (username and lowered == username.lower()):
        raise InvalidField("password", "is too common or equals the username; choose another",
                           code="weak_password")


def hash_password(password: str) -> str:
    with waits.waiting():  # argon2-cffi hashes with the interpreter free: others may run
        return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """True when ``password`` matches; costs one argon2 verification even without a hash."""
    try:
        with waits.waiting():
            return _hasher.verify(password_hash or _DUMMY_HASH, password) and bool(password_hash)
    except (VerificationError, InvalidHashError):
        return False
