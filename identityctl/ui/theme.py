"""An application's theme as CSS custom properties (served as a stylesheet, never inline).

Theme documents come from admins and MCP clients, so every name and value is checked
before it reaches CSS: a value cannot close the declaration or the rule (no ``;{}<>\\``),
and anything else is dropped rather than escaped.
"""

from __future__ import annotations

import re
from typing import Any

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,40}$")
_VALUE = re.compile(r"^[\w\s#%(),.'\"+\-/]{1,200}$")
LIGHT, DARK = "light", "dark"


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", name).lower()


def _declarations(values: dict[str, Any], prefix: str) -> list[str]:
    return [f"  --{prefix}{_kebab(name)}: {value};" for name, value in values.items()
            if _NAME.match(str(name)) and isinstance(value, str | int | float)
            and not isinstance(value, bool) and _VALUE.match(str(value))]


def stylesheet(theme: dict[str, Any]) -> str:
    """``:root`` variables: ``--color-*`` per color scheme (dark via prefers-color-scheme)
    and one variable per typography setting (``fontFamily`` -> ``--font-family``)."""
    schemes = {name: colors for name, colors in (theme.get("colorSchemes") or {}).items()
               if isinstance(colors, dict)}
    default = schemes.get(LIGHT) or next(iter(schemes.values()), {})
    typography = theme.get("typography") or {}
    lines = [":root {", f"  color-scheme: {'light dark' if DARK in schemes else 'light'};",
             *_declarations(default, "color-"),
             *_declarations(typography if isinstance(typography, dict) else {}, ""), "}"]
    if DARK in schemes and schemes[DARK] is not default:
        lines += ["@media (prefers-color-scheme: dark) {", ":root {",
                  *_declarations(schemes[DARK], "color-"), "}", "}"]
    return "\n".join(lines) + "\n"
