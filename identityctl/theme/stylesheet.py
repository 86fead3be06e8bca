"""An application's theme as CSS custom properties (served as a stylesheet, never inline).

Theme documents come from admins (CLI) and are read by MCP clients, so every name and value
is checked by a grammar before it reaches CSS (``identityctl.theme.css_values``):

- ``colorSchemes``: scheme name -> {colour name -> colour}; a colour name is letters and
  digits starting with a letter (``onPrimary`` -> ``--color-on-primary``);
- ``typography``: the keys of ``css_values.TYPOGRAPHY``, each with its own grammar
  (``fontFamily`` font-family list, ``fontSize`` and ``borderRadius`` lengths,
  ``headingWeight`` font weight).

:func:`validate_theme` refuses anything else with ``InvalidField`` naming the field path
(``theme.colorSchemes.light.primary``). :func:`stylesheet` does not trust the store: it runs
every value through the same grammar again and writes tinycss2's serialization of what the
grammar accepted, so a value stored before the grammar existed (or written to the database
by hand) cannot reach ``/gate/theme.css`` either; such a value is left out, and ``gate.css``
falls back to its default (the default theme's value) for that variable.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from identityctl.errors import InvalidField
from identityctl.theme import css_values
from identityctl.theme.branding import validate_branding

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,40}$")
LIGHT, DARK = "light", "dark"
SECTIONS = ("colorSchemes", "typography", "branding")


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", name).lower()


def _name(name: Any, field: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidField(field, f"key {str(name)[:60]!r} must be letters and digits "
                                  "starting with a letter (at most 41)")
    return name


def _colors(scheme: str, colors: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(variable name, CSS value) of each colour of a scheme; InvalidField on the first bad
    name or value."""
    field = f"theme.colorSchemes.{scheme}"
    for name, value in colors.items():
        _name(name, field)
        yield f"--color-{_kebab(name)}", css_values.color(value, f"{field}.{name}")


def _typography(typography: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for name, value in typography.items():
        check = css_values.TYPOGRAPHY.get(name) if isinstance(name, str) else None
        if check is None:
            raise InvalidField("theme.typography",
                               f"unknown key {str(name)[:60]!r}; the keys are "
                               f"{', '.join(css_values.TYPOGRAPHY)}")
        yield f"--{_kebab(name)}", check(value, f"theme.typography.{name}")


def validate_theme(theme: Any) -> dict[str, Any]:
    """Check a theme document ({"colorSchemes": {"light": {...}, "dark": {...}},
    "typography": {...}}) and return it unchanged; raise InvalidField naming the field."""
    if not isinstance(theme, dict):
        raise InvalidField("theme", "must be an object")
    for key in theme:
        if key not in SECTIONS:
            raise InvalidField("theme", f"unknown key {str(key)[:60]!r}; a theme has "
                                        f"{' and '.join(SECTIONS)}")
    schemes = theme.get("colorSchemes", {})
    if not isinstance(schemes, dict) or not all(isinstance(v, dict) for v in schemes.values()):
        raise InvalidField("theme.colorSchemes", "must map scheme names to color objects")
    typography = theme.get("typography", {})
    if not isinstance(typography, dict):
        raise InvalidField("theme.typography", "must be an object")
    for scheme, colors in schemes.items():
        for _ in _colors(scheme, colors):
            pass
    for _ in _typography(typography):
        pass
    if "branding" in theme:
        validate_branding(theme["branding"])
    return theme


def _accepted(values: dict[str, Any], check: Any) -> Iterator[tuple[str, str]]:
    """The (variable, value) pairs of ``values`` that ``check`` accepts, one by one: a
    refused value is left out and the others are kept."""
    for name, value in values.items():
        try:
            yield from check({name: value})
        except InvalidField:
            continue


def stylesheet(theme: Any) -> str:
    """``:root`` variables: ``--color-*`` per color scheme (dark via prefers-color-scheme)
    and one variable per typography setting (``fontFamily`` -> ``--font-family``). Every value
    is re-validated here; a refused one is left out (gate.css then uses its default)."""
    theme = theme if isinstance(theme, dict) else {}
    schemes = theme.get("colorSchemes")
    schemes = {name: colors for name, colors in schemes.items()
               if isinstance(colors, dict)} if isinstance(schemes, dict) else {}
    default_name = LIGHT if LIGHT in schemes else next(iter(schemes), None)
    typography = theme.get("typography")
    typography = typography if isinstance(typography, dict) else {}

    def colors(scheme: str | None) -> list[str]:
        if scheme is None:
            return []
        return [f"  {name}: {value};" for name, value in
                _accepted(schemes[scheme], lambda one: _colors(str(scheme), one))]

    lines = [":root {", f"  color-scheme: {'light dark' if DARK in schemes else 'light'};",
             *colors(default_name),
             *[f"  {name}: {value};" for name, value in _accepted(typography, _typography)],
             "}"]
    if DARK in schemes and default_name != DARK:
        lines += ["@media (prefers-color-scheme: dark) {", ":root {", *colors(DARK), "}", "}"]
    return "\n".join(lines) + "\n"
