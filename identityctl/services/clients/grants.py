"""What people let clients have: the grants remembered at each authorization, listed and
revoked. Revoking a grant ends, at once, every token the client holds for the person: each
of their token families (``sid``) ends as a logout or a refresh-token replay ends one."""

from __future__ import annotations

from typing import Any

from identityctl.errors import NotFound
from identityctl.services import audit, catalog
from identityctl.services.catalog.applications import require_application_by_client_id
from identityctl.services.clients.client import client_of
from identityctl.services.clients.revocation import end_grant
from identityctl.services.context import ServiceContext
from identityctl.services.directory.users import require_user
from identityctl.services.origin import RequestOrigin
from identityctl.store import grants as store
from identityctl.store.grants import GrantRecord


def list_grants(*, user: str | None = None) -> list[GrantRecord]:
    """Every grant, or those of one user (id or username)."""
    return store.list_grants(user_id=require_user(user).id if user else None)


def revoke_grant(ctx: ServiceContext, user: str, client_id: str, *,
                 origin: RequestOrigin) -> int:
    """Forget the user's grant to the client and end every token family of it; how many."""
    person = require_user(user)
    application = require_application_by_client_id(client_id)
    if not store.forget(person.id, application["id"]):
        raise NotFound(f"{person.username} has no grant to {client_id}.",
                       code="grant_not_found")
    client = client_of(application)
    families = store.token_families(application["id"], person.id)
    for family in families:
        end_grant(ctx, family, client)
    audit.record("oauth.grant_revoke", "success", origin=origin, user_id=person.id,
                 details={"clientId": client_id, "families": len(families)})
    return len(families)


def remove_client(ctx: ServiceContext, application: dict[str, Any], *,
                  origin: RequestOrigin) -> None:
    """Delete a client and end at once every token it holds (RFC 7592 §2.3: deleting a
    registration invalidates its grants and tokens), not only the refresh tokens that go
    with its rows."""
    client = client_of(application)
    for family in store.token_families(application["id"]):
        end_grant(ctx, family, client)
    catalog.applications.delete_application(application["id"], origin=origin)
