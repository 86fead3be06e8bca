"""Whether a browser session answers an authorization request without a new sign-in
(OIDC Core §3.1.2.1: ``prompt`` and ``max_age``; §3.1.2.3: reusing the sign-in).

The application's flow decides whether sessions count at all (an ``SSOCheckExecutor`` node,
with an optional ``maxAge`` of its own); the request can only ask for more: ``prompt=login``
or a ``max_age`` the sign-in is older than makes the person sign in again.
"""

from __future__ import annotations

from collections.abc import Iterable

from identityctl.oauth.errors import InvalidRequest


def parse_max_age(value: str | None) -> int | None:
    """``max_age``: seconds, a non-negative integer (0 means: sign in now)."""
    if value is None:
        return None
    if not (value.isascii() and value.isdigit()) or len(value) > 10:
        raise InvalidRequest("max_age must be a non-negative number of seconds.",
                             code="max_age_invalid")
    return int(value)


def session_answers(*, auth_time: float, now: float, prompts: Iterable[str],
                    max_age: int | None, flow_max_age: int | None) -> bool:
    """Whether a session signed in at ``auth_time`` may stand for a new sign-in."""
    if "login" in prompts:
        return False
    return all(now - auth_time <= limit for limit in (max_age, flow_max_age)
               if limit is not None)
