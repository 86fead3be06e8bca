"""Users, user types and organization units: the rules around the store's records.

Shared by the CLI, the REST API, the flow engine and the MCP tools, so every path applies
the same validation and leaves the same audit trail.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from identityctl.errors import Forbidden, InvalidField, NotFound
from identityctl.security import passwords
from identityctl.security.secrets import b64url_encode
from identityctl.store import audit, directory
from identityctl.store.directory import UserRecord

USERNAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
ATTRIBUTE_TYPES = {"string": str, "boolean": bool, "number": (int, float)}
DEFAULT_OU = "default"
DEFAULT_USER_TYPE = "person"


def _require_user_type(id_or_name: str) -> dict[str, Any]:
    found = directory.find_user_type(id_or_name)
    if found is None:
        raise NotFound(f"No user type '{id_or_name}'.", code="user_type_not_found")
    return found


def require_ou(id_or_handle: str) -> dict[str, Any]:
    found = directory.find_ou(id_or_handle)
    if found is None:
        raise NotFound(f"No organization unit '{id_or_handle}'.", code="ou_not_found")
    return found


def require_user(id_or_username: str) -> UserRecord:
    found = directory.find_user(id_or_username)
    if found is None:
        raise NotFound(f"No user '{id_or_username}'.", code="user_not_found")
    return found


def validate_attributes(schema: dict[str, Any], attributes: dict[str, Any]) -> dict[str, Any]:
    """Check ``attributes`` against a user type's schema; unknown names are refused."""
    if not isinstance(attributes, dict):
        raise InvalidField("attributes", "must be an object")
    for name, value in attributes.items():
        rule = schema.get(name)
        if rule is None:
            raise InvalidField(f"attributes.{name}", "is not in the user type's schema")
        expected = ATTRIBUTE_TYPES.get(rule.get("type", "string"), str)
        if not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
            raise InvalidField(f"attributes.{name}", f"must be a {rule.get('type', 'string')}")
        if rule.get("unique") and directory.find_user_by_attribute(name, value):
            raise InvalidField(f"attributes.{name}", "is already used by another user",
                               code="attribute_taken")
    for name, rule in schema.items():
        if rule.get("required") and attributes.get(name) in (None, ""):
            raise InvalidField(f"attributes.{name}", "is required by the user type")
    return attributes


def create_user(*, username: str, password: str | None = None,
                attributes: dict[str, Any] | None = None, user_type: str = DEFAULT_USER_TYPE,
                ou: str | None = None, actor: str = "admin") -> UserRecord:
    """Create a user of ``user_type`` (in its OU unless ``ou`` is given)."""
    if not isinstance(username, str) or not USERNAME_PATTERN.match(username):
        raise InvalidField("username", "use 1-128 letters, digits or . _ @ + - "
                           "(starting with a letter or digit)")
    kind = _require_user_type(user_type)
    attributes = validate_attributes(kind["schema"], attributes or {})
    password_hash = None
    if password is not None:
        passwords.check_policy(password, username=username)
        password_hash = passwords.hash_password(password)
    user = directory.create_user(
        username=username, user_handle=b64url_encode(secrets.token_bytes(32)),
        user_type_id=kind["id"], ou_id=require_ou(ou)["id"] if ou else kind["ouId"],
        attributes=attributes, password_hash=password_hash)
    audit.record("user.create", "success", actor=actor, user_id=user.id,
                 details={"username": username})
    return user


def set_password(id_or_username: str, password: str, *, actor: str = "admin") -> UserRecord:
    user = require_user(id_or_username)
    passwords.check_policy(password, username=user.username)
    updated = directory.update_user(user.id, password_hash=passwords.hash_password(password))
    audit.record("user.password_set", "success", actor=actor, user_id=user.id)
    return updated


def set_status(id_or_username: str, status: str, *, actor: str = "admin") -> UserRecord:
    if status not in ("active", "disabled", "locked"):
        raise InvalidField("status", "must be active, disabled or locked")
    user = require_user(id_or_username)
    updated = directory.update_user(user.id, status=status, locked_until=None)
    audit.record("user.status", "success", actor=actor, user_id=user.id,
                 details={"status": status})
    return updated


def delete_user(id_or_username: str, *, actor: str = "admin") -> None:
    user = require_user(id_or_username)
    directory.delete_user(user.id)
    audit.record("user.delete", "success", actor=actor, user_id=user.id,
                 details={"username": user.username})


def create_ou(*, handle: str, name: str, description: str = "", parent: str | None = None,
              actor: str = "admin") -> dict[str, Any]:
    _check_handle(handle)
    parent_id = require_ou(parent)["id"] if parent else None
    ou = directory.create_ou(handle=handle, name=name, description=description,
                             parent_id=parent_id)
    audit.record("ou.create", "success", actor=actor, details={"id": ou["id"]})
    return ou


def create_user_type(*, name: str, ou: str = DEFAULT_OU, allow_self_registration: bool = False,
                     schema: dict[str, Any] | None = None, actor: str = "admin") -> dict[str, Any]:
    _check_handle(name, field="name")
    schema = validate_schema(schema or {})
    created = directory.create_user_type(name=name, ou_id=require_ou(ou)["id"], schema=schema,
                                         allow_self_registration=allow_self_registration)
    audit.record("user_type.create", "success", actor=actor, details={"id": created["id"]})
    return created


def validate_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A user type's attribute schema: {name: {type, required?, unique?}}."""
    if not isinstance(schema, dict):
        raise InvalidField("schema", "must be an object of attribute definitions")
    for name, rule in schema.items():
        if not isinstance(rule, dict) or rule.get("type", "string") not in ATTRIBUTE_TYPES:
            raise InvalidField(f"schema.{name}",
                               f"needs a type of {', '.join(ATTRIBUTE_TYPES)}")
    return schema


def _check_handle(handle: str, field: str = "handle") -> None:
    if not isinstance(handle, str) or not re.match(r"^[a-z0-9][a-z0-9_-]{0,63}$", handle):
        raise InvalidField(field, "use 1-64 lowercase letters, digits, '-' or '_'")


def ensure_usable(user: UserRecord, now: float) -> None:
    """A disabled or locked user is refused on every sign-in and enrolment path."""
    if user.status == "disabled" or (user.status == "locked" and (
            user.locked_until is None or user.locked_until > now)):
        raise Forbidden("The account is disabled or locked.", code="account_unavailable")
