"""Themes: the colours and type of the hosted pages, each value checked by its CSS grammar."""

from __future__ import annotations

from typing import Any

from identityctl.errors import NotFound
from identityctl.services import audit, shapes
from identityctl.services.directory.users import check_handle
from identityctl.services.origin import RequestOrigin
from identityctl.store import catalog
from identityctl.theme import stylesheet as theme_grammar


def list_themes() -> list[dict[str, Any]]:
    return catalog.list_themes()


def themes_page(*, limit: int, offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
    """One page of themes (by handle) and how many there are in all."""
    return catalog.themes_page(limit=limit, offset=offset)


def require_theme(id_or_handle: str) -> dict[str, Any]:
    found = catalog.find_theme(id_or_handle)
    if found is None:
        raise NotFound(f"No theme '{id_or_handle}'.", code="theme_not_found")
    return found


def validate_theme(theme: dict[str, Any]) -> dict[str, Any]:
    """A theme document: {"colorSchemes": {"light": {...}, "dark": {...}}, "typography": {...}},
    every value checked by its CSS grammar (``identityctl.theme.stylesheet.validate_theme``, the one
    check that create, update and the /gate/theme.css writer share)."""
    shapes.check(theme, shapes.THEME_DOCUMENT, where="theme")
    return theme_grammar.validate_theme(theme)


def create_theme(*, handle: str, display_name: str, description: str = "",
                 theme: dict[str, Any] | None = None, origin: RequestOrigin) -> dict[str, Any]:
    check_handle(handle)
    created = catalog.create_theme(handle=handle, display_name=display_name,
                                   description=description, theme=validate_theme(theme or {}))
    audit.record("theme.create", "success", origin=origin, details={"id": created["id"]})
    return created


def update_theme(id_or_handle: str, *, origin: RequestOrigin, **fields: Any) -> dict[str, Any]:
    theme_id = require_theme(id_or_handle)["id"]
    if "handle" in fields:
        check_handle(fields["handle"])
    if "theme" in fields:
        validate_theme(fields["theme"])
    updated = catalog.update_theme(theme_id, **fields)
    audit.record("theme.update", "success", origin=origin, details={"id": theme_id})
    return updated


def delete_theme(id_or_handle: str, *, origin: RequestOrigin) -> None:
    theme_id = require_theme(id_or_handle)["id"]
    catalog.delete_theme(theme_id)
    audit.record("theme.delete", "success", origin=origin, details={"id": theme_id})
