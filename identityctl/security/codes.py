"""One-time codes sent by e-mail and recovery codes: made from the OS's randomness, kept
only as keyed hashes (HMAC-SHA256 under a secret of the deployment), compared in constant
time. A six-digit code is guessable offline from a plain hash; from a keyed one, only with
the key.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

#: Digits of a code sent by e-mail.
CODE_DIGITS = 6
#: Recovery codes: this alphabet (no 0/O, 1/I/L), in groups, 12 characters = 60 bits.
RECOVERY_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
RECOVERY_GROUPS, RECOVERY_GROUP_LENGTH = 3, 4


def new_code() -> str:
    return f"{secrets.randbelow(10 ** CODE_DIGITS):0{CODE_DIGITS}d}"


def digest(key: bytes, *, binding: str, code: str) -> str:
    """The keyed hash of ``code`` for ``binding`` (e.g. the flow execution it was sent
    for: the same code presented to another execution has another digest)."""
    return hmac.new(key, f"{binding}\x00{code}".encode(), hashlib.sha256).hexdigest()


def matches(key: bytes, *, binding: str, code: str, expected: str) -> bool:
    return hmac.compare_digest(digest(key, binding=binding, code=code), expected)


def new_recovery_code() -> str:
    groups = ("".join(secrets.choice(RECOVERY_ALPHABET) for _ in range(RECOVERY_GROUP_LENGTH))
              for _ in range(RECOVERY_GROUPS))
    return "-".join(groups)


def normalize_recovery_code(text: str) -> str:
    """What a person typed, as the code was made: case, spaces and dashes do not matter."""
    plain = "".join(character for character in text.upper() if character.isalnum())
    size = RECOVERY_GROUP_LENGTH
    return "-".join(plain[start:start + size] for start in range(0, len(plain), size))
