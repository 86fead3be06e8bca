"""Which authenticator made a passkey, by its AAGUID (WebAuthn §6.5.1), in the words and
the picture a person knows it by: "Google Password Manager", "iCloud Keychain", "1Password".

The names and icons are the community list shipped as package data (``data/aaguid-names.json``
and ``data/aaguid-icons.json``; their source, commit and licence in ``data/README.md``). The
icons are a file of their own, read only when an icon is asked for: naming a passkey never
loads them. An AAGUID of zeros (no attestation, or an authenticator that keeps its make to
itself) and one the list does not know have neither: the caller names the passkey otherwise.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

#: What an authenticator that tells nothing sends (and "none" attestation may zero).
UNKNOWN_AAGUID = "00000000-0000-0000-0000-000000000000"
#: Where the service serves an authenticator's icon (an SVG); ``?scheme=dark`` for the
#: variant drawn for dark backgrounds.
ICON_PATH = "/authenticators/{aaguid}/icon"
ICON_TYPE = "image/svg+xml"
LIGHT, DARK = "light", "dark"


def _data(name: str) -> Any:
    return json.loads(resources.files("identityctl.passkey").joinpath(f"data/{name}")
                      .read_text(encoding="utf-8"))


@cache
def _names() -> dict[str, str]:
    return _data("aaguid-names.json")


@cache
def _icons() -> dict[str, dict[str, str]]:
    return _data("aaguid-icons.json")


def canonical_aaguid(aaguid: str) -> str | None:
    """``aaguid`` (any case, with or without dashes) in its lower-case dashed form, or None
    when it is no AAGUID."""
    plain = aaguid.strip().lower().replace("-", "")
    if len(plain) != 32 or any(c not in "0123456789abcdef" for c in plain):
        return None
    return f"{plain[:8]}-{plain[8:12]}-{plain[12:16]}-{plain[16:20]}-{plain[20:]}"


def authenticator_name(aaguid: str) -> str | None:
    """The name of the authenticator with ``aaguid``, or None when it is unknown."""
    key = canonical_aaguid(aaguid)
    return None if key in (None, UNKNOWN_AAGUID) else _names().get(key)


def authenticator_icon(aaguid: str, *, scheme: str = LIGHT) -> bytes | None:
    """The SVG icon of the authenticator with ``aaguid`` for a ``scheme`` (light or dark)
    background (the light one where the list has no dark one), or None when it has none."""
    key = canonical_aaguid(aaguid)
    icons = _icons().get(key) if key else None  # zeros: no make, no icon
    if not icons:
        return None
    icon = icons.get(scheme) or icons.get(LIGHT) or icons.get(DARK)
    return icon.encode() if icon else None


def authenticator_fields(aaguid: str, *, base_url: str) -> dict[str, str | None]:
    """A passkey's authenticator as the lists of passkeys show it: its name and the URLs of
    its icons under ``base_url`` (None where the list has none). Reads the icons: for
    listings only."""
    key = canonical_aaguid(aaguid)
    name = authenticator_name(aaguid)
    icon = base_url + ICON_PATH.format(aaguid=key) if key and authenticator_icon(key) else None
    return {"authenticator": name, "icon": icon,
            "iconDark": f"{icon}?scheme={DARK}" if icon else None}
