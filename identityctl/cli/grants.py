"""`identityctl grant`: what people let clients (MCP assistants, apps) have; list, revoke.

Revoking a grant ends every token the client holds for that person at once (the next call
with them is a 401); the client must send the person through sign-in again.
"""

from __future__ import annotations

import typer

from identityctl.cli.common import ORIGIN, Session, YesOption, command, when
from identityctl.cli.output import JsonOption, done, show_table

grant_app = typer.Typer(help="Grants: what people let clients have (list, revoke).",
                        no_args_is_help=True)


@command(grant_app, "list")
def grant_list(user: str | None = typer.Option(None, "--user", "-u",
                                               help="Only this user's (id or username)."),
               as_json: bool = JsonOption) -> None:
    """List grants: which person let which client have which scopes.

        identityctl grant list --user alice
    """
    from identityctl.services.clients import grants

    Session.connected()
    records = [grant.to_api() for grant in grants.list_grants(user=user)]
    rows = [{**record, "scopes": " ".join(record["scopes"]),
             "granted": when(record["grantedAt"])} for record in records]
    show_table(rows, [("username", "User"), ("application", "Client"),
                      ("clientId", "Client id"), ("scopes", "Scopes"), ("granted", "Granted")],
               title="Grants", as_json=as_json, json_data=records)


@command(grant_app, "revoke")
def grant_revoke(user: str = typer.Argument(..., metavar="USER", help="User id or username."),
                 client_id: str = typer.Argument(..., metavar="CLIENT_ID",
                                                 help="The client's id (an https URL for a "
                                                      "client described by a document)."),
                 yes: bool = YesOption, as_json: bool = JsonOption) -> None:
    """End USER's grant to CLIENT_ID and every token the client holds for them (asks first
    unless --yes).

        identityctl grant revoke alice 3f9c0a1b2c3d4e5f6a7b8c9d --yes
    """
    from identityctl.services.clients import grants
    from identityctl.services.context import ServiceContext

    config = Session.connected()
    if not yes:
        typer.confirm(f"Revoke {user}'s grant to {client_id}? Its tokens stop working now.",
                      abort=True, err=True)
    ended = grants.revoke_grant(ServiceContext.for_config(config), user, client_id,
                                origin=ORIGIN)
    done(f"revoked {user}'s grant to {client_id} ({ended} token famil"
         f"{'y' if ended == 1 else 'ies'} ended)", as_json=as_json,
         data={"user": user, "clientId": client_id, "tokenFamiliesEnded": ended})
