"""Users, user types and organization units: the rules around the store's records.

Shared by the CLI, the REST API, the flow engine and the MCP tools, so every path applies
the same validation and leaves the same audit trail.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from identityctl.errors import Conflict, Forbidden, InvalidField, NotFound
from identityctl.security import passwords
from identityctl.security.email_address import EMAIL, checked_address
from identityctl.security.secrets import b64url_encode
from identityctl.services import audit, throttle
from identityctl.services.origin import RequestOrigin
from identityctl.store import directory
from identityctl.store import recovery as recovery_store
from identityctl.store import roles as role_store
from identityctl.store.directory import UserRecord

USERNAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
ATTRIBUTE_TYPES = {"string": str, "boolean": bool, "number": (int, float)}
DEFAULT_OU = "default"
DEFAULT_USER_TYPE = "person"


def self_registration_type(application: dict[str, Any],
                           name: str | None = None) -> dict[str, Any]:
    """The user type a person signing up at ``application`` gets: ``name`` (a flow's
    ``userType``), else the application's first allowed type, else the default."""
    allowed = application.get("allowedUserTypes") or []
    return require_user_type(name or (allowed[0] if allowed else DEFAULT_USER_TYPE))


def require_user_type(id_or_name: str) -> dict[str, Any]:
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


def validate_attributes(schema: dict[str, Any], attributes: dict[str, Any], *,
                        user_id: str | None = None) -> dict[str, Any]:
    """Check ``attributes`` against a user type's schema; unknown names are refused. The
    checked attributes, an ``email`` normalised (:func:`checked_address`).

    ``user_id`` is the user the attributes belong to, so an update may keep its own
    unique values. An ``email`` is never unique by itself: an address is one person's
    once they prove it (store/recovery.py), and a copy nobody proved blocks nobody (nor
    tells anyone it is registered).
    """
    if not isinstance(attributes, dict):
        raise InvalidField("attributes", "must be an object")
    attributes = dict(attributes)
    for name, value in attributes.items():
        rule = schema.get(name)
        if rule is None:
            raise InvalidField(f"attributes.{name}", "is not in the user type's schema")
        expected = ATTRIBUTE_TYPES.get(rule.get("type", "string"), str)
        if not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
            raise InvalidField(f"attributes.{name}", f"must be a {rule.get('type', 'string')}")
        if name == EMAIL:
            attributes[name] = checked_address(value, field=f"attributes.{name}")
            continue
        holder = directory.find_user_by_attribute(name, value) if rule.get("unique") else None
        if holder is not None and holder.id != user_id:
            raise InvalidField(f"attributes.{name}", "is already used by another user",
                               code="attribute_taken")
    for name, rule in schema.items():
        if rule.get("required") and attributes.get(name) in (None, ""):
            raise InvalidField(f"attributes.{name}", "is required by the user type")
    return attributes


def coerce_attributes(schema: dict[str, Any], texts: dict[str, str]) -> dict[str, Any]:
    """Attribute values given as text (command line, form inputs) in the schema's types.

    Names outside the schema stay text; :func:`validate_attributes` refuses them by name.
    """
    values: dict[str, Any] = {}
    for name, text in texts.items():
        kind = schema.get(name, {}).get("type", "string")
        if kind == "boolean":
            if text.lower() not in ("true", "false"):
                raise InvalidField(f"attributes.{name}", "must be true or false")
            values[name] = text.lower() == "true"
        elif kind == "number":
            try:
                values[name] = int(text) if text.lstrip("-").isdigit() else float(text)
            except ValueError:
                raise InvalidField(f"attributes.{name}", "must be a number") from None
        else:
            values[name] = text
    return values


def list_users(*, limit: int = 100, offset: int = 0) -> list[UserRecord]:
    return directory.list_users(limit=limit, offset=offset)


@dataclass(frozen=True, slots=True)
class Recovery:
    """Whether a person who lost their passkeys could get back in without an administrator
    (docs/recovery.md): with a code e-mailed to their verified address (only when the
    deployment sends mail), or with one of their unused recovery codes."""

    verified_address: str | None
    #: The address the account shows (its ``email`` attribute) is the verified one.
    email_verified: bool
    codes_left: int
    mail: bool

    @property
    def can_recover(self) -> bool:
        return bool(self.verified_address and self.mail) or self.codes_left > 0

    def to_api(self) -> dict[str, Any]:
        return {"emailVerified": self.email_verified, "verifiedEmail": self.verified_address,
                "recoveryCodesLeft": self.codes_left, "canRecover": self.can_recover}


def recovery_of(user: UserRecord, *, mail: bool) -> Recovery:
    """``mail``: whether the deployment sends mail (``email.smtp_host``)."""
    verified = recovery_store.verified_address(user.id)
    shown = str(user.attributes.get(EMAIL) or "").strip().lower()
    return Recovery(verified_address=verified, email_verified=bool(verified) and
                    verified == shown, codes_left=recovery_store.codes_left(user.id),
                    mail=mail)


def users_who_cannot_recover(*, mail: bool, limit: int = 100,
                             offset: int = 0) -> list[tuple[UserRecord, Recovery]]:
    """The users (by username) :func:`recovery_of` finds no way back for, a page of them."""
    found: list[tuple[UserRecord, Recovery]] = []
    page, start = 500, 0
    while len(found) < offset + limit and (users := directory.list_users(limit=page,
                                                                         offset=start)):
        found += [(user, recovery) for user in users
                  if not (recovery := recovery_of(user, mail=mail)).can_recover]
        start += page
    return found[offset:offset + limit]


def create_user(*, username: str, password: str | None = None,
                attributes: dict[str, Any] | None = None, user_type: str = DEFAULT_USER_TYPE,
                ou: str | None = None, origin: RequestOrigin) -> UserRecord:
    """Create a user of ``user_type`` (in its OU unless ``ou`` is given)."""
    if not isinstance(username, str) or not USERNAME_PATTERN.match(username):
        raise InvalidField("username", "use 1-128 letters, digits or . _ @ + - "
                           "(starting with a letter or digit)")
    kind = require_user_type(user_type)
    attributes = validate_attributes(kind["schema"], attributes or {})
    password_hash = None
    if password is not None:
        passwords.check_policy(password, username=username)
        password_hash = passwords.hash_password(password)
    user = directory.create_user(
        username=username, user_handle=b64url_encode(secrets.token_bytes(32)),
        user_type_id=kind["id"], ou_id=require_ou(ou)["id"] if ou else kind["ouId"],
        attributes=attributes, password_hash=password_hash)
    audit.record("user.create", "success", origin=origin, user_id=user.id,
                 details={"username": username})
    return user


def update_user(id_or_username: str, *, attributes: dict[str, Any] | None = None,
                ou: str | None = None, user_type: str | None = None,
                origin: RequestOrigin) -> UserRecord:
    """Replace the user's attributes and/or make it another ``user_type`` (the attributes,
    given or kept, are checked against its type's schema), and/or move its OU."""
    user = require_user(id_or_username)
    changes: dict[str, Any] = {}
    kind = require_user_type(user_type or user.user_type_id)
    if kind["id"] != user.user_type_id:
        changes["user_type"] = kind["id"]
        attributes = user.attributes if attributes is None else attributes
    if attributes is not None:
        changes["attributes"] = validate_attributes(kind["schema"], attributes,
                                                    user_id=user.id)
    if ou is not None:
        changes["ou"] = require_ou(ou)["id"]
    if not changes:
        return user
    updated = directory.update_user(user.id, **changes)
    audit.record("user.update", "success", origin=origin, user_id=user.id,
                 details={"changed": sorted(changes)})
    return updated


def address_proven(user_id: str, address: str, *, origin: RequestOrigin, how: str) -> None:
    """(In the caller's transaction.) ``address`` is proven to be the user's (``how``: a
    code sent there came back, an administrator vouched, the upstream provider verified
    it). It leaves every other account that held it, proven before or never; they are not
    told (the address is someone else's now), the audit log says so."""
    for other in recovery_store.mark_verified(user_id, address):
        audit.record("email.removed", "success", origin=origin, user_id=other,
                     details={"reason": "proven by another account", "by": user_id})
    audit.record("email.verified", "success", origin=origin, user_id=user_id, details={"by": how})


#: RFC 8176's method references of a password sign-in, and of a sign-in with one of our
#: passkeys (made or used: a recovery that ends with a new passkey proved one).
PASSWORD_AMR, PASSKEY_AMR = "pwd", "passkey"


def passkeys_only(*, application: dict[str, Any] | bool | None, user_id: str | None) -> bool:
    """Whether the "passkeys only" rule holds, as it is now: for the ``application`` (its
    document, or its ``passkeysOnly`` as a bool; anyone), else for the person's unit or one
    above it (one read)."""
    if isinstance(application, dict):
        application = application.get("passkeysOnly")
    return bool(application) or (user_id is not None and directory.passkeys_only_unit(user_id))


def passwords_allowed(user: UserRecord) -> bool:
    """Whether the person may have and use a password (and so TOTP): not when their
    organization unit, or one above it, allows passkeys only."""
    return not passkeys_only(application=None, user_id=user.id)


def ensure_passwords_allowed(user: UserRecord | None,
                             application: dict[str, Any] | None = None) -> None:
    """403 ``passwords_not_allowed`` where the "passkeys only" rule holds: for the
    ``application`` signed in to (anyone), or for the person's unit."""
    if passkeys_only(application=application, user_id=user.id if user else None):
        raise _passwords_refused()


def _passwords_refused() -> Forbidden:
    return Forbidden("Passwords are not used here: sign in with a passkey.",
                     code="passwords_not_allowed")


def rests_on_a_password(amr: Sequence[str]) -> bool:
    """A sign-in by the methods ``amr`` rests on a password: it names one (ours, or an
    upstream provider's passed on) and no passkey. An e-mail code alone names none."""
    return PASSWORD_AMR in amr and PASSKEY_AMR not in amr


def sign_in_counts(amr: Sequence[str], *, application: dict[str, Any] | bool | None,
                   user_id: str | None) -> bool:
    """Whether a sign-in by ``amr`` still stands for the person at ``application`` (see
    :func:`passkeys_only`): one that rests on a password does not where passkeys only hold,
    at the time it is used, so the rule switched on later ends what password sign-ins made
    (sessions, grants, a device's approval). Reads nothing for a passkey's sign-in, nor for
    an application whose own rule already answers."""
    return not rests_on_a_password(amr) \
        or not passkeys_only(application=application, user_id=user_id)


def ensure_sign_in_counts(amr: Sequence[str], *, application: dict[str, Any] | None,
                          user_id: str | None) -> None:
    """403 ``passwords_not_allowed`` where :func:`sign_in_counts` says no."""
    if not sign_in_counts(amr, application=application, user_id=user_id):
        raise _passwords_refused()


def set_password(id_or_username: str, password: str, *, origin: RequestOrigin,
                 application: dict[str, Any] | None = None) -> UserRecord:
    """A new password, where passkeys only do not hold: the person's unit, nor the
    ``application`` it is set for (a recovery's)."""
    user = require_user(id_or_username)
    ensure_passwords_allowed(user, application)
    passwords.check_policy(password, username=user.username)
    updated = directory.update_user(user.id, password_hash=passwords.hash_password(password))
    audit.record("user.password_set", "success", origin=origin, user_id=user.id)
    return updated


#: The role that administers the deployment (seeded by init: services/admin/bootstrap.py).
ADMIN_ROLE = "admin"


def keep_an_administrator(user: UserRecord) -> None:
    """Refuse (409 ``last_admin``) what would leave nobody able to administer: ``user``
    going (deleted, disabled, locked, the admin role taken) while holding the admin role
    with no other active person holding it. (A client_credentials application with the
    admin scope is no successor: it cannot sign in to the console.)"""
    holds = ADMIN_ROLE in {role.name for role in role_store.roles_of(user.id)}
    if holds and role_store.other_active_holders(ADMIN_ROLE, user.id) == 0:
        raise Conflict(f"{user.username} is the only administrator; give the role "
                       f"'{ADMIN_ROLE}' to someone else first.", code="last_admin")


def set_status(id_or_username: str, status: str, *, origin: RequestOrigin) -> UserRecord:
    if status not in tuple(Standing):
        raise InvalidField("status", "must be active, disabled or locked")
    user = require_user(id_or_username)
    if status != Standing.ACTIVE:
        keep_an_administrator(user)
    updated = directory.update_user(user.id, status=status)
    audit.record("user.status", "success", origin=origin, user_id=user.id,
                 details={"status": status})
    return updated


def unlock_user(id_or_username: str, *, origin: RequestOrigin) -> UserRecord:
    """Lift a lockout (after too many failures); a disabled account stays disabled."""
    user = require_user(id_or_username)
    if user.status == Standing.DISABLED:
        raise Conflict("The account is disabled, not locked; enable it instead.",
                       code="account_disabled")
    updated = directory.update_user(user.id, status=Standing.ACTIVE)
    throttle.unlock_account(user.username)
    audit.record("user.unlock", "success", origin=origin, user_id=user.id)
    return updated


def delete_user(id_or_username: str, *, origin: RequestOrigin) -> None:
    user = require_user(id_or_username)
    keep_an_administrator(user)
    directory.delete_user(user.id)
    audit.record("user.delete", "success", origin=origin, user_id=user.id,
                 details={"username": user.username})


def list_ous() -> list[dict[str, Any]]:
    return directory.list_ous()


def ous_page(*, limit: int, offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
    """One page of organization units (by handle) and how many there are in all."""
    return directory.ous_page(limit=limit, offset=offset)


def create_ou(*, handle: str, name: str, description: str = "", parent: str | None = None,
              passkeys_only: bool = False, origin: RequestOrigin) -> dict[str, Any]:
    check_handle(handle)
    parent_id = require_ou(parent)["id"] if parent else None
    ou = directory.create_ou(handle=handle, name=name, description=description,
                             parent_id=parent_id, passkeys_only=passkeys_only)
    audit.record("ou.create", "success", origin=origin, details={"id": ou["id"]})
    return ou


def update_ou(id_or_handle: str, *, origin: RequestOrigin, **fields: Any) -> dict[str, Any]:
    """Change ``name``, ``description``, ``parent`` (id or handle; None: top level) and/or
    ``passkeys_only``."""
    ou = require_ou(id_or_handle)
    if not fields:
        return ou
    if fields.get("parent"):
        parent = require_ou(fields["parent"])
        fields["parent"] = parent["id"]
        # Walk up from the new parent: meeting this unit would make the tree a loop.
        while parent is not None:
            if parent["id"] == ou["id"]:
                raise InvalidField("parent", "would place the unit inside itself",
                                   code="ou_cycle")
            parent = directory.find_ou(parent["parent"]) if parent["parent"] else None
    updated = directory.update_ou(ou["id"], **fields)
    audit.record("ou.update", "success", origin=origin,
                 details={"id": ou["id"], "changed": sorted(fields)})
    return updated


def delete_ou(id_or_handle: str, *, origin: RequestOrigin) -> None:
    ou_id = require_ou(id_or_handle)["id"]
    directory.delete_ou(ou_id)
    audit.record("ou.delete", "success", origin=origin, details={"id": ou_id})


def list_user_types() -> list[dict[str, Any]]:
    return directory.list_user_types()


def user_types_page(*, limit: int, offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
    """One page of user types (by name) and how many there are in all."""
    return directory.user_types_page(limit=limit, offset=offset)


def create_user_type(*, name: str, ou: str = DEFAULT_OU, allow_self_registration: bool = False,
                     schema: dict[str, Any] | None = None, origin: RequestOrigin) -> dict[str, Any]:
    check_handle(name, field="name")
    schema = validate_schema(schema or {})
    created = directory.create_user_type(name=name, ou_id=require_ou(ou)["id"], schema=schema,
                                         allow_self_registration=allow_self_registration)
    audit.record("user_type.create", "success", origin=origin, details={"id": created["id"]})
    return created


def update_user_type(id_or_name: str, *, ou: str | None = None,
                     allow_self_registration: bool | None = None,
                     schema: dict[str, Any] | None = None,
                     origin: RequestOrigin) -> dict[str, Any]:
    """Change a user type's OU, self-registration setting and/or attribute schema."""
    kind = require_user_type(id_or_name)
    changes: dict[str, Any] = {}
    if ou is not None:
        changes["ou"] = require_ou(ou)["id"]
    if allow_self_registration is not None:
        changes["allow_self_registration"] = allow_self_registration
    if schema is not None:
        changes["schema"] = validate_schema(schema)
    if not changes:
        return kind
    updated = directory.update_user_type(kind["id"], **changes)
    audit.record("user_type.update", "success", origin=origin,
                 details={"id": kind["id"], "changed": sorted(changes)})
    return updated


def delete_user_type(id_or_name: str, *, origin: RequestOrigin) -> None:
    type_id = require_user_type(id_or_name)["id"]
    directory.delete_user_type(type_id)
    audit.record("user_type.delete", "success", origin=origin, details={"id": type_id})


def validate_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A user type's attribute schema: {name: {type, required?, unique?}}."""
    if not isinstance(schema, dict):
        raise InvalidField("schema", "must be an object of attribute definitions")
    for name, rule in schema.items():
        if not isinstance(rule, dict) or rule.get("type", "string") not in ATTRIBUTE_TYPES:
            raise InvalidField(f"schema.{name}",
                               f"needs a type of {', '.join(ATTRIBUTE_TYPES)}")
    return schema


def check_handle(handle: str, field: str = "handle") -> None:
    if not isinstance(handle, str) or not re.match(r"^[a-z0-9][a-z0-9_-]{0,63}$", handle):
        raise InvalidField(field, "use 1-64 lowercase letters, digits, '-' or '_'")


class Standing(StrEnum):
    """An account's standing: its ``status``, set by an administrator."""

    ACTIVE = "active"
    DISABLED = "disabled"
    LOCKED = "locked"


def is_usable(user: UserRecord | None) -> bool:
    """The one rule of whether an account may act: sign in, enrol a passkey, get tokens,
    refresh them, have them answer at userinfo and introspection. Only an active one."""
    return user is not None and user.status == Standing.ACTIVE


def may_use(user: UserRecord, allowed_user_types: Sequence[str]) -> bool:
    """The one rule of whether a user's type lets them use an application, wherever an
    account acts for one (sign-in, authorize, every grant that issues tokens for a user):
    ``allowedUserTypes`` names types by name or id; empty, every type may."""
    return (not allowed_user_types or user.user_type in allowed_user_types
            or user.user_type_id in allowed_user_types)


def ensure_usable(user: UserRecord) -> None:
    """A disabled or locked user is refused on every sign-in and enrolment path."""
    if not is_usable(user):
        raise Forbidden("The account is disabled or locked.", code="account_unavailable")
