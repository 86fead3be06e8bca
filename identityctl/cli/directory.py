"""`identityctl user`, `ou` and `user-type`: manage the directory from the command line.

Every command goes through identityctl.services.directory.users, so the CLI applies the same
validation and leaves the same audit trail (actor "cli") as the REST API and the MCP tools.
Services are imported inside the commands: they load argon2, which `--help` should not wait
for.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from identityctl.cli.common import (
    ORIGIN,
    Session,
    YesOption,
    command,
    confirm_and_delete,
    end_sessions,
    parse_assignments,
    read_json_file,
    read_secret,
    when,
)
from identityctl.cli.output import JsonOption, console, done, show_record, show_table
from identityctl.errors import BadRequest

if TYPE_CHECKING:
    from identityctl.services.directory.users import Recovery
    from identityctl.store.directory import UserRecord

user_app = typer.Typer(
    help="Users: create, list, show, update, delete; set passwords; disable, enable, unlock.",
    no_args_is_help=True)
ou_app = typer.Typer(help="Organization units: the tree users and user types belong to.",
                     no_args_is_help=True)
user_type_app = typer.Typer(
    help="User types: the attribute schema of a kind of user and whether people may sign "
         "themselves up.", no_args_is_help=True)


def read_new_password(from_stdin: bool) -> str:
    return read_secret("New password", from_stdin=from_stdin)


# --- users ----------------------------------------------------------------------------------


def _recovery(user: UserRecord) -> Recovery:
    from identityctl.services.directory import users as directory_service

    return directory_service.recovery_of(user, mail=Session.config().email.enabled)


def _email_shown(user: UserRecord, recovery: Recovery) -> str | None:
    """The address and whether it is verified (who can get a recovery code by mail)."""
    address = user.attributes.get("email")
    if recovery.email_verified:
        return f"{address} (verified)"
    if recovery.verified_address:
        return f"{address or '-'} (not verified; verified: {recovery.verified_address})"
    return f"{address} (not verified)" if address else None


def _can_recover(recovery: Recovery) -> str:
    ways = ([f"code to {recovery.verified_address}"]
            if recovery.verified_address and recovery.mail else [])
    ways += [f"{recovery.codes_left} recovery code(s)"] if recovery.codes_left else []
    return f"yes: {', '.join(ways)}" if ways else "no (only an administrator can help)"


def _show_user(user: UserRecord, *, title: str, as_json: bool) -> None:
    from identityctl.services.directory import roles

    held = [role.name for role in roles.roles_of(user.id)]
    recovery = _recovery(user)
    show_record({**user.to_api(), **recovery.to_api(), "roles": held} if as_json else {
        "username": user.username, "id": user.id, "type": user.user_type, "ou": user.ou_id,
        "status": user.status, "roles": " ".join(held) or "-",
        "password": "set" if user.password_hash else "none (passkeys only)",
        "email": _email_shown(user, recovery), "can recover": _can_recover(recovery),
        "attributes": user.attributes, "created": when(user.created_at),
        "updated": when(user.updated_at)}, title=title, as_json=as_json)


@command(user_app, "create")
def user_create(
    username: str = typer.Option(..., "--username", "-u",
                                 help="Sign-in name: letters, digits and . _ @ + -"),
    email: str | None = typer.Option(None, "--email", help="Sets the email attribute."),
    email_verified: bool = typer.Option(
        False, "--email-verified",
        help="Vouch for the e-mail address, as if the user had confirmed it (it may then "
             "be used for recovery and sign-in through providers)."),
    password_stdin: bool = typer.Option(
        False, "--password-stdin",
        help="Read a password from the first line of standard input. Without it the user "
             "has no password and signs in with passkeys."),
    user_type: str = typer.Option("person", "--type", "-t",
                                  help="User type (name or id) whose schema the attributes "
                                       "must follow."),
    ou: str | None = typer.Option(None, "--ou",
                                  help="Organization unit (handle or id); default: the user "
                                       "type's."),
    attribute: list[str] | None = typer.Option(
        None, "--attribute", "-a", metavar="NAME=VALUE",
        help="An attribute of the user type's schema; repeat for more. Booleans: true/false."),
    role: list[str] | None = typer.Option(
        None, "--role", "-r", help="A role the user holds (repeat for more), e.g. admin: who "
                                   "may grant MCP clients the system scope."),
    as_json: bool = JsonOption,
) -> None:
    """Create a user. The password, if any, is checked against the password policy.

    Passwords never go on the command line (they would land in shell history and `ps`):

        printf '%s\\n' "$PASSWORD" | identityctl user create --username alice \\
            --email alice@example.com --attribute given_name=Alice --password-stdin
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    texts = parse_assignments(attribute or [], "--attribute")
    if email is not None:
        texts["email"] = email
    password = read_new_password(from_stdin=True) if password_stdin else None
    schema = directory_service.require_user_type(user_type)["schema"]
    attributes = directory_service.coerce_attributes(schema, texts)
    with console.status(f"Creating user {username}..."):
        user = directory_service.create_user(username=username, password=password,
                                             attributes=attributes, user_type=user_type,
                                             ou=ou, origin=ORIGIN)
    from identityctl.services.directory import roles

    for name in role or []:
        roles.grant_role(user.id, name, origin=ORIGIN)
    _confirm_email(user.id, email_verified)
    _show_user(user, title=f"Created user {user.username}", as_json=as_json)


def _confirm_email(user_id: str, vouched: bool) -> None:
    if vouched:
        from identityctl.services.accounts import recovery

        recovery.confirm_email(user_id, origin=ORIGIN)


@command(user_app, "list")
def user_list(
    limit: int = typer.Option(100, help="At most this many users (ordered by username)."),
    offset: int = typer.Option(0, help="Skip this many users first (paging)."),
    cannot_recover: bool = typer.Option(
        False, "--cannot-recover",
        help="Only those who could not get back in without an administrator if they lost "
             "their passkeys: no verified address the deployment can mail a code to, and "
             "no unused recovery code."),
    as_json: bool = JsonOption,
) -> None:
    """List users, ordered by username, with whether their e-mail address is verified.

        identityctl user list --limit 20 --offset 40
        identityctl user list --cannot-recover
    """
    from identityctl.services.directory import users as directory_service

    config = Session.connected()
    if cannot_recover:
        users = directory_service.users_who_cannot_recover(
            mail=config.email.enabled, limit=limit, offset=offset)
    else:
        users = [(user, _recovery(user)) for user in
                 directory_service.list_users(limit=limit, offset=offset)]
    rows = [{"username": u.username, "id": u.id, "type": u.user_type, "status": u.status,
             "email": _email_shown(u, recovery),
             "recover": "yes" if recovery.can_recover else "no",
             "password": "yes" if u.password_hash else "no",
             "created": when(u.created_at)} for u, recovery in users]
    show_table(rows, [("username", "Username"), ("id", "Id"), ("type", "Type"),
                      ("status", "Status"), ("email", "Email"), ("recover", "Can recover"),
                      ("password", "Password"), ("created", "Created")],
               title="Users who cannot recover" if cannot_recover else "Users",
               as_json=as_json,
               json_data=[{**u.to_api(), **recovery.to_api()} for u, recovery in users])


@command(user_app, "show")
def user_show(user: str = typer.Argument(..., metavar="ID|USERNAME", help="Who to show."),
              as_json: bool = JsonOption) -> None:
    """Show one user by id or username.

        identityctl user show alice --json
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    found = directory_service.require_user(user)
    _show_user(found, title=f"User {found.username}", as_json=as_json)


@command(user_app, "update")
def user_update(
    user: str = typer.Argument(..., metavar="ID|USERNAME", help="Who to change."),
    email: str | None = typer.Option(None, "--email", help="New email attribute."),
    email_verified: bool = typer.Option(
        False, "--email-verified",
        help="Vouch for the e-mail address, as if the user had confirmed it (it may then "
             "be used for recovery and sign-in through providers)."),
    attribute: list[str] | None = typer.Option(
        None, "--attribute", "-a", metavar="NAME=VALUE", help="Set an attribute; repeatable."),
    unset: list[str] | None = typer.Option(None, "--unset", metavar="NAME",
                                           help="Remove an attribute; repeatable."),
    ou: str | None = typer.Option(None, "--ou", help="Move to this organization unit."),
    as_json: bool = JsonOption,
) -> None:
    """Change a user's attributes or organization unit (the others are kept).

        identityctl user update alice --email alice@new.example --unset family_name
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    current = directory_service.require_user(user)
    texts = parse_assignments(attribute or [], "--attribute")
    if email is not None:
        texts["email"] = email
    attributes = None
    if texts or unset:
        schema = directory_service.require_user_type(current.user_type_id)["schema"]
        attributes = {**current.attributes, **directory_service.coerce_attributes(schema, texts)}
        for name in unset or []:
            attributes.pop(name, None)
    updated = directory_service.update_user(current.id, attributes=attributes, ou=ou,
                                            origin=ORIGIN)
    _confirm_email(updated.id, email_verified)
    _show_user(updated, title=f"Updated user {updated.username}", as_json=as_json)


@command(user_app, "delete")
def user_delete(user: str = typer.Argument(..., metavar="ID|USERNAME", help="Who to delete."),
                yes: bool = YesOption, as_json: bool = JsonOption) -> None:
    """Delete a user together with their passkeys and sessions.

        identityctl user delete alice --yes
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    found = directory_service.require_user(user)
    confirm_and_delete(f"user {found.username} and their passkeys", found.id,
                       directory_service.delete_user, yes=yes, as_json=as_json,
                       shown={"username": found.username})


@command(user_app, "set-password")
def user_set_password(
    user: str = typer.Argument(..., metavar="ID|USERNAME", help="Whose password to set."),
    password_stdin: bool = typer.Option(
        False, "--password-stdin",
        help="Read the password from the first line of standard input instead of asking."),
    as_json: bool = JsonOption,
) -> None:
    """Set or replace a user's password (asked twice, hidden; or --password-stdin).

    The password policy applies: 8-128 characters, not a common password, not the username.

        identityctl user set-password alice
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    found = directory_service.require_user(user)
    password = read_new_password(from_stdin=password_stdin)
    with console.status("Hashing the password (argon2id)..."):
        directory_service.set_password(found.id, password, origin=ORIGIN)
    ended = end_sessions(found.id, "password changed")
    done(f"password set for {found.username}" + (f"; {ended} session(s) ended" if ended
                                                  else ""), as_json=as_json,
         data={"id": found.id, "username": found.username, "hasPassword": True,
               "sessionsEnded": ended})


def _change_status(user: str, change: str, as_json: bool) -> None:
    from identityctl.services.directory import users as directory_service

    Session.connected()
    if change == "unlock":
        updated = directory_service.unlock_user(user, origin=ORIGIN)
    else:
        updated = directory_service.set_status(
            user, "disabled" if change == "disable" else "active", origin=ORIGIN)
    if change == "disable":  # refused at their next use anyway; ended, clients are told
        end_sessions(updated.id, "user disabled")
    done(f"{updated.username} is now {updated.status}", as_json=as_json, data=updated.to_api())


@command(user_app, "sessions")
def user_sessions(user: str = typer.Argument(..., metavar="ID|USERNAME"),
                  as_json: bool = JsonOption) -> None:
    """List a user's sign-in sessions (single sign-on): when and how they signed in, last
    use, expiry, and from where.

        identityctl user sessions alice
    """
    from identityctl.services.accounts import sessions
    from identityctl.services.context import ServiceContext

    config = Session.connected()
    records = [record.to_api() for record in sessions.list_user_sessions(
        ServiceContext.for_config(config), user)]
    rows = [{**record, "amr": " ".join(record["amr"]), "signedIn": when(record["authTime"]),
             "lastSeen": when(record["lastSeenAt"]), "expires": when(record["expiresAt"])}
            for record in records]
    show_table(rows, [("id", "Session"), ("signedIn", "Signed in"), ("amr", "With"),
                      ("lastSeen", "Last used"), ("expires", "Expires"),
                      ("clientAddress", "From")],
               title="Sessions", as_json=as_json, json_data=records)


@command(user_app, "end-sessions")
def userend_sessions(user: str = typer.Argument(..., metavar="ID|USERNAME"),
                      yes: bool = YesOption, as_json: bool = JsonOption) -> None:
    """Sign a user out everywhere: end every session, every token of a client signed in
    through one, and tell clients with a back-channel logout URI (asks first unless --yes).

        identityctl user end-sessions alice --yes
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    found = directory_service.require_user(user)
    if not yes:
        typer.confirm(f"End every session of {found.username}?", abort=True, err=True)
    ended = end_sessions(found.id, "ended by an administrator")
    done(f"ended {ended} session(s) of {found.username}", as_json=as_json,
         data={"id": found.id, "username": found.username, "ended": ended})


@command(user_app, "disable")
def user_disable(user: str = typer.Argument(..., metavar="ID|USERNAME"),
                 as_json: bool = JsonOption) -> None:
    """Refuse every sign-in and enrolment of a user until `identityctl user enable`.

        identityctl user disable alice
    """
    _change_status(user, "disable", as_json)


@command(user_app, "enable")
def user_enable(user: str = typer.Argument(..., metavar="ID|USERNAME"),
                as_json: bool = JsonOption) -> None:
    """Make a disabled (or locked) user active again.

        identityctl user enable alice
    """
    _change_status(user, "enable", as_json)


@command(user_app, "unlock")
def user_unlock(user: str = typer.Argument(..., metavar="ID|USERNAME"),
                as_json: bool = JsonOption) -> None:
    """Lift a lockout after too many failed attempts (a disabled user stays disabled).

        identityctl user unlock alice
    """
    _change_status(user, "unlock", as_json)


# --- organization units ---------------------------------------------------------------------


@command(ou_app, "create")
def ou_create(
    handle: str = typer.Option(..., "--handle", help="Stable key: lowercase letters, digits, "
                                                      "- and _."),
    name: str | None = typer.Option(None, "--name", help="Display name (default: the handle)."),
    description: str = typer.Option("", "--description", help="What the unit is for."),
    parent: str | None = typer.Option(None, "--parent", help="Parent unit (handle or id)."),
    passkeys_only: bool = typer.Option(False, "--passkeys-only", help="Its people (and those "
                                       "of units inside it) sign in with passkeys only."),
    as_json: bool = JsonOption,
) -> None:
    """Create an organization unit, optionally inside another.

        identityctl ou create --handle sales --name "Sales" --parent default
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    created = directory_service.create_ou(handle=handle, name=name or handle,
                                          description=description, parent=parent,
                                          passkeys_only=passkeys_only, origin=ORIGIN)
    show_record(created, title=f"Created organization unit {handle}", as_json=as_json)


@command(ou_app, "list")
def ou_list(as_json: bool = JsonOption) -> None:
    """List organization units with their parents.

        identityctl ou list --json
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    units = directory_service.list_ous()
    handles = {unit["id"]: unit["handle"] for unit in units}
    rows = [{**unit, "parent": handles.get(unit["parent"])} for unit in units]
    show_table(rows, [("handle", "Handle"), ("name", "Name"), ("id", "Id"),
                      ("parent", "Parent"), ("description", "Description")],
               title="Organization units", as_json=as_json, json_data=units)


@command(ou_app, "show")
def ou_show(ou: str = typer.Argument(..., metavar="ID|HANDLE"),
            as_json: bool = JsonOption) -> None:
    """Show one organization unit.

        identityctl ou show default
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    found = directory_service.require_ou(ou)
    show_record(found, title=f"Organization unit {found['handle']}", as_json=as_json)


@command(ou_app, "update")
def ou_update(
    ou: str = typer.Argument(..., metavar="ID|HANDLE"),
    name: str | None = typer.Option(None, "--name", help="New display name."),
    description: str | None = typer.Option(None, "--description", help="New description."),
    parent: str | None = typer.Option(None, "--parent", help="Move under this unit."),
    top_level: bool = typer.Option(False, "--top-level", help="Move to the top (no parent)."),
    passkeys_only: bool | None = typer.Option(
        None, "--passkeys-only/--passwords-allowed",
        help="Passkeys only for its people (and units inside it), or passwords allowed again."),
    as_json: bool = JsonOption,
) -> None:
    """Rename, describe or move an organization unit (a unit cannot move inside itself).

        identityctl ou update sales --parent emea
    """
    from identityctl.services.directory import users as directory_service

    if parent and top_level:
        raise BadRequest("Use either --parent or --top-level.", code="conflicting_options")
    Session.connected()
    changes: dict[str, Any] = {key: value for key, value in
                               (("name", name), ("description", description), ("parent", parent),
                                ("passkeys_only", passkeys_only))
                               if value is not None}
    if top_level:
        changes["parent"] = None
    updated = directory_service.update_ou(ou, origin=ORIGIN, **changes)
    show_record(updated, title=f"Updated organization unit {updated['handle']}",
                as_json=as_json)


@command(ou_app, "delete")
def ou_delete(ou: str = typer.Argument(..., metavar="ID|HANDLE"), yes: bool = YesOption,
              as_json: bool = JsonOption) -> None:
    """Delete an organization unit that no user, user type or child unit uses any more.

        identityctl ou delete sales --yes
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    found = directory_service.require_ou(ou)
    confirm_and_delete(f"organization unit {found['handle']}", found["id"],
                       directory_service.delete_ou, yes=yes, as_json=as_json,
                       shown={"handle": found["handle"]})


# --- user types -----------------------------------------------------------------------------

SchemaFileOption = typer.Option(
    None, "--schema-file", metavar="PATH",
    help='JSON attribute schema, e.g. {"email": {"type": "string", "unique": true}, '
         '"age": {"type": "number", "required": false}}. Types: string, boolean, number.')
SelfRegistrationOption = typer.Option(
    None, "--self-registration/--no-self-registration",
    help="Whether people may sign themselves up as this type (registration flows).")


def _read_schema(path: Path | None) -> dict[str, Any] | None:
    return None if path is None else read_json_file(path)


@command(user_type_app, "create")
def user_type_create(
    name: str = typer.Option(..., "--name", help="Name: lowercase letters, digits, - and _."),
    ou: str = typer.Option("default", "--ou", help="Organization unit new users of this type "
                                                   "join."),
    self_registration: bool | None = SelfRegistrationOption,
    schema_file: Path | None = SchemaFileOption,
    as_json: bool = JsonOption,
) -> None:
    """Create a user type.

        identityctl user-type create --name employee --ou staff --schema-file employee.json
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    created = directory_service.create_user_type(
        name=name, ou=ou, allow_self_registration=bool(self_registration),
        schema=_read_schema(schema_file), origin=ORIGIN)
    show_record(created, title=f"Created user type {name}", as_json=as_json)


@command(user_type_app, "list")
def user_type_list(as_json: bool = JsonOption) -> None:
    """List user types with their attributes.

        identityctl user-type list
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    kinds = directory_service.list_user_types()
    rows = [{**kind, "attributes": ", ".join(kind["schema"]) or "-",
             "selfRegistration": "yes" if kind["allowSelfRegistration"] else "no"}
            for kind in kinds]
    show_table(rows, [("name", "Name"), ("id", "Id"), ("ouId", "OU"),
                      ("selfRegistration", "Self sign-up"), ("attributes", "Attributes")],
               title="User types", as_json=as_json, json_data=kinds)


@command(user_type_app, "show")
def user_type_show(user_type: str = typer.Argument(..., metavar="ID|NAME"),
                   as_json: bool = JsonOption) -> None:
    """Show a user type and its attribute schema.

        identityctl user-type show person
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    found = directory_service.require_user_type(user_type)
    show_record(found, title=f"User type {found['name']}", as_json=as_json)


@command(user_type_app, "update")
def user_type_update(
    user_type: str = typer.Argument(..., metavar="ID|NAME"),
    ou: str | None = typer.Option(None, "--ou", help="New organization unit."),
    self_registration: bool | None = SelfRegistrationOption,
    schema_file: Path | None = SchemaFileOption,
    as_json: bool = JsonOption,
) -> None:
    """Change a user type's OU, self sign-up or schema (the schema file replaces it whole).

        identityctl user-type update person --schema-file person.json --no-self-registration
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    updated = directory_service.update_user_type(
        user_type, ou=ou, allow_self_registration=self_registration,
        schema=_read_schema(schema_file), origin=ORIGIN)
    show_record(updated, title=f"Updated user type {updated['name']}", as_json=as_json)


@command(user_type_app, "delete")
def user_type_delete(user_type: str = typer.Argument(..., metavar="ID|NAME"),
                     yes: bool = YesOption, as_json: bool = JsonOption) -> None:
    """Delete a user type that no user has any more.

        identityctl user-type delete contractor
    """
    from identityctl.services.directory import users as directory_service

    Session.connected()
    found = directory_service.require_user_type(user_type)
    confirm_and_delete(f"user type {found['name']}", found["id"],
                       directory_service.delete_user_type, yes=yes, as_json=as_json,
                       shown={"name": found["name"]})
