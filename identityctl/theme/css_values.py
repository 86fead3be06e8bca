"""The grammar of theme values: what a theme may put into a CSS custom property.

Pure functions (no HTTP, no store). Each takes a value from a theme document and the field
path that names it (``theme.colorSchemes.light.primary``), and returns the value as the CSS
text to write, or raises :class:`~identityctl.errors.InvalidField` naming that path.

Every kind first goes through the same gate (:func:`component_values`): a string of at most
:data:`MAX_CHARS` characters without control characters, line breaks, ``\\ ; { } < >`` or
comments, that tinycss2 parses without an error, whose brackets and quotes are all closed,
and that holds no ``url()`` and no function that computes or fetches (``var()``, ``calc()``,
``env()``, ``attr()``, ``expression()``, ``image()`` ...). Then the kind's own grammar
decides, on tinycss2's component values, never on the text:

- **colour** (:func:`color`): one value that ``tinycss2.color4.parse_color`` accepts: CSS
  Color 4 names (``teal``, ``transparent``, ``currentcolor``), ``#rgb``, ``#rgba``,
  ``#rrggbb``, ``#rrggbbaa``, ``rgb()``/``rgba()``, ``hsl()``/``hsla()``, ``hwb()``,
  ``lab()``, ``lch()``, ``oklab()``, ``oklch()``, ``color()`` with numeric arguments.
- **length** (:func:`length`): one dimension with a unit of :data:`LENGTH_UNITS`, a
  percentage, or unitless ``0``. Negative values are refused (every length a theme sets —
  font size, border radius — is invalid below zero in CSS), and so is ``calc()``.
- **font family** (:func:`font_family`): a comma-separated list of family names, each a
  quoted string or a sequence of identifiers (``Segoe UI``, ``-apple-system``, generic
  families such as ``sans-serif`` and ``system-ui``); CSS-wide keywords (``inherit``,
  ``initial`` ...) and ``default`` are not family names.
- **font weight** (:func:`font_weight`): ``normal``, ``bold``, ``bolder``, ``lighter`` or a
  number from 1 to 1000 (a JSON number or a string).

The text returned is tinycss2's serialization of the parsed value (quotes may become double
quotes), so what reaches the stylesheet is what the grammar saw.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any

import tinycss2
import tinycss2.ast
from tinycss2.color4 import parse_color

from identityctl.errors import InvalidField

MAX_CHARS = 200
LENGTH_UNITS = ("px", "rem", "em", "vh", "vw", "ch", "pt")  # and percentages
FONT_WEIGHT_KEYWORDS = ("normal", "bold", "bolder", "lighter")
#: Keywords that mean something else than a family name when unquoted.
NOT_FAMILY_NAMES = ("inherit", "initial", "unset", "revert", "revert-layer", "default")
#: Characters no theme value may hold, even inside a quoted string.
FORBIDDEN_CHARS = {"\\": "a backslash", ";": "';'", "{": "'{'", "}": "'}'", "<": "'<'",
                   ">": "'>'"}
#: Functions that fetch, compute or read other values: refused wherever they appear.
FORBIDDEN_FUNCTIONS = ("url", "src", "var", "env", "attr", "calc", "expression", "image",
                       "image-set", "element", "cross-fade", "paint", "if", "min", "max",
                       "clamp")

Checker = Callable[[Any, str], str]


def _shown(value: str) -> str:
    """The value for an error message (quoted, escaped, cut short)."""
    return repr(value if len(value) <= 60 else value[:57] + "...")


def _refuse_character(value: str, field: str) -> None:
    if "/*" in value:
        raise InvalidField(field, f"must not contain a comment: {_shown(value)}")
    for char in value:
        if char in FORBIDDEN_CHARS:
            raise InvalidField(field, f"must not contain {FORBIDDEN_CHARS[char]}: "
                                      f"{_shown(value)}")
        if unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp"):
            raise InvalidField(field, "must not contain a line break or control character "
                                      f"(U+{ord(char):04X}): {_shown(value)}")


def _walk(nodes: list[Any]) -> Any:
    for node in nodes:
        yield node
        if node.type in ("function", "() block", "[] block", "{} block"):
            yield from _walk(node.arguments if node.type == "function" else node.content)


def component_values(value: Any, field: str) -> list[Any]:
    """The gate every theme value passes: tinycss2 component values without surrounding
    whitespace, or InvalidField naming ``field``."""
    if not isinstance(value, str):
        raise InvalidField(field, f"must be a string, not {type(value).__name__}")
    if not value.strip():
        raise InvalidField(field, "must not be empty")
    if len(value) > MAX_CHARS:
        raise InvalidField(field, f"must be at most {MAX_CHARS} characters")
    _refuse_character(value, field)
    nodes = tinycss2.parse_component_value_list(value, skip_comments=False)
    # ';' is refused above, so a ';' appended after the value is only seen at the top level
    # when every bracket and quote of the value was closed (tinycss2 closes them at the end
    # of its input without telling).
    closed = [node for node in tinycss2.parse_component_value_list(value + ";")
              if node.type != "whitespace"]
    if not closed or closed[-1].type != "literal" or closed[-1].value != ";":
        raise InvalidField(field, f"has an unclosed bracket or quote: {_shown(value)}")
    for node in _walk(nodes):
        if node.type == "error":
            raise InvalidField(field, f"is not valid CSS ({node.message}): {_shown(value)}")
        if node.type == "comment":
            raise InvalidField(field, f"must not contain a comment: {_shown(value)}")
        if node.type == "url" or (node.type == "function"
                                  and node.lower_name in FORBIDDEN_FUNCTIONS):
            name = "url" if node.type == "url" else node.lower_name
            raise InvalidField(field, f"must not contain {name}(): {_shown(value)}")
        if node.type in ("at-keyword", "{} block"):
            raise InvalidField(field, f"must be a single value: {_shown(value)}")
    while nodes and nodes[0].type == "whitespace":
        nodes.pop(0)
    while nodes and nodes[-1].type == "whitespace":
        nodes.pop()
    return nodes


def _single(value: Any, field: str, expected: str) -> Any:
    nodes = component_values(value, field)
    if len(nodes) != 1:
        raise InvalidField(field, f"must be {expected}, not {_shown(value)}")
    return nodes[0]


def color(value: Any, field: str) -> str:
    """A CSS Color 4 colour (see the module docstring), as CSS text."""
    expected = "a CSS colour (a name such as 'teal', #rrggbb, rgb(), hsl(), oklch() ...)"
    node = _single(value, field, expected)
    if parse_color(node) is None:
        raise InvalidField(field, f"must be {expected}, not {_shown(value)}")
    return tinycss2.serialize([node])


def length(value: Any, field: str) -> str:
    """A non-negative length: a number with a unit of LENGTH_UNITS, a percentage, or 0."""
    expected = f"a length (a number with {', '.join(LENGTH_UNITS)} or %, or 0)"
    node = _single(value, field, expected)
    if ((node.type == "dimension" and node.lower_unit in LENGTH_UNITS)
            or node.type == "percentage" or (node.type == "number" and node.value == 0)):
        if node.value < 0:
            raise InvalidField(field, f"must not be negative: {_shown(value)}")
        return tinycss2.serialize([node])
    raise InvalidField(field, f"must be {expected}, not {_shown(value)}")


def font_weight(value: Any, field: str) -> str:
    """``normal``, ``bold``, ``bolder``, ``lighter`` or a number from 1 to 1000."""
    expected = f"a font weight ({', '.join(FONT_WEIGHT_KEYWORDS)} or a number from 1 to 1000)"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if 1 <= value <= 1000:
            return str(value)
        raise InvalidField(field, f"must be {expected}, not {value!r}")
    node = _single(value, field, expected)
    if (node.type == "ident" and node.lower_value in FONT_WEIGHT_KEYWORDS) or (
            node.type == "number" and 1 <= node.value <= 1000):
        return tinycss2.serialize([node])
    raise InvalidField(field, f"must be {expected}, not {_shown(value)}")


def _family(nodes: list[Any], field: str, value: str) -> list[Any]:
    while nodes and nodes[0].type == "whitespace":
        nodes = nodes[1:]
    while nodes and nodes[-1].type == "whitespace":
        nodes = nodes[:-1]
    if not nodes:
        raise InvalidField(field, f"has an empty family name: {_shown(value)}")
    if len(nodes) == 1 and nodes[0].type == "string":
        return nodes
    words = [node for node in nodes if node.type != "whitespace"]
    if not all(node.type == "ident" for node in words):
        raise InvalidField(field, "must be family names (quoted, or words) separated by "
                                  f"commas, not {_shown(value)}")
    if len(words) == 1 and words[0].lower_value in NOT_FAMILY_NAMES:
        raise InvalidField(field, f"{words[0].value!r} is not a family name; quote it")
    # One space between the words of a name, whatever the value had.
    return [node for word in words for node in (tinycss2.ast.WhitespaceToken(0, 0, " "), word)][1:]


def font_family(value: Any, field: str) -> str:
    """A comma-separated list of family names (quoted strings or identifier sequences)."""
    nodes = component_values(value, field)
    families: list[list[Any]] = [[]]
    for node in nodes:
        if node.type == "literal" and node.value == ",":
            families.append([])
        else:
            families[-1].append(node)
    return ", ".join(tinycss2.serialize(_family(family, field, value)) for family in families)


#: Typography keys and the grammar of each (the variables gate.css reads).
TYPOGRAPHY: dict[str, Checker] = {
    "fontFamily": font_family, "fontSize": length, "headingWeight": font_weight,
    "borderRadius": length,
}
