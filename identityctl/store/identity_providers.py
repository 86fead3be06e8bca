"""Upstream identity providers and the accounts people linked through them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import peewee

from identityctl.errors import Conflict, NotFound
from identityctl.store import db
from identityctl.store.models import FederatedIdentity, IdentityProvider, now


@dataclass(frozen=True, slots=True)
class ProviderRecord:
    id: str
    handle: str
    name: str
    kind: str
    issuer: str
    client_id: str
    client_secret: str
    scopes: list[str]
    mapping: dict[str, str]
    settings: dict[str, Any]
    created_at: float

    def to_api(self) -> dict[str, Any]:
        """What anyone may see: never the client secret."""
        return {"id": self.id, "handle": self.handle, "name": self.name, "kind": self.kind,
                "issuer": self.issuer, "clientId": self.client_id, "scopes": self.scopes,
                "mapping": self.mapping, "settings": self.settings,
                "createdAt": self.created_at}


def _record(row: IdentityProvider) -> ProviderRecord:
    return ProviderRecord(id=row.id, handle=row.handle, name=row.name, kind=row.kind,
                          issuer=row.issuer, client_id=row.client_id,
                          client_secret=row.client_secret, scopes=list(row.scopes or []),
                          mapping=dict(row.mapping or {}), settings=dict(row.settings or {}),
                          created_at=row.created_at)


def create_provider(**fields: Any) -> ProviderRecord:
    try:
        with db.savepoint():
            return _record(IdentityProvider.create(**fields))
    except peewee.IntegrityError:
        raise Conflict(f"An identity provider with handle {fields['handle']!r} exists.",
                       code="provider_exists") from None


def list_providers() -> list[ProviderRecord]:
    return [_record(row) for row in IdentityProvider.select().order_by(IdentityProvider.name)]


def find_provider(id_or_handle: str) -> ProviderRecord | None:
    row = IdentityProvider.get_or_none((IdentityProvider.id == id_or_handle)
                                       | (IdentityProvider.handle == id_or_handle))
    return _record(row) if row else None


def require_provider(id_or_handle: str) -> ProviderRecord:
    found = find_provider(id_or_handle)
    if found is None:
        raise NotFound(f"No identity provider {id_or_handle!r}.", code="provider_not_found")
    return found


def update_provider(provider_id: str, **fields: Any) -> ProviderRecord:
    IdentityProvider.update(**fields).where(IdentityProvider.id == provider_id).execute()
    return require_provider(provider_id)


def delete_provider(provider_id: str) -> None:
    IdentityProvider.delete().where(IdentityProvider.id == provider_id).execute()


def linked_user(provider_id: str, subject: str) -> str | None:
    """Whose account the provider's ``subject`` is linked to (and note its use)."""
    row = FederatedIdentity.get_or_none((FederatedIdentity.provider == provider_id)
                                        & (FederatedIdentity.subject == subject))
    if row is None:
        return None
    FederatedIdentity.update(last_used_at=now()).where(FederatedIdentity.id == row.id).execute()
    return row.user_id


def link(provider_id: str, subject: str, user_id: str) -> None:
    """(In the caller's transaction.) Link the provider's ``subject`` to ``user_id``."""
    try:
        with db.savepoint():
            FederatedIdentity.create(provider=provider_id, subject=subject, user=user_id,
                                     last_used_at=now())
    except peewee.IntegrityError:
        raise Conflict("This account at the identity provider is linked to another user "
                       "already.", code="federated_identity_linked") from None


def links_of(user_id: str) -> list[tuple[str, str]]:
    """(provider name, subject) of each account linked to ``user_id``."""
    rows = (FederatedIdentity.select(FederatedIdentity.subject, IdentityProvider.name)
            .join(IdentityProvider).where(FederatedIdentity.user == user_id))
    return [(row.provider.name, row.subject) for row in rows]
