"""Roles: named sets of scopes, and the users who hold them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import peewee

from identityctl.store import crud, db
from identityctl.store.models import Role, User, UserRole, now


@dataclass(slots=True)
class RoleRecord:
    id: str
    name: str
    description: str
    scopes: list[str]

    def to_api(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "description": self.description,
                "scopes": self.scopes}


def _record(row: Role) -> RoleRecord:
    return RoleRecord(id=row.id, name=row.name, description=row.description,
                      scopes=list(row.scopes or []))


def list_roles() -> list[RoleRecord]:
    return [_record(row) for row in Role.select().order_by(Role.name)]


def find_role(id_or_name: str) -> RoleRecord | None:
    row = Role.get_or_none((Role.id == id_or_name) | (Role.name == id_or_name))
    return _record(row) if row else None


def create_role(*, name: str, description: str, scopes: list[str]) -> RoleRecord:
    return _record(crud.insert(Role, code="role_exists", conflict=f"Role '{name}' already "
                               "exists.", name=name, description=description, scopes=scopes))


def update_role(role_id: str, **fields: Any) -> RoleRecord:
    crud.update(Role, role_id, what="role", code="role_not_found", **fields)
    return _record(Role.get_by_id(role_id))


def delete_role(role_id: str) -> None:
    crud.delete(Role, role_id, what="role", code="role_not_found")


def grant(user_id: str, role_id: str) -> bool:
    """Give the role to the user; False when they held it already."""
    try:
        with db.savepoint():
            UserRole.create(user=user_id, role=role_id, granted_at=now())
    except peewee.IntegrityError:
        return False
    return True


def revoke(user_id: str, role_id: str) -> bool:
    """Take the role from the user; False when they did not hold it."""
    return bool(UserRole.delete().where((UserRole.user == user_id)
                                        & (UserRole.role == role_id)).execute())


def roles_of(user_id: str) -> list[RoleRecord]:
    """The roles the user holds, by name."""
    return [_record(row) for row in Role.select().join(UserRole).where(
        UserRole.user == user_id).order_by(Role.name)]


def scopes_in_roles() -> set[str]:
    """Every scope some role carries: the scopes a person must hold to grant."""
    return {scope for role in Role.select(Role.scopes) for scope in (role.scopes or [])}


def holders(role_id: str) -> int:
    return UserRole.select().where(UserRole.role == role_id).count()


def other_active_holders(role_name: str, user_id: str) -> int:
    """How many active users other than ``user_id`` hold the role named ``role_name``."""
    return (UserRole.select().join(Role, on=UserRole.role == Role.id)
            .switch(UserRole).join(User, on=UserRole.user == User.id)
            .where(Role.name == role_name, UserRole.user != user_id, User.status == "active")
            .count())
