"""The languages of what a person reads (pages, e-mail): message catalogs and the choice.

Strings are written in English in the code and templates and looked up in the catalog of
the chosen language (``i18n/<lang>.json``: English text -> translation; English needs
no catalog). The choice: the authorization request's ``ui_locales`` (OIDC Core §3.1.2.1),
then the browser's ``Accept-Language``, then English. Flow labels of the default flows are
in the catalogs too; a team's own labels show as they wrote them.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

DEFAULT = "en"
#: The languages with a catalog (and English).
LANGUAGES = ("en", "de")
_RANGE = re.compile(r"^\s*([A-Za-z]{1,8})(?:-[A-Za-z0-9]{1,8})*\s*(?:;\s*q\s*=\s*([0-9.]+))?\s*$")


@cache
def catalog(language: str) -> dict[str, str]:
    """English text -> this language's (empty for English and unknown languages)."""
    if language == DEFAULT or language not in LANGUAGES:
        return {}
    entry = resources.files("identityctl.i18n").joinpath(f"{language}.json")
    return json.loads(entry.read_text(encoding="utf-8"))


def translate(language: str, text: str, **values: Any) -> str:
    """``text`` in ``language``, with ``{name}`` placeholders filled."""
    translated = catalog(language).get(text, text)
    return translated.format(**values) if values else translated


def _ranked(accept_language: str) -> list[str]:
    """The primary language tags of an Accept-Language header, most wanted first."""
    weighted = []
    for index, part in enumerate(accept_language.split(",")[:20]):
        match = _RANGE.match(part)
        if not match:
            continue
        try:
            quality = float(match.group(2)) if match.group(2) else 1.0
        except ValueError:
            continue
        if quality > 0:
            weighted.append((-quality, index, match.group(1).lower()))
    return [tag for _, _, tag in sorted(weighted)]


def choose(*, ui_locales: str | None = None, accept_language: str | None = None) -> str:
    """The page's language: the first of ``ui_locales`` (space-separated BCP 47 tags), then
    of ``Accept-Language``, that has a catalog; else English."""
    wanted = [tag.split("-")[0].lower() for tag in (ui_locales or "").split()]
    wanted += _ranked(accept_language or "")
    return next((tag for tag in wanted if tag in LANGUAGES), DEFAULT)
