"""Users, user types and organization units."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import peewee

from identityctl.errors import NotFound
from identityctl.security.usernames import username_key
from identityctl.store import crud
from identityctl.store.compiled import CompiledQuery, Row
from identityctl.store.models import (
    OrganizationUnit,
    PasskeyCredential,
    User,
    UserType,
    VerifiedEmail,
    now,
)


@dataclass(slots=True)
class UserRecord:
    id: str
    username: str
    user_handle: str
    attributes: dict[str, Any]
    user_type_id: str
    user_type: str
    ou_id: str
    password_hash: str | None
    status: str
    created_at: float
    updated_at: float

    def to_api(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "username": self.username,
            "type": self.user_type,
            "ouId": self.ou_id,
            "attributes": self.attributes,
            "status": self.status,
            "hasPassword": self.password_hash is not None,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


def _user_record(row: User | Row) -> UserRecord:
    # Rows of the compiled lookups carry the type's name as ``type_name`` (no join object).
    type_name = getattr(row, "type_name", None) or row.user_type.name
    return UserRecord(
        id=row.id, username=row.username, user_handle=row.user_handle,
        attributes=row.attributes or {}, user_type_id=row.user_type_id,
        user_type=type_name, ou_id=row.ou_id, password_hash=row.password_hash,
        status=row.status, created_at=row.created_at, updated_at=row.updated_at,
    )


def _users() -> peewee.ModelSelect:
    return User.select(User, UserType).join(UserType)


def _with_type_name() -> peewee.ModelSelect:
    return User.select(User, UserType.name.alias("type_name")).join(UserType)


#: Hot paths (every sign-in): SQL built once per database. A username is looked up by its
#: key (:func:`username_key`), so ``ALICE`` finds alice.
_BY_ID_OR_USERNAME = CompiledQuery(lambda user_id, key: _with_type_name().where(
    (User.id == user_id) | (User.username_key == key)))
_BY_ID = CompiledQuery(lambda user_id: _with_type_name().where(User.id == user_id))
_BY_USERNAME = CompiledQuery(lambda key: _with_type_name().where(User.username_key == key))


#: A user read in the same statement as a row that refers to it: the user's columns come back
#: as ``owner_<column>`` (no clash with the other table's own), and the type's name with them.
OWNER_PREFIX = "owner_"


def owner_columns() -> list[peewee.Node]:
    """Select these (with a join to User and on to UserType) to read a row's owner along."""
    return [*(field.alias(OWNER_PREFIX + field.column_name) for field in User._meta.sorted_fields),
            UserType.name.alias(OWNER_PREFIX + "type_name")]


def owner_record(row: Row) -> UserRecord:
    """The owner read along with ``row`` through :func:`owner_columns`."""
    column, prefix = vars(row), OWNER_PREFIX
    return UserRecord(
        id=column[prefix + "id"], username=column[prefix + "username"],
        user_handle=column[prefix + "user_handle"],
        attributes=User.attributes.python_value(column[prefix + "attributes"]) or {},
        user_type_id=column[prefix + "user_type_id"], user_type=column[prefix + "type_name"],
        ou_id=column[prefix + "ou_id"], password_hash=column[prefix + "password_hash"],
        status=column[prefix + "status"], created_at=column[prefix + "created_at"],
        updated_at=column[prefix + "updated_at"],
    )


def find_user(id_or_username: str) -> UserRecord | None:
    """The user whose id is ``id_or_username``, else the one with that username (compared
    by :func:`username_key`).

    The id wins: a username may spell another user's id (usernames are chosen at sign-up),
    and one read must not return either of the two by chance.
    """
    rows = _BY_ID_OR_USERNAME.all(User, user_id=id_or_username,
                                  key=username_key(id_or_username))
    row = next((row for row in rows if row.id == id_or_username), rows[0] if rows else None)
    return _user_record(row) if row else None


def find_user_by_id(user_id: str) -> UserRecord | None:
    """The user with this id (what tokens, codes and sessions name)."""
    row = _BY_ID.first(User, user_id=user_id)
    return _user_record(row) if row else None


def find_user_by_username(username: str) -> UserRecord | None:
    """The user with this username (what a person types at sign-in), compared by
    :func:`username_key`: ``ALICE`` finds alice."""
    row = _BY_USERNAME.first(User, key=username_key(username))
    return _user_record(row) if row else None


def get_user(user_id: str) -> UserRecord:
    row = _BY_ID.first(User, user_id=user_id)
    if row is None:
        raise NotFound(f"No user with id '{user_id}'.", code="user_not_found")
    return _user_record(row)


def find_user_by_handle(user_handle: str) -> UserRecord | None:
    row = _users().where(User.user_handle == user_handle).first()
    return _user_record(row) if row else None


def find_user_by_attribute(name: str, value: object) -> UserRecord | None:
    """Linear scan of one attribute: only used for unique-attribute checks on sign-up."""
    for row in _users():
        if (row.attributes or {}).get(name) == value:
            return _user_record(row)
    return None


def drop_attribute_copies(name: str, value: str, *, keep: str) -> list[str]:
    """(In the caller's transaction.) Remove attribute ``name`` from every user but ``keep``
    whose value is ``value`` (in lower case, as verified addresses are compared); the ids of
    those users. A user whose attributes change meanwhile keeps them (a conditional update).
    """
    wanted = value.strip().lower()
    # The database narrows the rows to those whose JSON text holds the value as a JSON
    # string (ASCII case aside: LIKE/ILIKE, every wildcard escaped); Python decides.
    spelled = User.attributes.db_value(wanted)
    pattern = "%" + spelled.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    holds = peewee.Expression(User.attributes, peewee.OP.ILIKE, peewee.NodeList((
        peewee.Value(pattern, converter=False), peewee.SQL("ESCAPE"),
        peewee.Value("\\", converter=False))))
    dropped = []
    for row in User.select(User.id, User.attributes).where((User.id != keep) & holds):
        attributes = dict(row.attributes or {})
        if str(attributes.get(name, "")).strip().lower() != wanted:
            continue
        del attributes[name]
        if User.update(attributes=attributes, email_key=email_key(attributes),
                       updated_at=now()).where(
                (User.id == row.id) & (User.attributes == row.attributes)).execute():
            dropped.append(row.id)
    return dropped


def list_users(*, limit: int = 100, offset: int = 0) -> list[UserRecord]:
    rows = _users().order_by(User.username).limit(limit).offset(offset)
    return [_user_record(row) for row in rows]


def email_key(attributes: dict[str, Any]) -> str | None:
    """``user.email_key``: the ``email`` attribute in lower case, None without one."""
    address = attributes.get("email")
    return address.strip().lower() or None if isinstance(address, str) else None


#: Which users a page of the admin console's search holds: those whose username (by its
#: key) or e-mail address (lower case) starts with ``prefix``, or the one with that id.
BY_USERNAME, BY_EMAIL, BY_ID = "username", "email", "id"


#: What a prefix's range steps over: the last code point, and those UTF-8 cannot encode.
_LAST_CODE_POINT = chr(0x10FFFF)
_SURROGATES = (0xD800, 0xDFFF)


def _starting_with(column: peewee.Field, prefix: str, *, after: str | None = None,
                   inclusive: bool = False) -> peewee.Expression:
    """``column`` starts with ``prefix`` (and, on a following page, comes after ``after``,
    or is it with ``inclusive``), as a range its index answers: ``prefix <= column < prefix
    with its last character one higher`` (a LIKE would scan on PostgreSQL outside the C
    collation, and on SQLite whenever the column is not NOCASE). The keys compare bytewise
    on both (migration 18), which for UTF-8 is the code point order computed here.

    The range has one lower bound, the tighter: SQLite seeks an index by one only, and
    given both would start every page at the prefix."""
    if after is None or after < prefix:  # a cursor's key starts with the prefix
        lower = column >= prefix
    else:
        lower = column >= after if inclusive else column > after
    stem = prefix.rstrip(_LAST_CODE_POINT)
    if not stem:  # nothing sorts after every key that starts with it
        return lower
    following = ord(stem[-1]) + 1
    if _SURROGATES[0] <= following <= _SURROGATES[1]:  # no text holds them
        following = _SURROGATES[1] + 1
    return lower & (column < stem[:-1] + chr(following))


@dataclass(slots=True)
class ListedUser:
    """A user as the admin console's list shows it, and where the following page starts
    when it is a page's last (the order, then the keys)."""

    api: dict[str, Any]
    position: list[Any]


def users_page(*, by: str, prefix: str, after: list[Any] | None,
               limit: int) -> list[ListedUser]:
    """Up to ``limit`` users in keyset order after ``after``: by username key
    (``BY_USERNAME``: ``after`` is ``[key]``; an empty prefix is everyone) or by address
    (``BY_EMAIL``: ``[address, id]``; those whose username starts with ``prefix`` too are
    left out: the username pages showed them), or the one user whose id it is (``BY_ID``).

    PERF: each page seeks its start in the index of ``username_key`` or ``email_key``
    (migration 18) and reads ``limit`` rows from there, whatever the table's size
    (bench/admin_pages.py); the type, unit, passkey count and verified address of each are
    looked up by key."""
    passkeys = (PasskeyCredential.select(peewee.fn.COUNT(PasskeyCredential.id))
                .where(PasskeyCredential.user == User.id))
    verified = VerifiedEmail.select(VerifiedEmail.user).where(
        (VerifiedEmail.user == User.id) & (VerifiedEmail.address == User.email_key))
    query = (User.select(User.id, User.username, User.username_key, User.attributes,
                         User.email_key, User.status, User.created_at,
                         UserType.name.alias("type_name"),
                         OrganizationUnit.handle.alias("ou_handle"), passkeys.alias("passkeys"),
                         peewee.fn.EXISTS(verified).alias("verified"))
             .join_from(User, UserType).join_from(User, OrganizationUnit))
    if by == BY_ID:
        query = query.where(User.id == prefix)
    elif by == BY_USERNAME:
        query = query.where(_starting_with(User.username_key, prefix,
                                           after=after[0] if after else None))
        query = query.order_by(User.username_key)
    else:
        query = query.where(_starting_with(User.email_key, prefix,
                                           after=after[0] if after else None, inclusive=True)
                            & ~_starting_with(User.username_key, prefix))
        if after is not None:  # the rest of the address the page before ended in
            query = query.where(peewee.Tuple(User.email_key, User.id) > peewee.Tuple(*after))
        query = query.order_by(User.email_key, User.id)
    return [ListedUser(api={"id": row.id, "username": row.username,
                            "email": (row.attributes or {}).get("email"),
                            "emailVerified": bool(row.verified), "userType": row.type_name,
                            "ou": row.ou_handle, "state": row.status, "createdAt": row.created_at,
                            "passkeys": row.passkeys},
                       position=[by, row.email_key, row.id] if by == BY_EMAIL
                       else [by, row.username_key])
            for row in query.limit(limit).objects()]


def create_user(*, username: str, user_handle: str, user_type_id: str, ou_id: str,
                attributes: dict[str, Any], password_hash: str | None) -> UserRecord:
    """Insert a user; a username whose key another user has is 409 ``username_taken``.

    The unique index on ``username_key`` decides, so two sign-ups of ``alice`` and ``Alice``
    at once cannot both win.
    """
    row = crud.insert(User, conflict=f"Username '{username}' is already taken.",
                      code="username_taken", username=username,
                      username_key=username_key(username), user_handle=user_handle,
                      user_type=user_type_id, ou=ou_id, attributes=attributes,
                      email_key=email_key(attributes), password_hash=password_hash)
    return get_user(row.id)


def update_user(user_id: str, **fields: Any) -> UserRecord:
    """Change columns of one user (password_hash, status, attributes,
    username: its key follows)."""
    if "username" in fields:
        fields["username_key"] = username_key(fields["username"])
    if "attributes" in fields:
        fields["email_key"] = email_key(fields["attributes"])
    crud.update(User, user_id, what="user", code="user_not_found",
                conflict="That username is already taken.", conflict_code="username_taken",
                **fields, updated_at=now())
    return get_user(user_id)


def delete_user(user_id: str) -> None:
    crud.delete(User, user_id, what="user", code="user_not_found")


# --- organization units ---------------------------------------------------------------

def _ou_api(row: OrganizationUnit) -> dict[str, Any]:
    return {"id": row.id, "handle": row.handle, "name": row.name,
            "description": row.description, "parent": row.parent_id,
            "passkeysOnly": row.passkeys_only}


def ous_page(*, limit: int | None = None, offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
    """Organization units by handle, a page of them (all without a limit), and how many."""
    total, rows = crud.page(OrganizationUnit.select().order_by(OrganizationUnit.handle),
                            limit=limit, offset=offset)
    return total, [_ou_api(row) for row in rows]


def list_ous() -> list[dict[str, Any]]:
    return ous_page()[1]


def find_ou(id_or_handle: str) -> dict[str, Any] | None:
    row = OrganizationUnit.get_or_none((OrganizationUnit.id == id_or_handle)
                                       | (OrganizationUnit.handle == id_or_handle))
    return _ou_api(row) if row else None


def create_ou(*, handle: str, name: str, description: str = "",
              parent_id: str | None = None, passkeys_only: bool = False) -> dict[str, Any]:
    return _ou_api(crud.insert(OrganizationUnit, code="ou_exists",
                               conflict=f"Organization unit '{handle}' already exists.",
                               handle=handle, name=name, description=description,
                               parent=parent_id, passkeys_only=passkeys_only))


def _passkeys_only_unit(user_id: Any, holds: Any, one: Any) -> peewee.Query:
    """A row where the user's unit, or one above it, holds ``passkeys_only``: the walk up the
    tree is one recursive statement however deep the unit (a refresh of a grant made by a
    password sign-in runs it); UNION, not UNION ALL, so a loop in the tree ends the walk."""
    unit = OrganizationUnit.alias("unit")
    start = OrganizationUnit.select(
        OrganizationUnit.id, OrganizationUnit.parent, OrganizationUnit.passkeys_only).join(
            User, on=(User.ou == OrganizationUnit.id)).where(User.id == user_id).cte(
                "chain", recursive=True, columns=("id", "parent_id", "passkeys_only"))
    chain = start.union(unit.select(unit.id, unit.parent, unit.passkeys_only).join(
        start, on=(unit.id == start.c.parent_id)))
    return chain.select_from(chain.c.id).where(chain.c.passkeys_only == holds).limit(one)


_PASSKEYS_ONLY_UNIT = CompiledQuery(lambda user_id, holds=True, one=1: _passkeys_only_unit(
    user_id, holds, one))


def passkeys_only_unit(user_id: str) -> bool:
    """Whether the user's unit (as it is now) or one above it allows passkeys only; False
    for no such user."""
    return _PASSKEYS_ONLY_UNIT.scalar(user_id=user_id) is not None


def update_ou(ou_id: str, **fields: Any) -> dict[str, Any]:
    crud.update(OrganizationUnit, ou_id, what="organization unit", code="ou_not_found",
                **fields)
    return find_ou(ou_id)


def delete_ou(ou_id: str) -> None:
    crud.delete(OrganizationUnit, ou_id, what="organization unit", code="ou_not_found",
                in_use="The organization unit still has users, user types or children.")


# --- user types -------------------------------------------------------------------------

def _user_type_api(row: UserType) -> dict[str, Any]:
    return {"id": row.id, "name": row.name, "ouId": row.ou_id,
            "allowSelfRegistration": row.allow_self_registration, "schema": row.schema or {}}


def user_types_page(*, limit: int | None = None,
                    offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
    """User types by name, a page of them (all without a limit), and how many in all."""
    total, rows = crud.page(UserType.select().order_by(UserType.name), limit=limit,
                            offset=offset)
    return total, [_user_type_api(row) for row in rows]


def list_user_types() -> list[dict[str, Any]]:
    return user_types_page()[1]


def find_user_type(id_or_name: str) -> dict[str, Any] | None:
    row = UserType.get_or_none((UserType.id == id_or_name) | (UserType.name == id_or_name))
    return _user_type_api(row) if row else None


def create_user_type(*, name: str, ou_id: str, allow_self_registration: bool,
                     schema: dict[str, Any]) -> dict[str, Any]:
    return _user_type_api(crud.insert(UserType, conflict=f"User type '{name}' already exists.",
                                      code="user_type_exists", name=name, ou=ou_id,
                                      schema=schema,
                                      allow_self_registration=allow_self_registration))


def update_user_type(type_id: str, **fields: Any) -> dict[str, Any]:
    crud.update(UserType, type_id, what="user type", code="user_type_not_found", **fields)
    return find_user_type(type_id)


def delete_user_type(type_id: str) -> None:
    crud.delete(UserType, type_id, what="user type", code="user_type_not_found",
                in_use="The user type still has users.")
