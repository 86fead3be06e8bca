"""The languages of what a person reads (pages, e-mail): message catalogs and the choice.

Strings are written in English in the code and templates and looked up in the catalog of
the chosen language (``i18n/<tag>.json``, the file named by its BCP 47 tag: English text ->
translation). A text with a count (``{count}``) maps to its forms by CLDR plural category
(``{"one": ..., "other": ...}``); ``en.json`` holds only those English forms. The languages
are the files present. The choice: the authorization request's ``ui_locales`` (OIDC Core
§3.1.2.1), then the person's remembered choice (the language switcher's cookie), then the
browser's ``Accept-Language``, then English. Flow labels of the default flows are in the
catalogs too; a team's own labels show as they wrote them.

Plural rules, numbers, dates, language names and the writing direction come from Babel
(CLDR). PERF: Babel's data is read at the first use per language and kept; a text without
a number or a date never touches it.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime
from functools import cache
from importlib import resources
from typing import Any

DEFAULT = "en"
_FILES = resources.files("identityctl.i18n")
#: The languages with a catalog, by BCP 47 tag: the files present (English always).
LANGUAGES = tuple(sorted({DEFAULT} | {entry.name.removesuffix(".json")
                                      for entry in _FILES.iterdir()
                                      if entry.name.endswith(".json")}))
_RANGE = re.compile(r"^\s*([A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*)\s*(?:;\s*q\s*=\s*([0-9.]+))?\s*$")
#: A catalog entry: a translation, or a counted text's forms by CLDR plural category.
Entry = str | dict[str, str]


@cache
def catalog(language: str) -> dict[str, Entry]:
    """English text -> this language's (English: only the forms of counted texts; empty for
    unknown languages)."""
    if language not in LANGUAGES:
        return {}
    entry = _FILES.joinpath(f"{language}.json")
    return json.loads(entry.read_text(encoding="utf-8")) if entry.is_file() else {}


def translate(language: str, text: str, **values: Any) -> str:
    """``text`` in ``language``, with ``{name}`` placeholders filled: a counted text in the
    form its ``count`` takes, numbers, days and times as the language writes them."""
    entry = catalog(language).get(text)
    if entry is None:
        language, entry = DEFAULT, catalog(DEFAULT).get(text, text)
    if isinstance(entry, dict):
        entry = entry.get(plural_category(language, values["count"])) or entry["other"]
    if not values:
        return entry
    return entry.format(**{name: _written(language, value) for name, value in values.items()})


def _written(language: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float | date):
        return value
    if isinstance(value, datetime):
        return format_time(language, value)
    if isinstance(value, date):
        from babel.dates import format_date

        return format_date(value, format="medium", locale=_locale(language))
    from babel.numbers import format_decimal  # PERF: Babel only where a number is shown

    return format_decimal(value, locale=_locale(language))


@cache
def _locale(language: str) -> Any:
    from babel import Locale

    return Locale.parse(language, sep="-")


def plural_category(language: str, count: float) -> str:
    """CLDR's plural category of ``count`` in ``language`` ("one", "few", "other"...)."""
    return _locale(language).plural_form(count)


def plural_categories(language: str) -> frozenset[str]:
    """The categories a counted text has in ``language`` ("other" always)."""
    return _locale(language).plural_form.tags | {"other"}


def format_time(language: str, moment: datetime) -> str:
    """A moment (in UTC) as ``language`` writes a date and time, with its zone named."""
    from babel.dates import format_datetime

    return format_datetime(moment.astimezone(UTC), format="medium", tzinfo=UTC,
                           locale=_locale(language)) + " UTC"


def direction(language: str) -> str:
    """``rtl`` for a language written right to left (Arabic), else ``ltr``."""
    return "rtl" if _locale(language).character_order == "right-to-left" else "ltr"


@cache
def names() -> tuple[tuple[str, str], ...]:
    """(tag, the language's name in itself) of every language, for the switcher."""
    def own_name(tag: str) -> str:
        name = _locale(tag).get_display_name() or tag
        return name[:1].upper() + name[1:]

    return tuple((tag, own_name(tag)) for tag in LANGUAGES)


def _ranked(accept_language: str) -> list[str]:
    """The language tags of an Accept-Language header, most wanted first."""
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
            weighted.append((-quality, index, match.group(1)))
    return [tag for _, _, tag in sorted(weighted)]


@cache
def _likely_subtags() -> dict[str, str]:
    from babel.core import get_global

    return dict(get_global("likely_subtags"))


def _explicit_script(tag: str) -> str:
    return next((part.lower() for part in tag.split("-")[1:]
                 if len(part) == 4 and part.isalpha()), "")


def _script(tag: str) -> str:
    """The script ``tag`` is written in: its own script subtag, else CLDR's likely one for
    the language in its region (``zh-TW``: Hant, ``zh-SG``: Hans, ``pt``: Latn)."""
    if script := _explicit_script(tag):
        return script
    language, *rest = tag.lower().split("-")
    region = next((part for part in rest if len(part) == 2 or part.isdigit()), None)
    likely = _likely_subtags()
    full = (region and likely.get(f"{language}_{region.upper()}")) or likely.get(language, "")
    return next((part.lower() for part in full.split("_")[1:] if len(part) == 4), "")


@cache
def _by_language() -> dict[str, tuple[str, ...]]:
    """Primary language subtag -> the catalogs in that language."""
    grouped: dict[str, tuple[str, ...]] = {}
    for tag in LANGUAGES:
        primary = tag.split("-")[0].lower()
        grouped[primary] = (*grouped.get(primary, ()), tag)
    return grouped


def match(wanted: str) -> str | None:
    """The catalog for the BCP 47 tag ``wanted``: one in the same language, written in the
    same script when a script is named on either side (``pt-PT`` gets ``pt-BR``, ``zh-SG``
    gets ``zh-Hans``, ``zh-TW`` none)."""
    candidates = _by_language().get(wanted.split("-")[0].lower(), ())
    if not candidates or len(wanted) > 35:
        return None
    exact = next((tag for tag in candidates if tag.lower() == wanted.lower()), None)
    if exact:
        return exact
    # PERF: CLDR's likely scripts (Babel) only when a script decides; "de-AT" needs none.
    if not _explicit_script(wanted) and not any(map(_explicit_script, candidates)):
        return candidates[0]
    script = _script(wanted)
    return next((tag for tag in candidates if _script(tag) == script), None)


def choose(*, ui_locales: str | None = None, remembered: str | None = None,
           accept_language: str | None = None) -> str:
    """The page's language: the first of ``ui_locales`` (space-separated BCP 47 tags), the
    ``remembered`` choice, then ``Accept-Language``, that has a catalog; else English."""
    wanted = [*(ui_locales or "").split()[:10], *([remembered] if remembered else []),
              *_ranked(accept_language or "")]
    return next((found for tag in wanted if (found := match(tag))), DEFAULT)
