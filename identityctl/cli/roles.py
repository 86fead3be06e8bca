"""`identityctl role`: who may grant what. A role carries scopes; users hold roles.

A scope some role carries is granted to a client (an MCP assistant, an app) only by a person
holding such a role: `init` makes `admin`, carrying the MCP scope `system`.
"""

from __future__ import annotations

import typer

from identityctl.cli.common import ORIGIN, Session, YesOption, command, confirm_and_delete
from identityctl.cli.output import JsonOption, done, show_record, show_table

role_app = typer.Typer(help="Roles: the scopes users hold and may grant to clients (list, "
                            "create, update, delete, grant, revoke).", no_args_is_help=True)

RoleArgument = typer.Argument(..., metavar="ROLE", help="Role name (or id).")
UserArgument = typer.Argument(..., metavar="USER", help="User id or username.")


@command(role_app, "list")
def role_list(as_json: bool = JsonOption) -> None:
    """List the roles and their scopes.

        identityctl role list
    """
    from identityctl.services.directory import roles

    Session.connected()
    records = [role.to_api() for role in roles.list_roles()]
    rows = [{**record, "scopes": " ".join(record["scopes"])} for record in records]
    show_table(rows, [("name", "Role"), ("scopes", "Scopes"), ("description", "Description")],
               title="Roles", as_json=as_json, json_data=records)


@command(role_app, "create")
def role_create(
    name: str = typer.Argument(..., help="Lowercase letters, digits, '-' or '_'."),
    scope: list[str] = typer.Option(..., "--scope", "-s",
                                    help="A scope the role carries (repeat for more)."),
    description: str = typer.Option("", "--description", help="What the role is for."),
    as_json: bool = JsonOption,
) -> None:
    """Create a role carrying scopes; from now on only its holders grant those scopes.

        identityctl role create orders-admin --scope orders:write --scope orders:read
    """
    from identityctl.services.directory import roles

    Session.connected()
    role = roles.create_role(name=name, scopes=scope, description=description, origin=ORIGIN)
    show_record(role.to_api(), title=f"Created role {role.name}", as_json=as_json)


@command(role_app, "update")
def role_update(
    role: str = RoleArgument,
    scope: list[str] | None = typer.Option(None, "--scope", "-s",
                                           help="The scopes it carries now (replaces them)."),
    description: str | None = typer.Option(None, "--description"),
    as_json: bool = JsonOption,
) -> None:
    """Change a role's scopes or description."""
    from identityctl.services.directory import roles

    Session.connected()
    updated = roles.update_role(role, scopes=scope, description=description, origin=ORIGIN)
    show_record(updated.to_api(), title=f"Role {updated.name}", as_json=as_json)


@command(role_app, "delete")
def role_delete(role: str = RoleArgument, yes: bool = YesOption,
                as_json: bool = JsonOption) -> None:
    """Delete a role: its holders lose it, and its scopes are free to grant unless another
    role carries them (asks first unless --yes)."""
    from identityctl.services.directory import roles

    Session.connected()
    found = roles.require_role(role)
    confirm_and_delete(f"role {found.name}", found.id, roles.delete_role, yes=yes,
                       as_json=as_json, shown={"role": found.name})


@command(role_app, "grant")
def role_grant(role: str = RoleArgument, user: str = UserArgument,
               as_json: bool = JsonOption) -> None:
    """Give USER the ROLE. Example (the first administrator):

        identityctl role grant admin alice
    """
    from identityctl.services.directory import roles

    Session.connected()
    granted = roles.grant_role(user, role, origin=ORIGIN)
    done(f"{user} holds the role {granted.name} ({' '.join(granted.scopes)})",
         as_json=as_json, data={"user": user, "role": granted.to_api()})


@command(role_app, "revoke")
def role_revoke(role: str = RoleArgument, user: str = UserArgument,
                as_json: bool = JsonOption) -> None:
    """Take ROLE from USER. Tokens they granted keep their scopes until they expire; their
    refresh is refused."""
    from identityctl.services.directory import roles

    Session.connected()
    roles.revoke_role(user, role, origin=ORIGIN)
    done(f"{user} no longer holds the role {role}", as_json=as_json,
         data={"user": user, "role": role})
