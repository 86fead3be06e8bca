"""Theme values are checked by a CSS grammar (identityctl.theme.css_values) before they are stored
and again before /gate/theme.css is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tinycss2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from identityctl.errors import InvalidField
from identityctl.services.admin.bootstrap import DEFAULT_THEME
from identityctl.store import catalog as catalog_store
from identityctl.theme import css_values
from identityctl.theme import stylesheet as theme
from identityctl.theme.branding import page_branding
from tests.conftest import Service
from tests.test_cli_directory import Cli, ok_json

REDIRECT = "https://shop.example.com/callback"
CHECKERS = {"color": css_values.color, "length": css_values.length,
            "font_family": css_values.font_family, "font_weight": css_values.font_weight}
HOSTILE = ["red; } body { x: url(//evil)", "rgb(1, 2, 3", "(", "red\nblue", "10px\n",
           "url(//host/a.png)", "url('//host/a.png')", "var(--x)", "calc(1px + 2px)",
           "red /* c */", "'Open Sans", "red !important", "expression(alert(1))",
           "</style>", "\\75 rl(x)", "@import", "red}", "{", "", "   ", "a" * 201,
           "env(safe-area-inset-top)", "attr(title)", "image(red)", "U+0-7F"]


def refused(check: Any, value: Any) -> str:
    with pytest.raises(InvalidField) as caught:
        check(value, "theme.x")
    assert caught.value.field == "theme.x" and caught.value.code == "invalid_field"
    return str(caught.value)


# --- the grammar of each kind ---------------------------------------------------------------


@pytest.mark.parametrize("value", [
    "red", "RebeccaPurple", "transparent", "currentcolor", "#abc", "#abcd", "#3451b2",
    "#3451B2cc", "rgb(1, 2, 3)", "rgb(1 2 3 / 50%)", "rgba(0,0,0,.5)", "hsl(120deg 50% 50%)",
    "hsla(120, 50%, 50%, 0.3)", "hwb(10 20% 30%)", "lab(50% 40 59)", "lch(50% 40 120)",
    "oklab(0.5 0.1 0.1)", "oklch(70% 0.1 200 / .5)", "color(display-p3 1 0 0)",
    " #fff ",
])
def test_css_color_4_colours_are_accepted(value: str) -> None:
    assert css_values.color(value, "theme.x") == value.strip()


@pytest.mark.parametrize("value", [
    *HOSTILE, "#abcde", "#ggg", "notacolour", "Canvas", "red blue", "rgb(1 2)", "rgb(1,2,3))",
    "rgb(var(--x) 0 0)", "rgb(calc(1) 2 3)", "rgb(from red r g b)", "10px", 12, None, ["red"],
])
def test_anything_else_is_not_a_colour(value: Any) -> None:
    refused(css_values.color, value)


@pytest.mark.parametrize("value", ["16px", "1.5rem", "2em", "10%", "50vh", "100vw", "60ch",
                                   "12pt", "0", "0.0", "1REM", " 10px "])
def test_lengths_are_one_dimension_with_an_allowed_unit(value: str) -> None:
    assert css_values.length(value, "theme.x") == value.strip()


@pytest.mark.parametrize("value", [*HOSTILE, "16", "10deg", "1in", "2cm", "3q", "10px 2px",
                                   "min(1px, 2px)", "clamp(1px, 2vw, 3px)", "auto", "large",
                                   "#fff", 16, 0])
def test_other_lengths_are_refused(value: Any) -> None:
    refused(css_values.length, value)


def test_negative_lengths_are_refused() -> None:
    assert "negative" in refused(css_values.length, "-1px")
    assert "negative" in refused(css_values.length, "-5%")


@pytest.mark.parametrize(("value", "css"), [
    ("system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
     'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif'),
    ("Georgia, serif", "Georgia, serif"),
    ("Open   Sans ,serif", "Open Sans, serif"),
    ('"Font (Pro) 2", monospace', '"Font (Pro) 2", monospace'),
    ("'It''s'", None),  # two strings in one family: refused below
    ("ui-rounded", "ui-rounded"),
    ("'inherit', cursive", '"inherit", cursive'),
])
def test_font_families_are_names_or_strings(value: str, css: str | None) -> None:
    if css is None:
        refused(css_values.font_family, value)
    else:
        assert css_values.font_family(value, "theme.x") == css


@pytest.mark.parametrize("value", [*HOSTILE, "a,,b", ",serif", "serif,", "Font 2", "inherit",
                                   "serif, initial", "default", "f(x)", "#abc", "10px",
                                   "'a' b", "serif !", ["serif"]])
def test_other_font_families_are_refused(value: Any) -> None:
    refused(css_values.font_family, value)


@pytest.mark.parametrize(("value", "css"), [("650", "650"), (650, "650"), (1, "1"),
                                            (1000, "1000"), ("bold", "bold"),
                                            ("normal", "normal"), ("lighter", "lighter"),
                                            (" 400 ", "400"), (450.5, "450.5")])
def test_font_weights(value: Any, css: str) -> None:
    assert css_values.font_weight(value, "theme.x") == css


@pytest.mark.parametrize("value", [*HOSTILE, "0", 0, 1001, "1001", "650px", "heavy", True,
                                   "bold 700", float("nan")])
def test_other_font_weights_are_refused(value: Any) -> None:
    refused(css_values.font_weight, value)


# --- the theme document ---------------------------------------------------------------------


def test_the_default_theme_is_valid() -> None:
    assert theme.validate_theme(DEFAULT_THEME) is DEFAULT_THEME


@pytest.mark.parametrize(("document", "field"), [
    ({"colorSchemes": {"light": {"primary": "red; } body { x: url(//evil)"}}},
     "theme.colorSchemes.light.primary"),
    ({"colorSchemes": {"dark": {"text": "url(//host/a.png)"}}}, "theme.colorSchemes.dark.text"),
    ({"colorSchemes": {"light": {"on-primary": "red"}}}, "theme.colorSchemes.light"),
    ({"colorSchemes": {"light": 1}}, "theme.colorSchemes"),
    ({"typography": {"fontSize": "12px\n"}}, "theme.typography.fontSize"),
    ({"typography": {"borderRadius": "calc(1px)"}}, "theme.typography.borderRadius"),
    ({"typography": {"fontFamily": "serif; x"}}, "theme.typography.fontFamily"),
    ({"typography": {"headingWeight": "(("}}, "theme.typography.headingWeight"),
    ({"typography": {"letterSpacing": "1px"}}, "theme.typography"),
    ({"typography": []}, "theme.typography"),
    ({"logo": "url(//host/a.png)"}, "theme"),
    ([], "theme"),
])
def test_a_refused_value_names_its_field(document: Any, field: str) -> None:
    with pytest.raises(InvalidField) as caught:
        theme.validate_theme(document)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"Field '{field}': ")


def test_the_stylesheet_re_validates_stored_values() -> None:
    stored = {"colorSchemes": {"light": {"primary": "red; } body { x: url(//evil)",
                                         "text": "#000", "bad-name": "red"},
                               "dark": {"primary": "url(//host/a.png)", "text": "#fff"}},
              "typography": {"fontSize": "12px", "fontFamily": "a\nb", "other": "x{"},
              "unknown": {"x": "y"}}
    css = theme.stylesheet(stored)
    assert declarations(css) == [("color-scheme", "light dark"), ("--color-text", "#000"),
                                 ("--font-size", "12px"), ("--color-text", "#fff")]
    assert "evil" not in css and "url" not in css and "a\nb" not in css
    assert theme.stylesheet("not a theme") == theme.stylesheet({})
    assert theme.stylesheet({"colorSchemes": {"light": "red"}, "typography": 3}) == (
        ":root {\n  color-scheme: light;\n}\n")


def test_the_stylesheet_writes_the_serialized_value() -> None:
    css = theme.stylesheet(DEFAULT_THEME)
    assert '--font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;' in css
    assert "@media (prefers-color-scheme: dark)" in css


# --- properties -----------------------------------------------------------------------------

PIECES = ["url(", "rgb(", "hsl(", "var(", "calc(", "(", ")", "[", "]", "{", "}", ";", ":",
          ",", " ", "\n", "\t", "'", '"', "/*", "*/", "\\", "!important", "<", ">", "@", "#",
          "#abc", "red", "serif", "Open", "Sans", "-", "+", "0", "1", "10", "px", "rem", "%",
          ".", "/", "e", "bold", "inherit", "\x00", "\u2028", "é", "--x", "//evil"]
hostile_text = st.one_of(st.lists(st.sampled_from(PIECES), max_size=12).map("".join),
                         st.text(max_size=20))


def declarations(css: str) -> list[tuple[str, str]]:
    """The declarations of a stylesheet of :root rules (and one @media around one), checking
    that nothing else is in it."""
    found = []
    rules = tinycss2.parse_stylesheet(css, skip_whitespace=True, skip_comments=False)
    for rule in rules:
        if rule.type == "at-rule":
            assert tinycss2.serialize(rule.prelude).strip() == "(prefers-color-scheme: dark)"
            rules_inside = tinycss2.parse_rule_list(rule.content, skip_whitespace=True)
            assert len(rules_inside) == 1
            rule = rules_inside[0]
        assert rule.type == "qualified-rule", rule
        assert tinycss2.serialize(rule.prelude).strip() == ":root"
        for item in tinycss2.parse_blocks_contents(rule.content, skip_whitespace=True):
            assert item.type == "declaration" and not item.important, item
            found.append((item.name, tinycss2.serialize(item.value).strip()))
    return found


colours = st.one_of(
    st.sampled_from(["red", "teal", "transparent", "currentcolor"]),
    st.from_regex(r"\A#([0-9a-f]{3}|[0-9a-f]{4}|[0-9a-f]{6}|[0-9a-f]{8})\Z"),
    st.tuples(*[st.integers(0, 255)] * 3).map(lambda rgb: "rgb({}, {}, {})".format(*rgb)))
lengths = st.one_of(st.just("0"), st.tuples(st.integers(0, 999),
                                            st.sampled_from([*css_values.LENGTH_UNITS, "%"]))
                    .map(lambda pair: f"{pair[0]}{pair[1]}"))
family_names = st.one_of(
    st.from_regex(r"\A[A-Z][a-z]{1,8}( [A-Z][a-z]{1,8}){0,2}\Z")
    .filter(lambda name: name.lower() not in css_values.NOT_FAMILY_NAMES),
    st.from_regex(r"\A[A-Za-z0-9 ()&.-]{1,12}\Z").map(lambda name: f"'{name}'"),
    st.sampled_from(["serif", "sans-serif", "monospace", "system-ui", "cursive"]))
families = st.lists(family_names, min_size=1, max_size=4).map(", ".join)
weights = st.one_of(st.integers(1, 1000), st.integers(1, 1000).map(str),
                    st.sampled_from(css_values.FONT_WEIGHT_KEYWORDS))
valid_text = st.one_of(colours, lengths, families, weights.map(str))
#: Hostile text, valid values, and valid values with hostile text before or after them.
candidates = st.one_of(hostile_text, valid_text,
                       st.tuples(valid_text, hostile_text).map("".join),
                       st.tuples(hostile_text, valid_text).map("".join))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(CHECKERS)), value=candidates)
def test_an_accepted_value_stays_inside_its_declaration(kind: str, value: str) -> None:
    check = CHECKERS[kind]
    try:
        css = check(value, "theme.x")
    except InvalidField as refusal:
        assert refusal.field == "theme.x"
        return
    assert css == css.strip() and check(css, "theme.x") == css  # canonical
    assert not any(char in css for char in "\n\r\f;{}\\<>")
    assert declarations(f":root {{\n  --x: {css};\n}}\n") == [("--x", css)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(light=st.dictionaries(st.from_regex(r"\A[a-z][A-Za-z0-9]{0,10}\Z"), colours, max_size=5),
       dark=st.dictionaries(st.from_regex(r"\A[a-z][A-Za-z0-9]{0,10}\Z"), colours, max_size=5),
       typography=st.fixed_dictionaries({}, optional={
           "fontFamily": families, "fontSize": lengths, "borderRadius": lengths,
           "headingWeight": weights}))
def test_every_valid_theme_is_accepted_and_written_whole(light: dict[str, str],
                                                         dark: dict[str, str],
                                                         typography: dict[str, Any]) -> None:
    document = {"colorSchemes": {"light": light, "dark": dark}, "typography": typography}
    assert theme.validate_theme(document) is document
    written = declarations(theme.stylesheet(document))
    assert len(written) == 1 + len(light) + len(typography) + len(dark)


# --- over the CLI and HTTP ------------------------------------------------------------------

FIELDS = {"colorSchemes.light.primary": ("colorSchemes", "light", "primary"),
          "typography.fontSize": ("typography", None, "fontSize"),
          "typography.borderRadius": ("typography", None, "borderRadius"),
          "typography.fontFamily": ("typography", None, "fontFamily")}
ATTACKS = ["red; } body { x: url(//evil)", "rgb(1, 2, 3", "10px\nbody{}", "url(//host/a.png)"]


def with_value(document: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    changed = json.loads(json.dumps(document))
    section, scheme, key = FIELDS[field]
    target = changed["theme"][section]
    (target[scheme] if scheme else target)[key] = value
    return changed


def write(tmp_path: Path, name: str, document: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def cli_error(cli: Cli, *args: str) -> dict[str, str]:
    result = cli(*args, "--json")
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)["error"]


def theme_css(service: Service, application_id: str | None = None) -> str:
    params = {"applicationId": application_id} if application_id else None
    answer = service.get("/gate/theme.css", params=params)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"].startswith("text/css")
    return answer.text


def test_hostile_values_are_refused_with_the_field_named_and_nothing_stored(
        cli: Cli, service: Service, tmp_path: Path) -> None:
    default = ok_json(cli, "theme", "show", "default")
    before = theme_css(service)
    for field in FIELDS:
        for value in ATTACKS:
            document = with_value({**default, "handle": "sea", "displayName": "Sea"},
                                  field, value)
            created = cli_error(cli, "theme", "create", "--file",
                                write(tmp_path, "sea.json", document))
            assert created["code"] == "invalid_field", (field, value, created)
            assert created["description"].startswith(f"Field 'theme.{field}': "), created
            updated = cli_error(cli, "theme", "update", "default", "--file",
                                write(tmp_path, "default.json",
                                      {"theme": with_value(default, field, value)["theme"]}))
            assert updated["code"] == "invalid_field"
            assert updated["description"].startswith(f"Field 'theme.{field}': "), updated
    assert [t["handle"] for t in ok_json(cli, "theme", "list")] == ["default"]
    assert ok_json(cli, "theme", "show", "default") == default
    assert theme_css(service) == before
    assert "evil" not in before and "url(" not in before


def test_valid_values_are_stored_and_served(cli: Cli, service: Service, tmp_path: Path) -> None:
    default = ok_json(cli, "theme", "show", "default")
    sea = {**default, "handle": "sea", "displayName": "Sea", "theme": {
        "colorSchemes": {"light": {"primary": "oklch(60% 0.15 230)", "text": "MidnightBlue"},
                         "dark": {"primary": "hsl(200 80% 70%)"}},
        "typography": {"fontFamily": "'Fira Sans', Georgia, serif", "fontSize": "1.05rem",
                       "headingWeight": 700, "borderRadius": "0"}}}
    created = ok_json(cli, "theme", "create", "--file", write(tmp_path, "sea.json", sea))
    assert created["theme"] == sea["theme"]
    app = ok_json(cli, "app", "create", "--template", "spa", "--name", "Sea shop",
                  "--redirect-uri", REDIRECT, "--theme", "sea")
    assert declarations(theme_css(service, app["id"])) == [
        ("color-scheme", "light dark"), ("--color-primary", "oklch(60% 0.15 230)"),
        ("--color-text", "MidnightBlue"), ("--font-family", '"Fira Sans", Georgia, serif'),
        ("--font-size", "1.05rem"), ("--heading-weight", "700"), ("--border-radius", "0"),
        ("--color-primary", "hsl(200 80% 70%)")]
    partial = {"theme": {**sea["theme"], "typography": {"borderRadius": "12px"}}}
    ok_json(cli, "theme", "update", "sea", "--file", write(tmp_path, "p.json", partial))
    assert ("--border-radius", "12px") in declarations(theme_css(service, app["id"]))


def test_a_theme_stored_before_the_grammar_is_cleaned_when_served(
        cli: Cli, service: Service) -> None:
    default = ok_json(cli, "theme", "show", "default")
    legacy = json.loads(json.dumps(default["theme"]))
    legacy["colorSchemes"]["light"]["primary"] = "red; } body { x: url(//evil)"
    legacy["colorSchemes"]["dark"]["text"] = "rgb(1, 2, 3"
    legacy["typography"]["fontFamily"] = "url(//host/a.png)"
    legacy["typography"]["fontSize"] = "16px\n}"
    catalog_store.update_theme(default["id"], theme=legacy)  # as the old validation allowed
    css = theme_css(service)
    names = [name for name, _ in declarations(css)]
    assert "--font-family" not in names and "--font-size" not in names
    assert names.count("--color-primary") == 1  # the dark one; light falls back to gate.css
    assert names.count("--color-text") == 1
    assert "evil" not in css and "url(" not in css and "rgb(1, 2, 3" not in css
    assert ("--border-radius", "10px") in declarations(css)


@pytest.mark.parametrize(("branding", "field"), [
    ({"productName": ""}, "theme.branding.productName"),
    ({"productName": "x" * 61}, "theme.branding.productName"),
    ({"logo": "https://cdn.example/logo.png"}, "theme.branding.logo"),
    ({"logo": "data:image/svg+xml;base64,PHN2Zz4=<script>"}, "theme.branding.logo"),
    ({"logo": "data:text/html;base64,PGgxPg=="}, "theme.branding.logo"),
    ({"termsUrl": "javascript:alert(1)"}, "theme.branding.termsUrl"),
    ({"privacyUrl": "http://example.com/privacy"}, "theme.branding.privacyUrl"),
    ({"favicon": "x"}, "theme.branding"),
])
def test_branding_values_are_checked(branding: dict, field: str) -> None:
    with pytest.raises(InvalidField) as refused:
        theme.validate_theme({"branding": branding})
    assert refused.value.field == field


def test_branding_a_page_shows_leaves_out_what_fails_the_check() -> None:
    stored = {"branding": {"productName": "Shop", "logo": "https://cdn.example/x.png",
                           "termsUrl": "https://shop.example/terms"}}
    assert page_branding(stored) == {"productName": "Shop",
                                     "termsUrl": "https://shop.example/terms"}
