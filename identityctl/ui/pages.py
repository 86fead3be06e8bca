"""The hosted UI's HTML pages and static files, read from the package (no build step).

Pages are plain HTML templates (``ui/templates``) filled with escaped values; all behaviour
is in ``ui/static/gate.js``, loaded from the same origin, so the pages run under a CSP with
no inline script or style at all.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template

from identityctl import i18n

#: Pages may load scripts, styles and images from this origin only, talk only to it,
#: never be framed (clickjacking) and never post forms elsewhere.
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
                ".svg": "image/svg+xml"}


@dataclass(frozen=True, slots=True)
class StaticFile:
    content: bytes
    content_type: str


@cache
def _template(name: str) -> Template:
    return Template(resources.files("identityctl.ui").joinpath("templates", name).read_text())


def render(name: str, **values: str) -> str:
    """Template ``name`` with every ``$value`` HTML-escaped."""
    return _template(name).substitute({key: html.escape(value, quote=True)
                                       for key, value in values.items()})


@dataclass(frozen=True, slots=True)
class Assets:
    """Where a page's stylesheets and scripts come from, and where its language switcher
    posts."""

    theme_stylesheet: str
    static: str
    language_switch: str


def page(*, title: str, main: str, assets: Assets, scripts: tuple[str, ...] = (),
         language: str = i18n.DEFAULT, here: str = "/") -> str:
    """A whole page in ``language`` around already-rendered ``main`` (and deferred
    ``scripts``, run in order after ``i18n.js``, which reads the page's catalog), with the
    language switcher that comes back to ``here`` (the page's path and query)."""
    scripts = ("i18n.js", *scripts) if scripts else ()
    tags = "".join(f'<script src="{html.escape(f"{assets.static}/{script}", quote=True)}" '
                   'defer></script>' for script in scripts)
    # A data block, not script: CSP does not run it; "<" escaped so it cannot end the tag.
    messages = json.dumps(i18n.catalog(language) if scripts else {},
                          ensure_ascii=False).replace("<", "\\u003c")
    layout = _template("page.html")
    return layout.substitute(title=html.escape(title), main=main, scripts=tags,
                             lang=language, dir=i18n.direction(language), messages=messages,
                             languages=_switcher(assets, language, here),
                             theme_stylesheet=html.escape(assets.theme_stylesheet, quote=True),
                             static=html.escape(assets.static, quote=True))


def _switcher(assets: Assets, language: str, here: str) -> str:
    """The language switcher: a form (no script needed) listing each language in its own
    words, that posts the choice and comes back to ``here``."""
    options = "".join(
        f'<option value="{tag}" lang="{tag}"{" selected" if tag == language else ""}>'
        f"{html.escape(name)}</option>" for tag, name in i18n.names())
    return _template("languages.html").substitute(
        action=html.escape(assets.language_switch, quote=True),
        label=html.escape(i18n.translate(language, "Language")), options=options,
        here=html.escape(here, quote=True),
        change=html.escape(i18n.translate(language, "Change language")))


@cache
def static_file(name: str) -> StaticFile | None:
    """A file of ``ui/static`` by bare name (no paths), or None."""
    suffix = name[name.rfind("."):] if "." in name else ""
    if "/" in name or "\\" in name or name.startswith(".") or suffix not in STATIC_TYPES:
        return None
    entry = resources.files("identityctl.ui").joinpath("static", name)
    if not entry.is_file():
        return None
    return StaticFile(content=entry.read_bytes(), content_type=STATIC_TYPES[suffix])


def message_page(*, title: str, text: str, assets: Assets, error: str = "",
                 back: tuple[str, str] | None = None, language: str = i18n.DEFAULT,
                 here: str = "/") -> str:
    """A page that only says something: an error before the redirect is trusted, signed out.

    ``error``: the stable code, for programs (a data attribute; people read the words).
    ``back``: (text, URL) of a link back, e.g. to the application."""
    back_text, back_url = back or ("", "")
    title, text = i18n.translate(language, title), i18n.translate(language, text)
    return page(title=title, assets=assets, language=language, here=here, main=render(
        "message.html", title=title, text=text, error=error,
        back_text=i18n.translate(language, back_text), back_url=back_url,
        back_hidden="" if back else "hidden"))
