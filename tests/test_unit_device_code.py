"""The rules of the device grant's polling (identityctl/oauth/grants/device_code.py), without
HTTP or a store: each answer of RFC 8628 §3.5."""

from __future__ import annotations

from typing import Any

import pytest

from identityctl.oauth.client import Client
from identityctl.oauth.errors import InvalidGrant, OAuthError
from identityctl.oauth.grants.device_code import (
    APPROVED,
    DENIED,
    PENDING,
    USED,
    AuthorizationPending,
    DeviceAccessDenied,
    DeviceGrant,
    ExpiredToken,
    SlowDown,
    check_poll,
    status_of,
)

NOW = 1_800_000_000.0
TV = Client(application_id="tv", client_id="tv", redirect_uris=(), grant_types=(),
            auth_method="none", pkce_required=True, public=True, scopes=(), token_settings={})


def grant(**fields: Any) -> DeviceGrant:
    return DeviceGrant(**{"application_id": "tv", "status": PENDING, "expires_at": NOW + 600,
                          "interval": 5.0, "last_polled_at": None, **fields})


@pytest.mark.parametrize(("polled", "refusal"), [
    (grant(), AuthorizationPending),
    (grant(last_polled_at=NOW - 6), AuthorizationPending),
    (grant(last_polled_at=NOW - 2), SlowDown),
    (grant(status=DENIED), DeviceAccessDenied),
    (grant(expires_at=NOW - 1), ExpiredToken),
    (grant(status=USED), InvalidGrant),
    (grant(application_id="radio"), InvalidGrant),
    (None, InvalidGrant),
])
def test_each_poll_is_answered_as_rfc_8628_says(polled: DeviceGrant | None,
                                               refusal: type[OAuthError]) -> None:
    with pytest.raises(refusal):
        check_poll(polled, client=TV, now=NOW)


def test_an_approved_grant_is_redeemable_and_answers_are_400s() -> None:
    check_poll(grant(status=APPROVED), client=TV, now=NOW)
    assert {error.status for error in (AuthorizationPending, SlowDown, ExpiredToken,
                                       DeviceAccessDenied)} == {400}


def test_the_stored_answer_gives_the_status() -> None:
    assert status_of(approved=None, redeemed=False) == PENDING
    assert status_of(approved=True, redeemed=False) == APPROVED
    assert status_of(approved=False, redeemed=False) == DENIED
    assert status_of(approved=True, redeemed=True) == USED
