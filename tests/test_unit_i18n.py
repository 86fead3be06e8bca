"""Which language a page speaks (i18n/__init__.py): ui_locales, then the remembered choice,
then Accept-Language, then English; the languages are the catalog files present; every
catalog has every text the pages and mails use (tests/support/texts.py) with the
placeholders of the English one and no other text, and every counted text in every plural
form its language has (CLDR)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from identityctl import i18n
from identityctl.config import Config
from identityctl.ui import account_page, gate
from tests.support.texts import every_text

#: The languages with a catalog of translations (English is the source's).
TRANSLATED = tuple(tag for tag in i18n.LANGUAGES if tag != i18n.DEFAULT)
#: Texts the catalogs keep that no page or mail shows through a translation, and why.
# Texts shown as they are, in every language: what a team wrote (a flow's labels, an
# application's name), a sentence built from values (an f-string description of an
# UntrustedRedirect, an OAuth error's description), the name humanized from an unlabelled
# action's ref; none can have a catalog entry.


def _placeholders(text: str) -> set[str]:
    return set(re.findall(r"\{\w+\}", text))


def test_the_languages_are_english_and_the_catalog_files_present() -> None:
    present = {path.stem for path in Path(i18n.__file__).parent.glob("*.json")}
    assert tuple(sorted(present | {i18n.DEFAULT})) == i18n.LANGUAGES


@pytest.mark.parametrize(("language", "name", "direction"), [
    ("en", "English", "ltr"), ("de", "Deutsch", "ltr"), ("pt-BR", "Português (Brasil)", "ltr"),
    ("ja", "日本語", "ltr"), ("zh-Hans", "中文 (简体)", "ltr"), ("ar", "العربية", "rtl")])
def test_each_language_is_named_in_its_own_words_and_written_in_its_direction(
        language: str, name: str, direction: str) -> None:
    assert dict(i18n.names())[language] == name
    assert i18n.direction(language) == direction


def test_every_language_has_a_name_of_its_own() -> None:
    names = dict(i18n.names())
    assert list(names) == list(i18n.LANGUAGES)
    assert len(set(names.values())) == len(names)
    assert [tag for tag, name in names.items() if name == tag] == []


@pytest.mark.parametrize(("ui_locales", "remembered", "accept_language", "chosen"), [
    (None, None, None, "en"),
    (None, None, "de-DE,de;q=0.9,en;q=0.8", "de"),
    (None, None, "sv-SE, sv;q=0.9, de;q=0.7, *;q=0.5", "de"),
    (None, None, "en;q=0.2, de;q=0.9", "de"),
    (None, None, "de;q=0", "en"),
    ("de", None, "en-US", "de"),
    ("sv de", None, None, "de"),
    ("sv", None, "fi", "en"),
    (None, None, "garbage;;q=x, ,de", "de"),
    # The remembered choice (the switcher's cookie) is under ui_locales, over the browser.
    (None, "ja", "de", "ja"),
    ("fr", "ja", "de", "fr"),
    (None, "tlh", "de", "de"),
    # Full tags: Brazilian Portuguese for every Portuguese; Simplified Chinese for the
    # regions that write it; Traditional Chinese readers are not given Simplified.
    (None, None, "pt-PT", "pt-BR"),
    (None, None, "pt", "pt-BR"),
    ("pt-br", None, None, "pt-BR"),
    (None, None, "zh-CN", "zh-Hans"),
    (None, None, "zh", "zh-Hans"),
    (None, None, "zh-SG", "zh-Hans"),
    (None, None, "zh-Hans-CN", "zh-Hans"),
    (None, None, "zh-TW", "en"),
    (None, None, "zh-Hant, ja;q=0.5", "ja"),
    (None, None, "zh-HK", "en"),
    (None, None, "ar-EG", "ar"),
])
def test_the_language_is_ui_locales_then_the_remembered_one_then_accept_language_then_english(
        ui_locales: str | None, remembered: str | None, accept_language: str | None,
        chosen: str) -> None:
    assert i18n.choose(ui_locales=ui_locales, remembered=remembered,
                       accept_language=accept_language) == chosen


@pytest.mark.parametrize("language", TRANSLATED)
def test_every_catalog_has_every_text_the_source_uses_with_its_placeholders_and_spaces(
        language: str) -> None:
    found = i18n.catalog(language)
    assert sorted(every_text() - found.keys()) == []
    for text in every_text():
        translated = found[text]
        forms = translated.values() if isinstance(translated, dict) else [translated]
        for form in forms:
            assert _placeholders(form) <= _placeholders(text), text
            # A leading or trailing space joins a text to the next one on the page.
            assert (form.startswith(" "), form.endswith(" ")) == \
                (text.startswith(" "), text.endswith(" ")), text
        whole = translated["other"] if isinstance(translated, dict) else translated
        assert _placeholders(whole) == _placeholders(text), text


@pytest.mark.parametrize("language", i18n.LANGUAGES)
def test_no_catalog_holds_a_text_the_source_does_not_use(language: str) -> None:
    assert sorted(i18n.catalog(language).keys() - every_text()) == []


def test_the_english_catalog_holds_the_forms_of_exactly_the_counted_texts() -> None:
    assert set(i18n.catalog("en")) == {text for text in every_text() if "{count}" in text}


def test_a_page_says_it_needs_script_in_its_own_language() -> None:
    assert '<noscript><p class="error">このページには JavaScript が必要です。</p></noscript>' in \
        account_page.page(Config(), language="ja")
    assert '<noscript><p class="error">Diese Anmeldeseite braucht JavaScript.</p></noscript>' \
        in gate.provider_return_page(Config(), "de")


def test_no_template_has_words_of_its_own_but_the_products_names() -> None:
    """A page's words come from the code, translated; a template holds markup, values,
    addresses, code and the names identityctl and MCP."""
    templates = Path(i18n.__file__).parent.parent / "ui" / "templates"
    for template in sorted(templates.glob("*.html")):
        shown = re.sub(r"<(pre|code)>.*?</\1>|<[^>]*>|\$\w+|/\S*", " ", template.read_text(),
                       flags=re.DOTALL)
        assert set(re.findall(r"[^\W\d_]{2,}", shown)) <= {"identityctl", "MCP"}, template.name


def test_every_counted_text_has_each_plural_form_of_its_language() -> None:
    counted = i18n.catalog("en")
    assert counted, "en.json holds the English forms of the counted texts"
    for language in i18n.LANGUAGES:
        categories = i18n.plural_categories(language)
        for text in counted:
            forms = i18n.catalog(language)[text]
            assert isinstance(forms, dict), (language, text)
            assert set(forms) == categories, (language, text, categories)


@pytest.mark.parametrize(("language", "count", "expected"), [
    ("en", 1, "You have 1 unused recovery code."),
    ("en", 3, "You have 3 unused recovery codes."),
    ("en", 1200, "You have 1,200 unused recovery codes."),
    ("de", 1, "Sie haben 1 unbenutzten Wiederherstellungscode."),
    ("fr", 1200, "Vous avez 1\u202f200 codes de récupération inutilisés."),
    ("pl", 1, "Masz 1 niewykorzystany kod odzyskiwania."),
    ("pl", 3, "Masz 3 niewykorzystane kody odzyskiwania."),
    ("pl", 5, "Masz 5 niewykorzystanych kodów odzyskiwania."),
    ("pl", 22, "Masz 22 niewykorzystane kody odzyskiwania."),
    ("ar", 2, "لديك رمزا استرداد غير مستخدمين."),
    ("ar", 3, "لديك 3 رموز استرداد غير مستخدمة."),
    ("ar", 11, "لديك 11 رمز استرداد غير مستخدم."),
    ("ja", 1, "未使用のリカバリーコードが 1 個あります。"),
])
def test_a_count_takes_its_plural_form_and_the_languages_digits(
        language: str, count: int, expected: str) -> None:
    assert i18n.translate(language, "You have {count} unused recovery codes.",
                          count=count) == expected


def test_texts_translate_and_times_are_written_as_the_language_writes_them() -> None:
    assert i18n.translate("de", "Allow {client} to use your account?", client="X") == \
        "X Zugriff auf Ihr Konto erlauben?"
    assert i18n.translate("en", "Sign in") == "Sign in"
    assert i18n.translate("xx", "Sign in") == "Sign in"
    moment = datetime(2026, 3, 4, 15, 6, tzinfo=UTC)
    assert i18n.format_time("en", moment) == "Mar 4, 2026, 3:06:00\u202fPM UTC"
    assert i18n.format_time("de", moment) == "04.03.2026, 15:06:00 UTC"
    assert i18n.translate("de", "Passkey from {date}", date=moment.date()) == \
        "Passkey vom 04.03.2026"
    assert "2026/03/04 15:06:00 UTC" in i18n.translate(
        "ja", "Sent to {address}; it works until {time}.", address="a@example.com",
        time=moment)
