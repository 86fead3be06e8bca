"""Who may grant what: roles carry scopes (permissions), users hold roles.

The rule (:func:`scopes_not_held`): a scope that some role carries is granted to a client
only by a person who holds a role carrying it; a scope that no role carries (``openid``,
``profile``, an API's own scope until an administrator makes a role for it) any person may
grant. ``identityctl init`` makes the role ``admin``, carrying the MCP scope (``system``),
so nobody grants an assistant the administration of this service unless given that role.
"""

from __future__ import annotations

from collections.abc import Iterable

from identityctl.errors import Conflict, InvalidField, NotFound
from identityctl.services import audit
from identityctl.services.directory.users import (
    ADMIN_ROLE,
    check_handle,
    keep_an_administrator,
    require_user,
)
from identityctl.services.origin import RequestOrigin
from identityctl.store import roles as store
from identityctl.store.db import transaction
from identityctl.store.roles import RoleRecord


def list_roles() -> list[RoleRecord]:
    return store.list_roles()


def require_role(id_or_name: str) -> RoleRecord:
    found = store.find_role(id_or_name)
    if found is None:
        raise NotFound(f"No role '{id_or_name}'.", code="role_not_found")
    return found


def checked_scopes(scopes: Iterable[str]) -> list[str]:
    """Scope names, each once: non-empty, no spaces (RFC 6749 §3.3)."""
    checked = list(dict.fromkeys(scopes))
    if not all(isinstance(scope, str) and scope and " " not in scope for scope in checked):
        raise InvalidField("scopes", "must be scope names (no spaces)")
    return checked


def create_role(*, name: str, scopes: Iterable[str], description: str = "",
                origin: RequestOrigin) -> RoleRecord:
    check_handle(name, "name")
    role = store.create_role(name=name, description=description,
                             scopes=checked_scopes(scopes))
    audit.record("role.create", "success", origin=origin,
                 details={"role": role.name, "scopes": role.scopes})
    return role


def update_role(id_or_name: str, *, scopes: Iterable[str] | None = None,
                description: str | None = None, origin: RequestOrigin) -> RoleRecord:
    role = require_role(id_or_name)
    fields: dict[str, object] = {}
    if scopes is not None:
        fields["scopes"] = checked_scopes(scopes)
        dropped = sorted(set(role.scopes) - set(fields["scopes"]))
        if role.name == ADMIN_ROLE and dropped:
            # Its scopes let its holders into the console and /mcp: without them nobody
            # could administer (and only a restart would bring them back).
            raise Conflict(f"The role '{ADMIN_ROLE}' keeps its scopes "
                           f"({', '.join(dropped)}); add others, or make another role.",
                           code="built_in_role")
    if description is not None:
        fields["description"] = description
    updated = store.update_role(role.id, **fields) if fields else role
    audit.record("role.update", "success", origin=origin,
                 details={"role": role.name, "scopes": updated.scopes})
    return updated


def delete_role(id_or_name: str, *, origin: RequestOrigin) -> None:
    """Delete a role; never the administrator role, without which nobody could administer
    (every start would seed it again, with nobody holding it)."""
    role = require_role(id_or_name)
    if role.name == ADMIN_ROLE:
        raise Conflict(f"The role '{ADMIN_ROLE}' is built in and cannot be deleted; take it "
                       "from people instead.", code="built_in_role")
    store.delete_role(role.id)
    audit.record("role.delete", "success", origin=origin, details={"role": role.name})


def grant_role(id_or_username: str, role_name: str, *, origin: RequestOrigin) -> RoleRecord:
    """Give a user a role (nothing changes when they hold it already)."""
    user, role = require_user(id_or_username), require_role(role_name)
    if store.grant(user.id, role.id):
        audit.record("role.grant", "success", origin=origin, user_id=user.id,
                     details={"role": role.name})
    return role


def revoke_role(id_or_username: str, role_name: str, *, origin: RequestOrigin) -> None:
    """Take a role from a user. Tokens already issued keep their scopes until they expire;
    refreshing them is refused (see :func:`scopes_not_held`)."""
    user, role = require_user(id_or_username), require_role(role_name)
    with transaction():
        if role.name == ADMIN_ROLE:
            keep_an_administrator(user)
        if not store.revoke(user.id, role.id):
            raise Conflict(f"{user.username} does not hold the role '{role.name}'.",
                           code="role_not_held")
    audit.record("role.revoke", "success", origin=origin, user_id=user.id,
                 details={"role": role.name})


def roles_of(user_id: str) -> list[RoleRecord]:
    return store.roles_of(user_id)


def scopes_not_held(user_id: str, scope: Iterable[str]) -> list[str]:
    """The scopes in ``scope`` this user may not grant: those some role carries and none of
    the user's roles does."""
    protected = store.scopes_in_roles().intersection(scope)
    if not protected:  # PERF: most sign-ins ask for no scope a role carries: one read
        return []
    held = {granted for role in store.roles_of(user_id) for granted in role.scopes}
    return [item for item in scope if item in protected and item not in held]
