"""The comparison key of a username: usernames are unique, and found, by this key.

RFC 8265 (PRECIS) ``UsernameCaseMapped``: fullwidth and halfwidth characters mapped to their
ordinary forms, lowercase, Unicode NFC. So ``Alice``, ``ALICE`` and ``alice`` written in
fullwidth letters (U+FF41...) are one username, and so is ``é`` typed precomposed (NFC) or
as ``e`` + combining accent (NFD). The username itself is kept as it was typed (that is
what people see); the key is what the store compares.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from typing import Any


@cache
def _profile() -> Any:
    """RFC 8265's profile, loaded by the first non-ASCII username: its tables take longer to
    import than the rest of the start (PERF: cold start)."""
    import precis_i18n

    return precis_i18n.get_profile("UsernameCaseMapped")


def username_key(username: str) -> str:
    """The key that decides whether two usernames are the same: RFC 8265 UsernameCaseMapped.

    What the profile accepts gets its enforced form (``Alice`` -> ``alice``, fullwidth
    ``alice`` -> ``alice``, NFD ``é`` -> NFC ``é``, ``ẞ`` -> ``ß``; ``ß`` itself is kept, as
    the profile's lowercase mapping keeps it, so ``straße`` and ``strasse`` stay two
    usernames).

    Never raises. Text the profile refuses (empty, spaces, control characters, compatibility
    characters such as ``ﬁ``, a right-to-left string breaking the Bidi rule...) gets a key
    all the same: ``NFC(casefold(width-mapped text))``, the width mapping being the profile's
    own (each fullwidth or halfwidth character replaced by its NFKC form). Such text cannot
    be a username created through the product (its rule is 1-128 ASCII letters, digits and
    ``. _ @ + -``, all of which the profile accepts), but it arrives at sign-in as typed, and
    a store written before this key existed may hold it. A refused spelling may share the
    key of an accepted username (``ﬁnn``, refused for its compatibility character, and
    ``finn``): uniqueness is then stricter, never looser, and the throttle's account key
    (``casefold()``) already counts the two as one account.
    """
    if username.isascii():
        # PERF: every sign-in looks a username up: ASCII, the common case, skips the profile's
        # per-character tables. Its key is the lowercase either way: printable ASCII other
        # than the space is what the profile allows and case is all it maps there, and the
        # fallback below leaves ASCII as casefold() does, which on ASCII is lower().
        return username.lower()
    try:
        return _profile().enforce(username)
    except UnicodeError:
        return unicodedata.normalize("NFC", _width_mapped(username).casefold())


def _width_mapped(text: str) -> str:
    """RFC 8264 §9.3 width mapping: fullwidth/halfwidth characters to their decompositions."""
    return "".join(_narrowed(char) for char in text)


def _narrowed(char: str) -> str:
    if unicodedata.decomposition(char).startswith(("<wide>", "<narrow>")):
        mapped = unicodedata.normalize("NFKC", char)
        if len(mapped) == 1:
            return mapped
    return char
