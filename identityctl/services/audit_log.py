"""The audit log as the adapters see it: reading it, keeping it within its retention, and
naming the client address of what a request's tools change."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from identityctl.store import audit


def events(*, since: float | None = None, user_id: str | None = None,
           event: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """The newest events first, filtered by time, user and event name."""
    return audit.events(since=since, user_id=user_id, event=event, limit=limit)


def purge(retention_days: int) -> int:
    """Delete events older than ``retention_days`` (security.audit_retention_days); how many."""
    return audit.purge(retention_days)


@contextlib.contextmanager
def request_address(address: str) -> Iterator[None]:
    """Events recorded inside name ``address`` when they name none themselves (the /mcp tools
    call the same services as the CLI, which take no address)."""
    with audit.request_address(address):
        yield
