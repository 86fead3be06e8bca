"""First-run setup: the config file, signing keys and the default records."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from identityctl.config import Config
from identityctl.errors import Conflict, NotFound
from identityctl.flow.definition import validate_flow
from identityctl.oauth.discovery import DEVICE_PATH
from identityctl.security.keys import generate_signing_key
from identityctl.services import catalog as catalog_service
from identityctl.services.accounts import account
from identityctl.services.admin.console import ADMIN_CLIENT_ID
from identityctl.services.directory import roles as roles_service
from identityctl.services.directory import users as directory_service
from identityctl.services.origin import RequestOrigin
from identityctl.store import catalog, db, directory, keys, migrations, roles
from identityctl.store.startup import startup_lock

DEFAULT_THEME = {
    "colorSchemes": {
        "light": {"primary": "#3451b2", "onPrimary": "#ffffff", "background": "#f6f7fb",
                  "surface": "#ffffff", "text": "#1b1f2a", "muted": "#5b6275",
                  "error": "#b3261e", "border": "#d5d9e3"},
        "dark": {"primary": "#8ea2ff", "onPrimary": "#0d1330", "background": "#0f1115",
                 "surface": "#1a1d24", "text": "#e8eaf0", "muted": "#a3a9b8",
                 "error": "#f2b8b5", "border": "#2c313c"},
    },
    "typography": {"fontFamily": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
                   "fontSize": "16px", "headingWeight": "650", "borderRadius": "10px"},
}
PERSON_SCHEMA = {
    "email": {"type": "string", "required": False, "unique": True},
    "given_name": {"type": "string"},
    "family_name": {"type": "string"},
}

#: Who the audit log names for what initialisation (and each release's upgrade) made.
INIT = RequestOrigin(actor="init")


def render_config(*, base_url: str, database_url: str | None = None) -> str:
    """The sample configuration, adjusted to serve at ``base_url`` (and to keep its data in
    ``database_url`` instead of the SQLite file beside it)."""
    text = resources.files("identityctl").joinpath("sample-config.toml").read_text()
    parts = urlsplit(base_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    replacements = {
        'base_url = "http://localhost:8090"': f'base_url = "{base_url.rstrip("/")}"',
        'allowed_origins = ["http://localhost:8090"]': f'allowed_origins = ["{origin}"]',
        'rp_id = "localhost"': f'rp_id = "{parts.hostname}"',
        "port = 8090": f"port = {port if parts.hostname in ('localhost', '127.0.0.1') else 8090}",
    }
    if database_url:
        replacements['url = "sqlite:///identityctl.db"'] = f"url = {json.dumps(database_url)}"
    for old, new in replacements.items():
        text = text.replace(old, new, 1)
    return text


def first_admin(config: Config, email: str) -> dict[str, Any] | None:
    """The administrator a new deployment starts with (`identityctl init --admin-email`): a
    user named by the address, which counts as verified (the operator vouches for it), who
    holds the admin role, with a one-time link to enrol a first passkey (mailed too when the
    deployment sends mail). None when that user exists already: another instance on the
    same database made it first."""
    from identityctl.services.accounts import recovery
    from identityctl.services.context import ServiceContext

    if directory.find_user(email) is not None:
        return None
    # All or nothing: a user left without the role or the link would be "kept as is" by the
    # next try (the services' own transactions join this one).
    with db.transaction():
        user = directory_service.create_user(username=email, attributes={"email": email},
                                             origin=INIT)
        roles_service.grant_role(user.id, roles_service.ADMIN_ROLE, origin=INIT)
        recovery.confirm_email(user.id, origin=INIT)
        invited = recovery.invite(ServiceContext.for_config(config), user.id,
                                  send_email=config.email.enabled, origin=INIT)
    return {"id": user.id, "username": user.username, "invite": invited["url"],
            "expiresAt": invited["expiresAt"], "emailedTo": invited["emailedTo"]}


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it may name secrets)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def open_store(config: Config, *, create: bool = False) -> list[str]:
    """Connect to the configured database and apply pending migrations.

    A SQLite file that does not exist is made only with ``create`` (``identityctl init``):
    anything else refuses it, so a typo in ``database.url`` is not a new, empty deployment.
    """
    database = config.database
    sqlite_path = sqlite_file(config)
    if sqlite_path is not None and not create and not sqlite_path.exists():
        raise NotFound(f"The database {sqlite_path} does not exist (database.url in "
                       f"{config.source or 'the configuration'}). Fix the path, or make a "
                       "deployment with `identityctl init`.", code="database_missing")
    db.connect(config.database_url, busy_timeout=database.busy_timeout,
               statement_timeout=database.statement_timeout,
               lock_timeout=database.lock_timeout, connect_timeout=database.connect_timeout,
               pool_size=database.pool_size, pool_idle_timeout=database.pool_idle_timeout,
               pool_timeout=database.pool_timeout)
    return migrations.upgrade()


def sqlite_file(config: Config) -> Path | None:
    """The SQLite file of the deployment (None for PostgreSQL or an in-memory database)."""
    prefix = "sqlite:///"
    url = config.database_url
    if not url.startswith(prefix) or url[len(prefix):] in ("", ":memory:"):
        return None
    return Path(url[len(prefix):])


def rotate_signing_key(config: Config) -> str:
    """A new active signing key; the previous one keeps verifying until its tokens expire."""
    key = generate_signing_key(config.oauth.signing_alg)
    keys.add_active_key(kid=key.kid, algorithm=key.algorithm, private_pem=key.private_pem,
                        public_jwk=key.public_jwk)
    return key.kid


#: Stands for this deployment's passkey.rp_id in the shipped flow files.
RP_ID_PLACEHOLDER = "{{passkey.rp_id}}"


def default_flow_documents(rp_id: str) -> list[dict[str, Any]]:
    """The flows shipped in identityctl/flow/defaults (documented in docs/flows.md), with
    their passkey steps bound to ``rp_id``."""
    folder = resources.files("identityctl.flow").joinpath("defaults")
    return [json.loads(entry.read_text().replace(RP_ID_PLACEHOLDER, rp_id))
            for entry in sorted(folder.iterdir(), key=lambda e: e.name)
            if entry.name.endswith(".json")]


def seed(config: Config) -> list[str]:
    """Create whatever default record is missing; returns what was created. Idempotent.

    Safe when any number of instances start at once on one database: the steps run under
    the database-wide start-up lock (``store.startup.startup_lock``, the lock migrations
    take too), so whoever comes second finds each record made and creates nothing; exactly
    one signing key is made. A record created meanwhile by a writer that does not take the
    lock (an admin, an older release) counts as there: its unique-violation is no error.
    """
    made: list[str] = []
    with startup_lock():
        if not keys.published_keys():
            made.append(f"signing key {rotate_signing_key(config)} ({config.oauth.signing_alg})")
        if _create_if_absent(
                lambda: directory.find_ou(directory_service.DEFAULT_OU),
                lambda: directory_service.create_ou(
                    handle=directory_service.DEFAULT_OU, name="Default",
                    description="Default organization unit", origin=INIT),
                exists_code="ou_exists"):
            made.append("organization unit 'default'")
        if _create_if_absent(
                lambda: directory.find_user_type(directory_service.DEFAULT_USER_TYPE),
                lambda: directory_service.create_user_type(
                    name=directory_service.DEFAULT_USER_TYPE, allow_self_registration=True,
                    schema=PERSON_SCHEMA, origin=INIT),
                exists_code="user_type_exists"):
            made.append("user type 'person'")
        if _create_if_absent(
                lambda: roles.find_role(roles_service.ADMIN_ROLE),
                lambda: roles_service.create_role(
                    name=roles_service.ADMIN_ROLE, scopes=_admin_scopes(config),
                    description="Administers identityctl: signs in to the admin console "
                                f"('{config.admin.required_scope}') and may grant an MCP "
                                f"client the '{config.mcp.required_scope}' scope.",
                    origin=INIT),
                exists_code="role_exists"):
            made.append(f"role '{roles_service.ADMIN_ROLE}' "
                        f"({' '.join(_admin_scopes(config))})")
        if _create_if_absent(
                lambda: catalog.find_theme("default"),
                lambda: catalog_service.themes.create_theme(
                    handle="default", display_name="Default",
                    description="Clean light/dark theme", theme=DEFAULT_THEME, origin=INIT),
                exists_code="theme_exists"):
            made.append("theme 'default'")
        for document in default_flow_documents(config.passkey.rp_id):
            flow = validate_flow(document)
            if _create_if_absent(
                    lambda flow=flow: catalog.find_flow_by_handle(flow["handle"],
                                                                  flow["flowType"]),
                    lambda flow=flow: catalog_service.flows.create_flow(flow, origin=INIT),
                    exists_code="flow_exists"):
                made.append(f"flow '{flow['handle']}' ({flow['flowType']})")
        if _create_if_absent(
                lambda: catalog.find_application_by_client_id(account.ACCOUNT_CLIENT_ID),
                lambda: catalog_service.applications.create_application(
                    account_application(config), origin=INIT),
                exists_code="application_exists"):
            made.append(f"application '{account.ACCOUNT_CLIENT_ID}' (the account page)")
        elif _add_release_redirects(config):
            made.append(f"application '{account.ACCOUNT_CLIENT_ID}' (its new redirect URIs)")
        if _create_if_absent(
                lambda: catalog.find_application_by_client_id(ADMIN_CLIENT_ID),
                lambda: catalog_service.applications.create_application(
                    admin_application(config), origin=INIT),
                exists_code="application_exists"):
            made.append(f"application '{ADMIN_CLIENT_ID}' (the admin console)")
            if _add_admin_scope(config):
                made.append(f"role '{roles_service.ADMIN_ROLE}' (scope "
                            f"'{config.admin.required_scope}')")
    return made


def _admin_scopes(config: Config) -> list[str]:
    return list(dict.fromkeys([config.admin.required_scope, config.mcp.required_scope]))


def _add_admin_scope(config: Config) -> bool:
    """A deployment older than the admin console: its role ``admin`` gains the console's
    scope, once (with the console's client), so an admin who later takes it away keeps it
    so. True when it changed."""
    role = roles.find_role(roles_service.ADMIN_ROLE)
    if role is None or config.admin.required_scope in role.scopes:
        return False
    roles_service.update_role(role.id, scopes=[*role.scopes, config.admin.required_scope],
                              origin=INIT)
    return True


def _add_release_redirects(config: Config) -> bool:
    """The account page's client is built in: it gains the redirect URIs of this release
    (an older deployment's lacks /device); whatever an admin changed stays. True when it
    changed."""
    current = catalog.find_application_by_client_id(account.ACCOUNT_CLIENT_ID)
    if current is None:
        return False
    settings = catalog_service.applications.oauth_config(current)
    wanted = catalog_service.applications.oauth_config(account_application(config))["redirectUris"]
    missing = [uri for uri in wanted if uri not in settings["redirectUris"]]
    if not missing:
        return False
    catalog_service.applications.update_application({**current, "inboundAuthConfig": [{
        "type": "oauth2", "config": {**settings,
                                     "redirectUris": [*settings["redirectUris"], *missing]}}]},
        origin=INIT)
    return True


def account_application(config: Config) -> dict[str, Any]:
    """The account page's client (``/account``): public, PKCE, no refresh token (a reload
    signs in again through the browser's session)."""
    return {"name": "Your account", "template": "SPA",
            "description": "identityctl's own account page (built in).",
            "inboundAuthConfig": [{"type": "oauth2", "config": {
                "clientId": account.ACCOUNT_CLIENT_ID, "publicClient": True,
                "tokenEndpointAuthMethod": "none", "grantTypes": ["authorization_code"],
                "redirectUris": [config.base_url + "/account", config.base_url + DEVICE_PATH],
                "scopes": ["openid", "profile", "email", account.ACCOUNT_SCOPE]}}]}


def admin_application(config: Config) -> dict[str, Any]:
    """The admin console's client (``/admin``): public, PKCE, no refresh token (a reload signs
    in again through the browser's session); its tokens are for the admin API
    (``resource={admin_audience}``)."""
    return {"name": "Admin console", "template": "SPA",
            "description": "identityctl's own admin console (built in).",
            "inboundAuthConfig": [{"type": "oauth2", "config": {
                "clientId": ADMIN_CLIENT_ID, "publicClient": True,
                "tokenEndpointAuthMethod": "none", "grantTypes": ["authorization_code"],
                "redirectUris": [config.base_url + "/admin"],
                "scopes": ["openid", "profile", config.admin.required_scope]}}]}


def _create_if_absent(find: Callable[[], object], create: Callable[[], object], *,
                      exists_code: str) -> bool:
    """Create a default record unless ``find`` finds it; True when this call created it.

    A Conflict with ``exists_code`` (the unique-violation of a concurrent create of the same
    record) means it is there; any other Conflict is a real error and propagates.
    """
    if find() is not None:
        return False
    try:
        with db.savepoint():
            create()
    except Conflict as error:
        if error.code != exists_code:
            raise
        return False
    return True
