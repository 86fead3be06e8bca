"""`identityctl idp`: upstream identity providers people may sign in through ("Continue with
Google"): add, list, remove. docs/federation.md says what to register at each provider."""

from __future__ import annotations

import typer

from identityctl.cli.common import (
    ORIGIN,
    Session,
    YesOption,
    command,
    confirm_and_delete,
    parse_assignments,
    read_secret,
)
from identityctl.cli.output import JsonOption, console, show_record, show_table

idp_app = typer.Typer(
    help="Identity providers: sign in with Google, Microsoft, GitHub or any OpenID provider "
         "(add, list, remove).", no_args_is_help=True)


@command(idp_app, "add")
def idp_add(
    kind: str = typer.Argument(..., metavar="KIND",
                               help="oidc (any OpenID provider), google, microsoft or github."),
    client_id: str = typer.Option(..., "--client-id", help="The client id it gave you."),
    secret_stdin: bool = typer.Option(
        False, "--client-secret-stdin",
        help="Read the client secret from the first line of standard input instead of "
             "asking (it is never an argument, never printed, never logged)."),
    issuer: str = typer.Option("", "--issuer", help="oidc: the provider's issuer URL."),
    tenant: str = typer.Option("", "--tenant",
                               help="microsoft: your directory (tenant) id, or organizations "
                                    "(default: any work account) or common."),
    handle: str = typer.Option("", "--handle", help="Short key (default: the kind)."),
    name: str = typer.Option("", "--name",
                             help="What the button says after \"Continue with\" "
                                  "(default: Google, Microsoft, GitHub, or the handle)."),
    scope: list[str] = typer.Option([], "--scope", help="Scopes to ask for (repeat; default: "
                                    "openid profile email; GitHub: read:user user:email)."),
    mapping: list[str] = typer.Option([], "--map", metavar="ATTRIBUTE=CLAIM",
                                      help="Take a new user's attribute from this claim "
                                           "(repeat; default given_name, family_name)."),
    discovery_url: str = typer.Option("", "--discovery-url",
                                      help="oidc: the discovery document, when it is not at "
                                           "{issuer}/.well-known/openid-configuration."),
    api_url: str = typer.Option("", "--api-url", help="github: the API (GitHub Enterprise)."),
    web_url: str = typer.Option("", "--web-url", help="github: the web address (GitHub "
                                "Enterprise; default https://github.com)."),
    as_json: bool = JsonOption,
) -> None:
    """Let people sign in through an identity provider. First register identityctl there,
    with the redirect URI this command prints; then:

        identityctl idp add google --client-id 123.apps.googleusercontent.com
        identityctl idp add microsoft --client-id <app id> --tenant <directory id>
        identityctl idp add github --client-id Iv1.abc --name GitHub
        identityctl idp add oidc --issuer https://login.example.com --handle corp \\
            --name "Example Corp" --client-id identityctl

    The default sign-in flow then offers "Continue with <name>" on the hosted page.
    """
    from identityctl.services.accounts import federation
    from identityctl.services.context import ServiceContext

    config = Session.connected()
    ctx = ServiceContext.for_config(config)
    secret = read_secret("Client secret", from_stdin=secret_stdin)
    with console.status("Checking the provider..."):
        created = federation.add_provider(
            ctx, kind=kind, client_id=client_id, client_secret=secret, handle=handle,
            name=name, issuer=issuer, tenant=tenant, scopes=scope or None,
            mapping=parse_assignments(mapping, "--map") or None, api_url=api_url,
            web_url=web_url, discovery_url=discovery_url, origin=ORIGIN)
    record = {**created.to_api(), "redirectUri": federation.callback_uri(ctx)}
    show_record(record, title=f"Added identity provider {created.name} (register the "
                              "redirectUri there)", as_json=as_json)


@command(idp_app, "list")
def idp_list(as_json: bool = JsonOption) -> None:
    """List the identity providers (never their secrets), with the redirect URI to register
    at each."""
    from identityctl.services.accounts import federation
    from identityctl.services.context import ServiceContext

    config = Session.connected()
    callback = federation.callback_uri(ServiceContext.for_config(config))
    records = [provider.to_api() for provider in federation.list_providers()]
    show_table(records, [("handle", "Handle"), ("name", "Name"), ("kind", "Kind"),
                         ("issuer", "Issuer"), ("clientId", "Client id")],
               title=f"Identity providers (redirect URI: {callback})", as_json=as_json,
               json_data=records)


@command(idp_app, "remove")
def idp_remove(
    provider: str = typer.Argument(..., metavar="HANDLE|ID", help="Which provider."),
    yes: bool = YesOption, as_json: bool = JsonOption,
) -> None:
    """Stop offering a provider (asks first unless --yes). Accounts linked through it are
    unlinked; the users stay and sign in another way."""
    from identityctl.services.accounts import federation

    Session.connected()
    found = federation.require_provider(provider)
    confirm_and_delete(f"identity provider {found.name}", found.id, federation.remove_provider,
                       yes=yes, as_json=as_json, shown={"handle": found.handle})
