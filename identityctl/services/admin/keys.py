"""The signing keys as an operator manages them: list and rotate."""

from __future__ import annotations

import time

from identityctl.config import Config
from identityctl.services.admin.bootstrap import rotate_signing_key
from identityctl.store import keys
from identityctl.store.keys import SigningKeyRecord


def published_keys() -> list[SigningKeyRecord]:
    """The keys in the JWKS, the active one first."""
    return keys.published_keys()


def rotate(config: Config) -> tuple[str, int]:
    """Sign with a new key from now on; the previous ones stay in the JWKS until no token they
    signed can be live (the longest token lifetime), then retire. The new key id and how
    many keys retired."""
    longest = max(config.oauth.access_token_ttl, config.oauth.id_token_ttl,
                  config.oauth.assertion_ttl)
    retired = keys.retire_previous_keys(time.time() - longest)
    return rotate_signing_key(config), retired
