"""Forward-only schema migrations, recorded in the ``schema_version`` table.

Every pending migration runs in one transaction (DDL included: SQLite and PostgreSQL both
roll it back), so a migration that refuses leaves the database as it was. Migration 1
creates the tables of models.py as they are now; a later change to the schema appends a
function that alters existing databases, guarded so a fresh database that already has the
change is left alone. Migrations after 1 spell out their columns and indexes in SQL rather
than reading models.py, which keeps moving: each must do the same thing on the day it runs
as on the day it was written. (Not ``playhouse.migrate``: on SQLite it makes a column NOT
NULL by copying the table, and dropping the old ``user`` table would cascade-delete every
row that refers to it.)
"""

from __future__ import annotations

import json
from collections.abc import Callable

import peewee

from identityctl.errors import Conflict
from identityctl.security.usernames import username_key
from identityctl.store import db
from identityctl.store.models import (
    ALL_MODELS,
    Application,
    AttestationMetadata,
    AuditEvent,
    BrowserSession,
    ClientRegistration,
    DeviceAuthorization,
    EmailCode,
    FederatedIdentity,
    Grant,
    IdentityProvider,
    OutboxMessage,
    ProposedChange,
    PushedRequest,
    RecoveryCode,
    ResourceServer,
    Role,
    SchemaVersion,
    SessionGrant,
    SigningKey,
    SpentIdentifier,
    UserRole,
    VerifiedEmail,
    WebhookSubscription,
)
from identityctl.store.startup import lock_in_transaction


def _create_tables() -> None:
    db.database.create_tables(ALL_MODELS, safe=True)


def _index_open_ceremony_sessions() -> None:
    # The index as it was then; migration 3 replaces it.
    db.database.execute_sql(
        'CREATE INDEX IF NOT EXISTS "ceremony_session_user_id_ceremony_superseded" '
        'ON "ceremony_session" ("user_id", "ceremony", "superseded")')


def _columns(table: str) -> set[str]:
    return {column.name for column in db.database.get_columns(table)}


def _key_usernames_and_scope_ceremony_sessions() -> None:
    """Usernames unique by :func:`username_key`; ceremony sessions gain ``scope``."""
    if "username_key" not in _columns("user"):
        # Refuse before changing anything: two users whose usernames are one by the key.
        table = peewee.Table("user", ("id", "username", "username_key")).bind(db.database)
        users = list(table.select(table.id, table.username)
                     .order_by(table.username, table.id).tuples())
        keyed: dict[str, list[tuple[str, str]]] = {}
        for user_id, username in users:
            keyed.setdefault(username_key(username), []).append((user_id, username))
        collisions = [same for same in keyed.values() if len(same) > 1]
        if collisions:
            raise _usernames_collide(collisions)
        # NOT NULL needs a default for the rows already there (SQLite keeps it; PostgreSQL
        # drops it below, as a fresh database has none: every insert sets the key).
        db.database.execute_sql('ALTER TABLE "user" ADD COLUMN "username_key" VARCHAR(255) '
                                "NOT NULL DEFAULT ''")
        for user_id, username in users:
            table.update(username_key=username_key(username)).where(
                table.id == user_id).execute()
        if not db.is_sqlite():
            db.database.execute_sql('ALTER TABLE "user" ALTER COLUMN "username_key" '
                                    "DROP DEFAULT")
    db.database.execute_sql('CREATE UNIQUE INDEX IF NOT EXISTS "user_username_key" '
                            'ON "user" ("username_key")')
    if "scope" not in _columns("ceremony_session"):
        db.database.execute_sql('ALTER TABLE "ceremony_session" ADD COLUMN "scope" '
                                "VARCHAR(255) NOT NULL DEFAULT ''")
    db.database.execute_sql('DROP INDEX IF EXISTS "ceremony_session_user_id_ceremony_superseded"')
    db.database.execute_sql(
        'CREATE INDEX IF NOT EXISTS "ceremony_session_user_id_ceremony_scope_superseded" '
        'ON "ceremony_session" ("user_id", "ceremony", "scope", "superseded")')


def _usernames_collide(collisions: list[list[tuple[str, str]]]) -> Conflict:
    """The refusal of migration 3 when existing users' usernames are one by the key."""
    groups = "; ".join(", ".join(f"'{username}' (id {user_id})" for user_id, username in same)
                       for same in collisions)
    return Conflict(
        "Schema migration 3 makes usernames unique without regard to case and Unicode form "
        f"(RFC 8265), and these users' usernames are the same by that rule: {groups}. "
        "Nothing was changed. Rename or delete all but one user of each group, then upgrade "
        "again: identityctl has no command that renames a user and every command applies "
        "this migration first, so rename in the database (UPDATE \"user\" SET username = "
        "'NEW-NAME' WHERE id = 'ID'; that user then signs in as NEW-NAME) or delete with the "
        "identityctl release you are upgrading from (identityctl user delete ID --yes).",
        code="usernames_collide",
        message="Existing usernames differ only in case or Unicode form.")


def _create_service_secrets() -> None:
    db.database.execute_sql(
        'CREATE TABLE IF NOT EXISTS "service_secret" ("name" VARCHAR(255) NOT NULL PRIMARY KEY, '
        '"value" TEXT NOT NULL, "created_at" DOUBLE PRECISION NOT NULL)')


def _drop_user_locked_until() -> None:
    # Never set by any release (an account is locked by its status alone); a database made
    # by migration 1 of this release never had it.
    if "locked_until" in _columns("user"):
        db.database.execute_sql('ALTER TABLE "user" DROP COLUMN "locked_until"')


def _create_roles() -> None:
    db.database.create_tables([Role, UserRole], safe=True)


def _create_grants() -> None:
    db.database.create_tables([Grant], safe=True)


def _create_resource_servers() -> None:
    db.database.create_tables([ResourceServer], safe=True)


def _create_client_registrations() -> None:
    db.database.create_tables([ClientRegistration], safe=True)


def _create_sessions_and_outbox() -> None:
    db.database.create_tables([BrowserSession, SessionGrant, OutboxMessage], safe=True)


def _create_recovery() -> None:
    db.database.create_tables([VerifiedEmail, RecoveryCode], safe=True)
    OutboxMessage._schema.create_indexes(safe=True)  # (kind, …), (target, …) joined them


def _create_webhooks() -> None:
    db.database.create_tables([WebhookSubscription], safe=True)


def _create_identity_providers() -> None:
    db.database.create_tables([IdentityProvider, FederatedIdentity], safe=True)


def _audit_request_ids() -> None:
    table = AuditEvent._meta.table_name
    if "request_id" not in _columns(table):  # a database made by migration 1 of now has it
        db.database.execute_sql(f'ALTER TABLE "{table}" ADD COLUMN "request_id" '
                                "VARCHAR(255) NOT NULL DEFAULT ''")


def _create_spent_identifiers_and_pushed_requests() -> None:
    db.database.create_tables([SpentIdentifier, PushedRequest], safe=True)


def _create_device_authorizations() -> None:
    db.database.create_tables([DeviceAuthorization], safe=True)


def _session_browsers_and_email_codes() -> None:
    table = BrowserSession._meta.table_name
    if "user_agent" not in _columns(table):  # a database made by migration 1 of now has it
        db.database.execute_sql(f'ALTER TABLE "{table}" ADD COLUMN "user_agent" '
                                "TEXT NOT NULL DEFAULT ''")
    db.database.create_tables([EmailCode], safe=True)


def _user_email_keys() -> None:
    """``user.email_key``: the ``email`` attribute in lower case, in an index (the admin
    console finds people by a prefix of it). On PostgreSQL both keys compare bytewise
    (COLLATE "C", as SQLite's BINARY does): a prefix is found as a range of its index
    (store/directory.users_page), and under a language's collation that range holds other
    keys and misses some that start with it (ICU puts "éa" between "e" and "f" and after
    "ê"). Equality, and so the uniqueness of usernames, is the same under both."""
    if "email_key" not in _columns("user"):  # a database made by migration 1 of now has it
        db.database.execute_sql('ALTER TABLE "user" ADD COLUMN "email_key" VARCHAR(255)')
        table = peewee.Table("user", ("id", "attributes")).bind(db.database)
        for user_id, attributes in list(table.select(table.id, table.attributes).tuples()):
            address = json.loads(attributes or "{}").get("email")
            if isinstance(address, str) and address.strip():
                table.update(email_key=address.strip().lower()).where(
                    table.id == user_id).execute()
    db.database.execute_sql('CREATE INDEX IF NOT EXISTS "user_email_key" '
                            'ON "user" ("email_key")')
    if not db.is_sqlite():  # rebuilds the two indexes in the new order
        for column in ("username_key", "email_key"):
            db.database.execute_sql(f'ALTER TABLE "user" ALTER COLUMN "{column}" '
                                    'TYPE VARCHAR(255) COLLATE "C"')


#: The audit log's page indexes: (at, id) alone and behind each filter a page may have.
_AUDIT_PAGE_INDEXES = {"audit_event_at_id": ("at", "id"),
                       "audit_event_actor_at_id": ("actor", "at", "id"),
                       "audit_event_user_id_at_id": ("user_id", "at", "id"),
                       "audit_event_event_at_id": ("event", "at", "id")}


def _index_audit_pages() -> None:
    table = AuditEvent._meta.table_name
    for name, columns in _AUDIT_PAGE_INDEXES.items():
        listed = ", ".join(f'"{column}"' for column in columns)
        db.database.execute_sql(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ({listed})')
    # Each single-column index is the start of one above: it only cost every insert.
    for column in ("at", "event", "user_id"):
        db.database.execute_sql(f'DROP INDEX IF EXISTS "{table}_{column}"')


def _create_proposed_changes() -> None:
    db.database.create_tables([ProposedChange], safe=True)


#: One row: the version of the applications (store/catalog.catalog_version).
CATALOG_VERSION_TABLE = "catalog_version"


def _application_passkey_upgrade() -> None:
    table = Application._meta.table_name
    if "passkey_upgrade" not in _columns(table):  # a database made by migration 1 of now has it
        db.database.execute_sql(f'ALTER TABLE "{table}" ADD COLUMN "passkey_upgrade" BOOLEAN '
                                f"NOT NULL DEFAULT {'1' if db.is_sqlite() else 'TRUE'}")


def _drop_outbox_target_index() -> None:
    # Code mails are counted in the throttle table: no query reads messages by address, and
    # the index only cost every message queued.
    db.database.execute_sql('DROP INDEX IF EXISTS "outbox_message_target_created_at"')


def _version_the_catalog() -> None:
    """A number that every change to an application raises, in the change's own transaction:
    triggers on the table, so no writer can leave it out (crud, cascades, a hand-run
    statement). On PostgreSQL the trigger runs before each statement, so every writer of
    applications takes the version's row lock first and two of them cannot deadlock."""
    execute = db.database.execute_sql
    execute(f'CREATE TABLE IF NOT EXISTS "{CATALOG_VERSION_TABLE}" '
            '("id" INTEGER NOT NULL PRIMARY KEY, "version" BIGINT NOT NULL)')
    execute(f'INSERT INTO "{CATALOG_VERSION_TABLE}" ("id", "version") SELECT 1, 0 '
            f'WHERE NOT EXISTS (SELECT 1 FROM "{CATALOG_VERSION_TABLE}")')
    raise_version = f'UPDATE "{CATALOG_VERSION_TABLE}" SET "version" = "version" + 1'
    if db.is_sqlite():
        for change in ("insert", "update", "delete"):
            execute(f'CREATE TRIGGER IF NOT EXISTS "application_{change}_versions_catalog" '
                    f'AFTER {change.upper()} ON "application" BEGIN {raise_version}; END')
        return
    execute('CREATE OR REPLACE FUNCTION "raise_catalog_version"() RETURNS trigger '
            f'LANGUAGE plpgsql AS $$ BEGIN {raise_version}; RETURN NULL; END $$')
    execute('DROP TRIGGER IF EXISTS "application_versions_catalog" ON "application"')
    execute('CREATE TRIGGER "application_versions_catalog" BEFORE INSERT OR UPDATE OR DELETE '
            'OR TRUNCATE ON "application" FOR EACH STATEMENT '
            'EXECUTE PROCEDURE "raise_catalog_version"()')


def _create_attestation_metadata() -> None:
    db.database.create_tables([AttestationMetadata], safe=True)
def _totp_and_passkeys_only() -> None:
    for table in ("organization_unit", "application"):
        if "passkeys_only" not in _columns(table):  # a database made by migration 1 has it
            db.database.execute_sql(f'ALTER TABLE "{table}" ADD COLUMN "passkeys_only" '
                                    "BOOLEAN NOT NULL DEFAULT FALSE")
    db.database.execute_sql(
        'CREATE TABLE IF NOT EXISTS "totp_secret" ("user_id" VARCHAR(255) NOT NULL PRIMARY KEY '
        'REFERENCES "user" ("id") ON DELETE CASCADE, "sealed_secret" TEXT NOT NULL, '
        '"confirmed" BOOLEAN NOT NULL DEFAULT FALSE, "last_step" BIGINT, '
        '"created_at" DOUBLE PRECISION NOT NULL)')


MIGRATIONS: list[tuple[int, str, Callable[[], None]]] = [
    (1, "create the initial schema", _create_tables),
    (2, "index the open ceremony sessions of a user", _index_open_ceremony_sessions),
    (3, "unique usernames without regard to case and Unicode form (username_key); "
        "ceremony sessions gain a scope", _key_usernames_and_scope_ceremony_sessions),
    (4, "a table for the deployment's secrets (decoy credentials)", _create_service_secrets),
    (5, "drop user.locked_until (never used: an account's status says it all)",
     _drop_user_locked_until),
    (6, "roles (scopes users hold) and who holds them", _create_roles),
    (7, "grants: what a person let each client have", _create_grants),
    (8, "resource servers: the team's APIs tokens may be issued for", _create_resource_servers),
    (9, "registration access tokens of self-registered clients (RFC 7592)",
     _create_client_registrations),
    (10, "browser sessions (single sign-on), the clients signed in through them, and an "
         "outbox of deliveries", _create_sessions_and_outbox),
    (11, "verified e-mail addresses and recovery codes (self-service recovery); the "
         "outbox is read newest first by kind, and by address",
     _create_recovery),
    (12, "upstream identity providers and the accounts linked through them",
     _create_identity_providers),
    (13, "webhook subscriptions (audit events to HTTPS endpoints)", _create_webhooks),
    (14, "audit events name the request that caused them", _audit_request_ids),
    (15, "one-time identifiers seen (client assertions, DPoP proofs) and pushed "
         "authorization requests (RFC 9126)", _create_spent_identifiers_and_pushed_requests),
    (16, "device authorizations (RFC 8628)", _create_device_authorizations),
    (17, "browser sessions remember the browser they began in (user agent); codes the "
         "account page e-mails to confirm an address", _session_browsers_and_email_codes),
    (18, "users are found by a prefix of their e-mail address (admin console)",
     _user_email_keys),
    (19, "the audit log is paged by time within an actor, a user or an event "
         "(admin API)", _index_audit_pages),
    (20, "changes proposed over MCP, waiting for a person's passkey approval",
     _create_proposed_changes),
    (21, "a version of the applications that every change to one raises (per-process caches "
         "of clients)", _version_the_catalog),
    (22, "the FIDO metadata (MDS3) that passkey registrations are checked against",
     _create_attestation_metadata),
    (23, "authenticator apps (TOTP) of people who sign in with a password; organization "
         "units and applications may allow passkeys only", _totp_and_passkeys_only),
    (24, "an application may turn off the automatic upgrade to a passkey",
     _application_passkey_upgrade),
    (25, "no index of outbox messages by address (code mails are counted apart)",
     _drop_outbox_target_index),
]

LATEST_VERSION = MIGRATIONS[-1][0]


def current_version() -> int:
    if not db.database.table_exists(SchemaVersion._meta.table_name):
        return 0
    row = SchemaVersion.select().order_by(SchemaVersion.version.desc()).first()
    return row.version if row else 0


def upgrade() -> list[str]:
    """Apply every pending migration; returns what was applied (empty when up to date)."""
    applied = []
    with db.transaction():
        # Two instances starting at once on one PostgreSQL must not both migrate: the
        # start-up lock (store/startup.py), so migrating and seeding take turns alike.
        lock_in_transaction()
        version = current_version()
        for number, description, apply in MIGRATIONS:
            if number > version:
                apply()
                SchemaVersion.create(version=number)
                applied.append(f"{number}: {description}")
    return applied


#: The table whose rows sign and check every token.
SIGNING_KEYS = SigningKey._meta.table_name


def table_counts() -> dict[str, int | None]:
    """Rows in every table of the schema (None: the table is missing)."""
    return {model._meta.table_name: model.select().count() if model.table_exists() else None
            for model in ALL_MODELS}
