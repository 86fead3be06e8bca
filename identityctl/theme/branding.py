"""A theme's branding: the product name, a logo and the terms and privacy links the hosted
pages show. Checked like every theme value: the pages run under a CSP that loads images
from this origin and ``data:`` only, so a logo is a ``data:`` image (PNG, SVG, WebP, at most
100 KB); links are absolute https URLs (http on localhost, for development)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from identityctl.errors import InvalidField

KEYS = ("productName", "logo", "termsUrl", "privacyUrl")
MAX_LOGO = 100_000
_LOGO = re.compile(r"^data:image/(png|svg\+xml|webp);base64,[A-Za-z0-9+/]+={0,2}$")


def _link(value: Any, field: str) -> str:
    if not isinstance(value, str) or len(value) > 2000:
        raise InvalidField(field, "must be a URL")
    parts = urlsplit(value)
    local = parts.scheme == "http" and parts.hostname in ("localhost", "127.0.0.1")
    if not (parts.scheme == "https" or local) or not parts.hostname or any(
            ord(char) < 33 for char in value):
        raise InvalidField(field, "must be an https URL")
    return value


def validate_branding(branding: Any) -> dict[str, str]:
    """The branding section, checked; InvalidField naming the field otherwise."""
    if not isinstance(branding, dict):
        raise InvalidField("theme.branding", "must be an object")
    for key, value in branding.items():
        field = f"theme.branding.{key}"
        if key == "productName":
            if not isinstance(value, str) or not 0 < len(value.strip()) <= 60 \
                    or not value.isprintable():
                raise InvalidField(field, "must be 1-60 printable characters")
        elif key == "logo":
            if not isinstance(value, str) or len(value) > MAX_LOGO or not _LOGO.match(value):
                raise InvalidField(field, "must be a data: URI of a PNG, SVG or WebP image "
                                          f"(base64, at most {MAX_LOGO // 1000} KB)")
        elif key in ("termsUrl", "privacyUrl"):
            _link(value, field)
        else:
            raise InvalidField("theme.branding", f"unknown key {str(key)[:60]!r}; the keys "
                                                 f"are {', '.join(KEYS)}")
    return branding


def page_branding(theme: Any) -> dict[str, str]:
    """What a page shows of a stored theme's branding: only values that pass the check
    (an older or hand-edited one is left out, as with the stylesheet)."""
    branding = theme.get("branding") if isinstance(theme, dict) else None
    shown: dict[str, str] = {}
    for key, value in (branding.items() if isinstance(branding, dict) else ()):
        try:
            validate_branding({key: value})
        except InvalidField:
            continue
        shown[key] = value
    return shown
