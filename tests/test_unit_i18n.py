"""Which language a page speaks (i18n/__init__.py): ui_locales, then the remembered choice,
then Accept-Language, then English; every catalog has every text with the placeholders of
the English one, and every counted text in every plural form its language has (CLDR)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from identityctl import i18n

#: The languages a person can choose, by the tag <html lang> carries.
SHIPPED = ("ar", "de", "en", "es", "fr", "it", "ja", "nl", "pl", "pt-BR", "zh-Hans")


def _placeholders(text: str) -> set[str]:
    return set(re.findall(r"\{\w+\}", text))


def test_the_languages_are_the_catalog_files_present() -> None:
    assert i18n.LANGUAGES == SHIPPED
    assert dict(i18n.names()) == {
        "ar": "العربية", "de": "Deutsch", "en": "English", "es": "Español",
        "fr": "Français", "it": "Italiano", "ja": "日本語", "nl": "Nederlands",
        "pl": "Polski", "pt-BR": "Português (Brasil)", "zh-Hans": "中文 (简体)"}
    assert [tag for tag in SHIPPED if i18n.direction(tag) == "rtl"] == ["ar"]


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


def test_every_catalog_has_every_text_with_the_placeholders_and_spaces_of_the_english_one(
        ) -> None:
    english = set(i18n.catalog("de")) | set(i18n.catalog("en"))
    for language in SHIPPED:
        if language == "en":
            continue
        found = i18n.catalog(language)
        assert set(found) == english, (language, english ^ set(found))
        for text, translated in found.items():
            forms = translated.values() if isinstance(translated, dict) else [translated]
            for form in forms:
                assert _placeholders(form) <= _placeholders(text), (language, text)
                # A leading or trailing space joins a text to the next one on the page.
                assert (form.startswith(" "), form.endswith(" ")) == \
                    (text.startswith(" "), text.endswith(" ")), (language, text)
            whole = translated["other"] if isinstance(translated, dict) else translated
            assert _placeholders(whole) == _placeholders(text), (language, text)


def test_every_counted_text_has_each_plural_form_of_its_language() -> None:
    counted = i18n.catalog("en")
    assert counted, "en.json holds the English forms of the counted texts"
    for language in SHIPPED:
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
