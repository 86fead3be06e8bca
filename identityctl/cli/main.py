"""The `identityctl` command: set up, run and administer the identity service."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import tempfile
import time
from pathlib import Path

import typer

from identityctl import __version__
from identityctl.cli.audit import audit_app
from identityctl.cli.catalog import app_app, flow_app, theme_app
from identityctl.cli.changes import change_app
from identityctl.cli.common import Session, command, when
from identityctl.cli.configuration import add_configuration_commands
from identityctl.cli.directory import ou_app, user_app, user_type_app
from identityctl.cli.email import email_app
from identityctl.cli.grants import grant_app
from identityctl.cli.identity_providers import idp_app
from identityctl.cli.mcp import mcp_app
from identityctl.cli.output import JsonOption, console, done, emit_json, show_table
from identityctl.cli.passkey import passkey_app
from identityctl.cli.recovery import add_recovery_commands
from identityctl.cli.resource_servers import resource_server_app
from identityctl.cli.roles import role_app
from identityctl.cli.webhooks import webhook_app
from identityctl.config import CONFIG_ENV, DEFAULT_CONFIG_NAME, Config, load_config
from identityctl.errors import BadRequest, Conflict
from identityctl.server.affinity import cores_for, worker_count

#: What `init` and `serve` read from the environment when their option is not given (the
#: container image's entrypoint passes its settings this way: docs/deployment.md).
BASE_URL_ENV = "IDENTITYCTL_BASE_URL"
DATABASE_URL_ENV = "IDENTITYCTL_DATABASE_URL"
ADMIN_EMAIL_ENV = "IDENTITYCTL_ADMIN_EMAIL"
HOST_ENV = "IDENTITYCTL_HOST"
PORT_ENV = "IDENTITYCTL_PORT"

app = typer.Typer(
    name="identityctl",
    help="Passkey-first identity service: WebAuthn passkeys, OAuth 2.0 / OpenID Connect, "
         "sign-in flows and an MCP tool server, in one file.\n\n"
         "Start with `identityctl init`, then `identityctl serve`.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_show_locals=False,
)
db_app = typer.Typer(help="Database schema upgrades and backups.", no_args_is_help=True)
keys_app = typer.Typer(help="Token signing keys (JWKS): list and rotate.", no_args_is_help=True)
config_app = typer.Typer(help="Check the configuration file.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(keys_app, name="keys")
app.add_typer(config_app, name="config")
app.add_typer(audit_app, name="audit")
add_recovery_commands(user_app)
app.add_typer(user_app, name="user")
app.add_typer(ou_app, name="ou")
app.add_typer(user_type_app, name="user-type")
app.add_typer(app_app, name="app")
app.add_typer(flow_app, name="flow")
app.add_typer(theme_app, name="theme")
app.add_typer(mcp_app)
app.add_typer(passkey_app, name="passkey")
app.add_typer(role_app, name="role")
app.add_typer(grant_app, name="grant")
app.add_typer(resource_server_app, name="resource-server")
app.add_typer(email_app, name="email")
app.add_typer(idp_app, name="idp")
app.add_typer(webhook_app, name="webhook")
app.add_typer(change_app, name="change")
add_configuration_commands(app)


def _version(value: bool) -> None:
    if value:
        console.print(f"identityctl {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    config: str | None = typer.Option(
        None, "--config", "-c", metavar="PATH", envvar=CONFIG_ENV,
        help=f"Configuration file (default: ./{DEFAULT_CONFIG_NAME}).", show_default=False),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    Session.reset(config)


@command(app, "init")
def init(
    directory: Path = typer.Option(Path("."), "--dir", "-d",
                                   help="Folder for config.toml and the SQLite database."),
    base_url: str = typer.Option("http://localhost:8090", "--base-url", envvar=BASE_URL_ENV,
                                 help="Public address of the service (https in production)."),
    database_url: str | None = typer.Option(
        None, "--database-url", envvar=DATABASE_URL_ENV, show_default=False,
        help="database.url: postgresql://user:password@host:5432/dbname (default: a SQLite "
             "file beside config.toml)."),
    admin_email: str | None = typer.Option(
        None, "--admin-email", envvar=ADMIN_EMAIL_ENV, show_default=False,
        help="Create the first administrator: a user with this address as name, the admin "
             "role, and a one-time link to enrol a passkey (printed; mailed if mail is set "
             "up). Kept as is when that user exists."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing config.toml."),
    as_json: bool = JsonOption,
) -> None:
    """Create a deployment: config.toml, the database, signing keys and default records.

    The defaults give a working service on http://localhost:8090 with passkey, password and
    combined sign-in flows. --base-url, --database-url and --admin-email can come from
    IDENTITYCTL_BASE_URL, IDENTITYCTL_DATABASE_URL and IDENTITYCTL_ADMIN_EMAIL (the container
    image's first start uses them). Example:

        identityctl init --dir /srv/identity --base-url https://id.example.com \\
            --admin-email ada@example.com
    """
    from identityctl.services.admin import bootstrap
    from identityctl.services.admin.bootstrap import open_store

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / DEFAULT_CONFIG_NAME
    if path.exists() and not force:
        raise Conflict(f"{path} exists; pass --force to overwrite it (the database is kept).",
                       code="already_initialized")
    bootstrap.write_private(path, bootstrap.render_config(base_url=base_url,
                                                         database_url=database_url))
    try:
        config = load_config(path)
        with console.status("Creating the database and keys..."):
            migrations = open_store(config, create=True)
            made = bootstrap.seed(config)
            admin = bootstrap.first_admin(config, admin_email) if admin_email else None
    except BaseException:
        # No config.toml without its deployment: a first start that failed (the database
        # not up yet) runs init again, administrator included, rather than serve half of it.
        path.unlink(missing_ok=True)
        raise
    if as_json:
        emit_json({"config": str(path), "database": config.database_shown,
                   "migrations": migrations, "created": made, "admin": admin})
        return
    console.print(f"[green]✓[/green] wrote {path}")
    console.print(f"[green]✓[/green] database {config.database_shown}")
    for item in made:
        console.print(f"[green]✓[/green] created {item}")
    if admin is not None:
        console.print(f"[green]✓[/green] created the administrator {admin['username']}; "
                      f"their link to enrol a passkey works once until "
                      f"{when(admin['expiresAt'])}:")
        console.print(admin["invite"], soft_wrap=True)
    elif admin_email:
        console.print(f"[dim]i the user {admin_email} exists already: kept as is[/dim]")
    console.print(f"\nNext: [bold]identityctl --config {path} serve[/bold]  "
                  f"(then open {config.base_url}/health)")
    if not admin_email:
        console.print(f"Your own account, allowed to let AI assistants administer this "
                      f"service: [bold]identityctl --config {path} user create --username YOU "
                      f"--role admin[/bold]")


@command(app, "serve")
def serve(
    host: str | None = typer.Option(None, envvar=HOST_ENV,
                                    help="Listen address (default: server.host)."),
    port: int | None = typer.Option(None, envvar=PORT_ENV,
                                    help="Listen port (default: server.port)."),
    threads: int | None = typer.Option(None, help="Worker threads (default: server.threads)."),
    workers: int | None = typer.Option(None, min=1, help="Processes sharing the port "
                                       "(default: server.workers, \"auto\": one per core); "
                                       "see docs/deployment.md."),
    pin_cores: bool | None = typer.Option(None, "--pin-cores/--no-pin-cores",
                                          help="Keep each process to one core, or not "
                                          "(default: server.pin_cores, \"auto\": when the "
                                          "processes cover the cores); see "
                                          "docs/deployment.md."),
) -> None:
    """Run the HTTP service (REST API, OAuth/OIDC, hosted sign-in UI, /mcp) under waitress.

    Stops cleanly on Ctrl-C or SIGTERM. Applies pending database migrations first.
    By default one process per core accepts on the port, each with --threads threads and
    kept to a core of its own (`--workers 1` for a single process, as when debugging, free
    to use every core unless --pin-cores).
    """
    config = Session.config()
    # Before anything imports prometheus_client (the server does): see below.
    workers, why = worker_count(workers or config.server.workers)
    cores = cores_for(workers, config.server.pin_cores if pin_cores is None else pin_cores)
    if workers > 1:
        _metrics_shared_by_workers()
    # PERF: no cyclic collections while the server's modules load and the store opens: they
    # make lasting objects, hardly any garbage, and collecting took ~0.1 s of every start.
    # The server collects and freezes what exists once its app is built (server/heap.py).
    gc.disable()
    from identityctl.server.runtime import serve as run_server
    from identityctl.services import audit
    from identityctl.services.admin.bootstrap import open_store, seed
    from identityctl.services.context import ServiceContext
    from identityctl.services.oauth.registration import remove_idle_clients

    open_store(config)
    seed(config)
    # security.audit_retention_days applies at every start (cron `identityctl audit purge`
    # for servers that run for months).
    audit.purge(config.security.audit_retention_days)
    # Self-registered clients unused for oauth.registration_idle_days go at every start.
    remove_idle_clients(ServiceContext.for_config(config))
    gc.enable()

    def ready(address: str) -> None:
        console.print(f"[green]identityctl {__version__}[/green] listening on {address} "
                      f"(public address {config.base_url}); Ctrl-C to stop")
        console.print(f"  processes: {workers} ({why}) x {listen['threads']} threads"
                      + (f", on cores {', '.join(map(str, cores))}" if cores else ""))
        console.print(f"  open:      {config.base_url}/  (what is running; try signing in)")
        console.print(f"  health:    {config.base_url}/health")
        if config.admin.enabled:
            console.print(f"  admin:     {config.base_url}/admin  (people with the admin role)")
        console.print(f"  discovery: {config.issuer}/.well-known/openid-configuration")

    listen = {"host": host or config.server.host, "port": port or config.server.port,
              "threads": threads or config.server.threads, "on_ready": ready}
    if workers > 1:
        from identityctl.server.workers import serve_workers

        serve_workers(config, workers=workers, cores=cores, **listen)
    else:
        run_server(config, core=cores[0] if cores else None, **listen)


def _metrics_shared_by_workers() -> None:
    """prometheus_client's multiprocess mode (identityctl/metrics.py): every worker writes
    its figures under one directory, so any worker's /metrics adds them all up. It must be
    set before anything imports prometheus_client; the directory goes when serve ends."""
    directory = tempfile.mkdtemp(prefix="identityctl-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory  # metrics.MULTIPROCESS_ENV
    atexit.register(shutil.rmtree, directory, ignore_errors=True)


@command(config_app, "check")
def config_check(as_json: bool = JsonOption) -> None:
    """Validate the configuration file, print the addresses it derives, and warn about
    what would keep passkeys from working (origins missing from passkey.allowed_origins)."""
    config = Session.config()
    summary = {"file": config.source, "base_url": config.base_url, "issuer": config.issuer,
               "hosted_ui": config.gate_url, "mcp": config.mcp_audience,
               "rp_id": config.passkey.rp_id, "database": config.database_shown}
    warnings, notes = _origin_findings(config)
    if as_json:
        emit_json({**summary, "warnings": warnings, "notes": notes})
        return
    for key, value in summary.items():
        console.print(f"[bold cyan]{key:10}[/bold cyan] {value}")
    for warning in warnings:
        console.print(f"[yellow]![/yellow] {warning}")
    for note in notes:
        console.print(f"[dim]i {note}[/dim]")
    console.print("[green]✓[/green] configuration is valid")


def _origin_findings(config: Config) -> tuple[list[str], list[str]]:
    """Warnings: the hosted pages' origins missing from passkey.allowed_origins (their
    passkey ceremonies would fail). Notes: applications' redirect URI origins missing from
    it (only needed when that application runs ceremonies on its own pages)."""
    from urllib.parse import urlsplit

    from identityctl.services import catalog
    from identityctl.services.admin.bootstrap import open_store, sqlite_file

    def origin(url: str) -> str:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}".lower()

    allowed = set(config.passkey.accepted_origins)  # written as browsers send them (config)
    warnings = [f"passkey.allowed_origins does not contain {origin(url)}, the origin of "
                f"{key}: passkeys cannot be used on the pages served there."
                for key, url in (("server.base_url", config.base_url),
                                 ("gate_client.url", config.gate_url))
                if origin(url) not in allowed]
    notes = _related_origin_notes(config)
    database = sqlite_file(config)
    if database is None or database.exists():
        open_store(config)
        for application in catalog.applications.list_applications():
            for uri in catalog.applications.oauth_config(application).get("redirectUris") or []:
                if uri.startswith(("http://", "https://")) and origin(uri) not in allowed:
                    notes.append(f"{application['name']}: add {origin(uri)} to "
                                 "passkey.allowed_origins if its own pages run passkey "
                                 "ceremonies (self-hosted sign-in).")
    return list(dict.fromkeys(warnings)), list(dict.fromkeys(notes))


def _related_origin_notes(config: Config) -> list[str]:
    """What each of passkey.related_origins needs before browsers let it use the rp_id's
    passkeys (WebAuthn L3 §5.11)."""
    from urllib.parse import urlsplit

    rp_id = config.passkey.rp_id
    well_known = f"https://{rp_id}/.well-known/webauthn"
    served_at = urlsplit(config.base_url).hostname
    notes = [f"passkey.related_origins: {origin} may use the passkeys of rp_id {rp_id!r} once "
             f"{well_known} lists it (this service answers that path with the list); its "
             f"pages call WebAuthn with rpId {rp_id!r}. Browsers that read the list: Chrome "
             f"and Edge 128 and later, Safari 18 and later; Firefox does not yet: there the "
             f"origin cannot use these passkeys." for origin in config.passkey.related_origins]
    if notes and served_at != rp_id:
        notes.append(f"Browsers fetch {well_known}, but this service is at {served_at}: serve "
                     f"that path from {rp_id}'s host (forward it to {config.base_url}"
                     f"/.well-known/webauthn), or no related origin works.")
    return notes


@command(db_app, "upgrade")
def db_upgrade(as_json: bool = JsonOption) -> None:
    """Apply pending schema migrations (safe to run on every deploy)."""
    from identityctl.services.admin.bootstrap import open_store

    applied = open_store(Session.config())
    done(f"applied {len(applied)} migration(s)" if applied else "schema is up to date",
         as_json=as_json, data={"applied": applied})


def _one_path(argument: Path | None, option: Path | None, name: str) -> Path:
    """The file given as the argument or as the option (one of them, once)."""
    if (argument is None) == (option is None):
        raise BadRequest(f"Give the file once: as an argument or with {name}.",
                         code="conflicting_options")
    return argument or option  # type: ignore[return-value]


@command(db_app, "backup")
def db_backup(destination: Path = typer.Argument(..., help="File to write the backup to."),
              as_json: bool = JsonOption) -> None:
    """The same as `identityctl backup FILE`."""
    backup(file=destination, to=None, as_json=as_json)


@command(app, "backup")
def backup(file: Path | None = typer.Argument(None, metavar="FILE",
                                              help="The backup to write (a .tar.gz, mode "
                                                   "0600)."),
           to: Path | None = typer.Option(None, "--to", metavar="FILE",
                                          help="The same as FILE."),
           as_json: bool = JsonOption) -> None:
    """Back up a SQLite deployment while it serves: a consistent copy of the database
    (SQLite's online backup API) with the config file and a manifest, in one file.

        identityctl backup /backups/identity-$(date +%F).tar.gz

    For PostgreSQL use pg_dump (docs/deployment.md, "Backups"), then `identityctl db check`
    after a restore.
    """
    from identityctl.services.admin import backups

    to = _one_path(file, to, "--to")
    config = Session.connected()
    with console.status("Copying the database..."):
        made = backups.backup(config, to)
    done(f"backed up {made['source']} to {to} in {made['seconds']}s (schema "
         f"{made['schemaVersion']})", as_json=as_json, data=made)


@command(app, "restore")
def restore(file: Path | None = typer.Argument(None, metavar="FILE",
                                              help="A backup made by `identityctl backup`."),
            source: Path | None = typer.Option(None, "--from", metavar="FILE",
                                               help="The same as FILE."),
            with_config: bool = typer.Option(False, "--with-config",
                                              help="Also put back the backup's config.toml "
                                                   "(mode 0600; refused unless it loads and "
                                                   "names this deployment's database)."),
            yes: bool = typer.Option(False, "--yes", help="Do not ask first."),
            as_json: bool = JsonOption) -> None:
    """Restore a backup into this deployment, which must be stopped: its database is
    replaced, after the archive (regular files a backup holds, nothing else) and the
    database copy (SQLite's integrity check) were checked.

        systemctl stop identityctl
        identityctl restore /backups/identity-2026-11-25.tar.gz
        identityctl db check && systemctl start identityctl
    """
    from identityctl.services.admin import backups

    source = _one_path(file, source, "--from")
    config = Session.config()
    if not yes:
        typer.confirm("Replace this deployment's database with the backup's?", abort=True,
                      err=True)
    restored = backups.restore(config, source, with_config=with_config)
    done(f"restored {source} into {restored['restoredTo']} (made by identityctl "
         f"{restored['identityctl']}); run `identityctl db check`", as_json=as_json,
         data=restored)


@command(db_app, "check")
def db_check(as_json: bool = JsonOption) -> None:
    """Check that the database is complete: SQLite's integrity check (SQLite), every table
    of the schema at the latest migration, a signing key. Exits 1 on any problem; after a
    restore (from a backup or pg_restore), before starting the service."""
    from identityctl.services.admin import backups

    Session.connected()
    result = backups.check_database(Session.config())
    summary = result.summary
    if as_json:
        emit_json({"ok": not result.problems, "problems": result.problems,
                   "summary": summary, "rows": result.counts})
    else:
        for problem in result.problems:
            console.print(f"[red]problem[/red] {problem}")
        if not result.problems:
            console.print("[green]ok[/green]: " + ", ".join(
                f"{count} {what}" for what, count in summary.items()))
    if result.problems:
        raise typer.Exit(1)


@command(keys_app, "list")
def keys_list(as_json: bool = JsonOption) -> None:
    """Signing keys published in the JWKS (active first)."""
    from identityctl.services.admin import keys

    Session.connected()
    rows = [{"kid": k.kid, "algorithm": k.algorithm, "status": k.status,
             "created": time.strftime("%Y-%m-%d %H:%M", time.gmtime(k.created_at))}
            for k in keys.published_keys()]
    show_table(rows, [("kid", "Key id"), ("algorithm", "Alg"), ("status", "Status"),
                      ("created", "Created (UTC)")], title="Signing keys", as_json=as_json)


@command(keys_app, "rotate")
def keys_rotate(as_json: bool = JsonOption) -> None:
    """Start signing with a new key; the old one stays in the JWKS to verify live tokens.

    Previous keys older than the longest token lifetime are retired at the same time.
    """
    from identityctl.services.admin import keys

    kid, retired = keys.rotate(Session.connected())
    done(f"new signing key {kid}; retired {retired} old key(s)", as_json=as_json,
         data={"kid": kid, "retired": retired})


@command(app, "token")
def token(
    scope: str = typer.Option("system", help="Space-separated scopes to grant."),
    ttl: int = typer.Option(3600, help="Lifetime in seconds."),
    audience: list[str] | None = typer.Option(
        None, "--audience", help="Audience(s); default: the MCP URL and the issuer."),
    subject: str = typer.Option("admin", help="Subject (sub claim) of the token."),
) -> None:
    """Mint an admin access token locally (for /mcp and passkey enrolment by an admin).

    Prints only the token, so it can be captured:

        export IDENTITYCTL_TOKEN=$(identityctl token --scope system)
    """
    from identityctl.security.tokens import ACCESS_TOKEN_TYP
    from identityctl.services.tokens import TokenService

    if ttl <= 0:
        raise BadRequest("--ttl must be positive.", code="invalid_ttl")
    config = Session.connected()
    claims = {"sub": subject, "aud": audience or [config.mcp_audience, config.issuer],
              "scope": scope, "client_id": "identityctl-cli"}
    typer.echo(TokenService(config.issuer).sign(claims, typ=ACCESS_TOKEN_TYP, ttl=ttl))


def run() -> None:
    """Console-script entry point."""
    app()
