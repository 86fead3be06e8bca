"""`identityctl user invite` and `identityctl user recovery-codes`: the ways back in that
need no admin later (docs/recovery.md); `identityctl user remove-totp` for the person who lost
both their phone and their recovery codes."""

from __future__ import annotations

import typer

from identityctl.cli.common import ORIGIN, Session, command, when
from identityctl.cli.output import JsonOption, console, emit_json


def add_recovery_commands(user_app: typer.Typer) -> None:
    @command(user_app, "invite")
    def user_invite(
        user: str = typer.Argument(..., metavar="ID|USERNAME", help="Who to invite."),
        email: bool = typer.Option(False, "--email",
                                   help="Also e-mail the link to the user's address."),
        days: int = typer.Option(7, "--days", min=1, max=30, help="How long the link works."),
        as_json: bool = JsonOption,
    ) -> None:
        """A one-time link with which the user creates a passkey on their own device, with
        no password ever (passkey-only onboarding):

            identityctl user create --username ada --email ada@example.com
            identityctl user invite ada --email

        The link works once, for --days days; a new invite does not end older links.
        """
        from identityctl.services.accounts import recovery
        from identityctl.services.context import ServiceContext

        config = Session.connected()
        made = recovery.invite(ServiceContext.for_config(config), user, send_email=email,
                               days=days, origin=ORIGIN)
        record = {key: made[key] for key in ("url", "expiresAt", "emailedTo")}
        if as_json:
            emit_json(record)
            return
        console.print(f"[green]Invitation for {user}[/green], works once until "
                      f"{when(made['expiresAt'])}:")
        console.print(made["url"], soft_wrap=True)
        if made["emailedTo"]:
            console.print(f"E-mailed to {made['emailedTo']} (see `identityctl email outbox`).")

    @command(user_app, "recovery-codes")
    def user_recovery_codes(
        user: str = typer.Argument(..., metavar="ID|USERNAME", help="Whose codes to make."),
        as_json: bool = JsonOption,
    ) -> None:
        """Make 10 new recovery codes for a user and print them once; their old codes stop
        working. Each code signs the user in once on the "Lost your passkey?" page, where
        they then create a new passkey. Hand them over as you would a password:

            identityctl user recovery-codes ada
        """
        from identityctl.services.accounts import recovery

        Session.connected()
        made = recovery.new_recovery_codes(user, origin=ORIGIN)
        if as_json:
            emit_json({"recoveryCodes": made})
            return
        console.print(f"[green]New recovery codes for {user}[/green] (shown once; each "
                      "works once):")
        for code in made:
            console.print(f"  {code}")

    @command(user_app, "remove-totp")
    def user_remove_totp(
        user: str = typer.Argument(..., metavar="ID|USERNAME",
                                   help="Whose authenticator app to remove."),
        as_json: bool = JsonOption,
    ) -> None:
        """Remove a user's authenticator app (TOTP) when they lost their phone and their
        recovery codes: their password signs them in alone again, until they set up a new
        app on their account page. They are told by e-mail:

            identityctl user remove-totp ada
        """
        from identityctl.services.accounts import totp
        from identityctl.services.context import ServiceContext
        from identityctl.services.directory import users as directory_service

        config = Session.connected()
        person = directory_service.require_user(user)
        totp.remove(ServiceContext.for_config(config), person, origin=ORIGIN)
        if as_json:
            emit_json({"userId": person.id, "removed": True})
            return
        console.print(f"[green]Removed the authenticator app of {user}.[/green]")
