"""The device authorization grant: RFC 8628 (sign-in on a device without a browser or a
keyboard worth the name: a TV, a command-line tool, a locked-down machine).

Pure rules: the user code (short, unambiguous, guessable only by chance) and what a poll of
the token endpoint is answered (§3.5). The service stores the grant and runs the page.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from identityctl.oauth.client import Client
from identityctl.oauth.errors import (
    AccessDenied,
    AuthorizationPending,
    ExpiredToken,
    InvalidGrant,
    SlowDown,
)

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
#: §6.1's alphabet: upper-case consonants (no vowels: no words; no O or I beside 0 and 1,
#: which are not in it either), 8 of them: 20^8, about 2.6e10 codes, shown in two groups of
#: four (BCDF-GHJK).
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"
USER_CODE_LENGTH = 8
#: §3.5: a client that polls faster than its interval waits this much longer from then on.
SLOW_DOWN_STEP = 5.0
#: A poll this much early still counts as on time (the network's jitter, a client's timer).
POLL_SLACK = 0.5

PENDING, APPROVED, DENIED, USED = "pending", "approved", "denied", "used"


class DeviceAccessDenied(AccessDenied):
    """§3.5 access_denied, at the token endpoint: the person said no."""

    message = "The person denied the request."


@dataclass(frozen=True, slots=True)
class DeviceGrant:
    """A device authorization as a poll sees it."""

    application_id: str
    status: str
    expires_at: float
    interval: float
    last_polled_at: float | None


def status_of(*, approved: bool | None, redeemed: bool) -> str:
    """The state of an authorization from what the store keeps."""
    if redeemed:
        return USED
    if approved is None:
        return PENDING
    return APPROVED if approved else DENIED


def new_user_code() -> str:
    return "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(USER_CODE_LENGTH))


def normalized_user_code(text: object) -> str | None:
    """What a person typed, as stored: upper case, without spaces or dashes; None when it
    cannot be a user code (then it is not looked up at all)."""
    if not isinstance(text, str):
        return None
    code = "".join(character for character in text.upper() if character not in " -")
    if len(code) != USER_CODE_LENGTH or any(c not in USER_CODE_ALPHABET for c in code):
        return None
    return code


def readable_user_code(code: str) -> str:
    half = USER_CODE_LENGTH // 2
    return f"{code[:half]}-{code[half:]}"


def check_poll(grant: DeviceGrant | None, *, client: Client, now: float) -> None:
    """Returns when the grant is approved (tokens may be issued, once); else the answer of
    §3.5 for this poll. A poll sooner than the interval after the last one is slow_down
    (the service then lengthens the interval)."""
    if grant is None or grant.application_id != client.application_id:
        raise InvalidGrant("The device code is unknown or was issued to another client.",
                           code="device_code_invalid")
    if grant.status == USED:
        raise InvalidGrant("The device code was used already.", code="device_code_used")
    if grant.expires_at <= now:
        raise ExpiredToken("The device code has expired; start again.")
    if grant.status == DENIED:
        raise DeviceAccessDenied("The person denied the request.")
    if grant.status == PENDING:
        if grant.last_polled_at is not None \
                and now - grant.last_polled_at < grant.interval - POLL_SLACK:
            raise SlowDown(f"Wait at least {grant.interval:g} seconds between polls; from now "
                           f"on {grant.interval + SLOW_DOWN_STEP:g}.")
        raise AuthorizationPending("The person has not answered yet; poll again after the "
                                   "interval.")
