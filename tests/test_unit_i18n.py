"""Which language a page speaks (i18n/__init__.py): ui_locales, then Accept-Language, then
English; and every text of the German catalog fills the same placeholders."""

from __future__ import annotations

import re

import pytest

from identityctl import i18n


@pytest.mark.parametrize(("ui_locales", "accept_language", "chosen"), [
    (None, None, "en"),
    (None, "de-DE,de;q=0.9,en;q=0.8", "de"),
    (None, "fr-CH, fr;q=0.9, de;q=0.7, *;q=0.5", "de"),
    (None, "en;q=0.2, de;q=0.9", "de"),
    (None, "de;q=0", "en"),
    ("de", "en-US", "de"),
    ("fr de", None, "de"),
    ("fr", "es", "en"),
    (None, "garbage;;q=x, ,de", "de"),
])
def test_the_language_is_ui_locales_then_accept_language_then_english(
        ui_locales: str | None, accept_language: str | None, chosen: str) -> None:
    assert i18n.choose(ui_locales=ui_locales, accept_language=accept_language) == chosen


def test_every_german_text_keeps_the_placeholders_of_the_english_one() -> None:
    for english, german in i18n.catalog("de").items():
        assert set(re.findall(r"\{\w+\}", english)) == set(re.findall(r"\{\w+\}", german)), \
            english
    assert i18n.translate("de", "Allow {client} to use your account?", client="X") == \
        "X Zugriff auf Ihr Konto erlauben?"
    assert i18n.translate("en", "Sign in") == "Sign in"
