"""Time-based one-time passwords (RFC 6238) with pyotp, and how their secrets are kept.

A code is accepted for the current 30-second step and one step either side (a clock a little
off, a code typed as it changed); what it proves is *which* step it belongs to, so the caller
can refuse that step and every earlier one from then on (a code seen once, replayed, opens
nothing). The seed cannot be kept as a hash (the server must compute codes from it), so it is
sealed with AES-GCM under a key of the deployment, bound to its account: a copied row decrypts
for nobody else.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass

import pyotp
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pyotp.utils import strings_equal

from identityctl.errors import Conflict

#: Seconds per step and digits per code: what every authenticator app uses by default.
STEP_SECONDS, DIGITS = 30, 6
#: Steps either side of the current one that are still accepted (RFC 6238 §5.2).
WINDOW = 1
_NONCE_BYTES = 12


class TOTPError(Conflict):
    """A sealed seed that does not open (another account's row, a database restored under
    another deployment's key): answered as such, never a 500."""

    def __init__(self, binding: str) -> None:
        super().__init__(f"The authenticator app of account {binding!r} cannot be read here "
                         "(its secret was sealed under another key); remove it with "
                         "`identityctl user remove-totp` and set it up again.",
                         code="totp_unreadable")


@dataclass(frozen=True, slots=True)
class Enrolment:
    """A new seed and the ``otpauth://`` URI an authenticator app reads from a QR code."""

    secret: str
    uri: str


def new_enrolment(*, account_name: str, issuer: str) -> Enrolment:
    """A fresh 160-bit seed (RFC 4226 §4's recommended length) for ``account_name``."""
    secret = pyotp.random_base32()
    uri = pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS).provisioning_uri(
        name=account_name, issuer_name=issuer)
    return Enrolment(secret=secret, uri=uri)


def step_at(moment: float) -> int:
    """The time step ``moment`` (UNIX seconds) falls in."""
    return int(moment // STEP_SECONDS)


def code_at(secret: str, moment: float) -> str:
    """The code for ``moment`` (what an authenticator app shows then)."""
    return pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS).at(moment)


def matching_step(secret: str, code: str, *, now: float, after_step: int | None) -> int | None:
    """The step within :data:`WINDOW` of ``now`` whose code is ``code``, if it is later than
    ``after_step`` (the last step used: that one and earlier ones are spent); else None."""
    typed = "".join(code.split())
    if len(typed) != DIGITS or not typed.isdigit():
        return None
    totp = pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS)
    current = step_at(now)
    found = None
    for step in range(current - WINDOW, current + WINDOW + 1):
        # Every step is compared (in constant time), so the time taken says nothing.
        if strings_equal(typed, totp.generate_otp(step)) and found is None:
            found = step
    if found is None or (after_step is not None and found <= after_step):
        return None
    return found


def seal(key: bytes, secret: str, *, binding: str) -> str:
    """``secret`` encrypted under ``key`` (AES-GCM, a fresh nonce) for ``binding`` (the
    account it belongs to), as text for the store."""
    nonce = os.urandom(_NONCE_BYTES)
    sealed = AESGCM(key).encrypt(nonce, secret.encode(), binding.encode())
    return base64.b64encode(nonce + sealed).decode()


def unseal(key: bytes, sealed: str, *, binding: str) -> str:
    """The secret :func:`seal` sealed for ``binding``; :class:`TOTPError` otherwise."""
    try:
        raw = base64.b64decode(sealed, validate=True)
        return AESGCM(key).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:],
                                   binding.encode()).decode()
    except (InvalidTag, ValueError, binascii.Error) as exc:
        raise TOTPError(binding) from exc
