"""Which authenticator made a passkey, by its AAGUID (WebAuthn §6.5.1), in the words a
person knows it by: "Google Password Manager", "iCloud Keychain", "1Password".

The names are the community list shipped as package data (``data/aaguid-names.json``; its
source, commit and licence in ``data/README.md``). An AAGUID of zeros (no attestation, or
an authenticator that keeps its make to itself) and one the list does not know have no
name: the caller names the passkey otherwise.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

#: What an authenticator that tells nothing sends (and "none" attestation may zero).
UNKNOWN_AAGUID = "00000000-0000-0000-0000-000000000000"


@cache
def _names() -> dict[str, str]:
    data = resources.files("identityctl.passkey").joinpath("data/aaguid-names.json")
    return json.loads(data.read_text(encoding="utf-8"))


def authenticator_name(aaguid: str) -> str | None:
    """The name of the authenticator with ``aaguid`` (any case, with or without dashes),
    or None when it is unknown."""
    plain = aaguid.strip().lower().replace("-", "")
    if len(plain) != 32:
        return None
    key = f"{plain[:8]}-{plain[8:12]}-{plain[12:16]}-{plain[16:20]}-{plain[20:]}"
    return None if key == UNKNOWN_AAGUID else _names().get(key)
