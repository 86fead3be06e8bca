"""Which authenticator made a passkey: its name and icon by AAGUID (the community list)."""

from __future__ import annotations

from identityctl.passkey.authenticators import (
    DARK,
    UNKNOWN_AAGUID,
    authenticator_fields,
    authenticator_icon,
    authenticator_name,
)

WINDOWS_HELLO = "08987058-cadc-4b81-b6e1-30de50dcbe96"  # one icon for light and dark
UNIQKEY = "45e3057e-b2f9-48ed-912f-9b901e153b16"  # an icon for each
CHROMIUM = "b5397666-4885-aa6b-cebf-e52262a439a2"  # a name without an icon
NOBODYS = "11111111-2222-3333-4444-555555555555"
BASE = "https://id.example.com"


def test_a_known_authenticator_has_its_name_in_any_spelling_of_its_aaguid() -> None:
    assert authenticator_name(WINDOWS_HELLO) == "Windows Hello"
    assert authenticator_name(WINDOWS_HELLO.upper().replace("-", "")) == "Windows Hello"
    assert authenticator_name(f"  {WINDOWS_HELLO}  ") == "Windows Hello"


def test_its_icon_is_an_svg_with_a_dark_variant_where_the_list_has_one() -> None:
    light, dark = authenticator_icon(UNIQKEY), authenticator_icon(UNIQKEY, scheme=DARK)
    assert light and dark and light != dark
    assert b"<svg" in light and b"<svg" in dark
    assert authenticator_icon(WINDOWS_HELLO, scheme=DARK) == authenticator_icon(WINDOWS_HELLO)


def test_zeros_unknown_and_malformed_aaguids_have_neither_name_nor_icon() -> None:
    for aaguid in (UNKNOWN_AAGUID, NOBODYS, "", "not-an-aaguid", "g" * 32):
        assert authenticator_name(aaguid) is None
        assert authenticator_icon(aaguid) is None
        assert authenticator_fields(aaguid, base_url=BASE) == {
            "authenticator": None, "icon": None, "iconDark": None}


def test_lists_show_the_name_and_the_icons_urls_under_the_base_url() -> None:
    assert authenticator_fields(UNIQKEY.upper(), base_url=BASE) == {
        "authenticator": "Uniqkey", "icon": f"{BASE}/authenticators/{UNIQKEY}/icon",
        "iconDark": f"{BASE}/authenticators/{UNIQKEY}/icon?scheme=dark"}
    assert authenticator_fields(CHROMIUM, base_url=BASE) == {
        "authenticator": "Chromium Browser", "icon": None, "iconDark": None}
