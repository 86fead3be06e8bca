"""RFC 7592 registration access tokens, stored hashed, one per self-registered client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from identityctl.store.models import Application, ClientRegistration


@dataclass(frozen=True, slots=True)
class RegistrationRecord:
    application_id: str
    metadata: dict[str, Any]


def save(application_id: str, token_hash: str, metadata: dict[str, Any]) -> None:
    """(In the caller's transaction: the client and its token land together.)"""
    ClientRegistration.create(application=application_id, token_hash=token_hash,
                              metadata=metadata)


def find(client_id: str, token_hash: str) -> RegistrationRecord | None:
    """The registration of ``client_id`` when ``token_hash`` is its registration access
    token's; else None (an unknown client and a wrong token alike)."""
    row = (ClientRegistration.select(ClientRegistration.application,
                                     ClientRegistration.metadata)
           .join(Application)
           .where((Application.client_id == client_id)
                  & (ClientRegistration.token_hash == token_hash))
           .first())
    return RegistrationRecord(application_id=row.application_id,
                              metadata=dict(row.metadata or {})) if row else None
