"""Peewee models: the schema of the current version (see migrations.py for how it evolves).

Times are UNIX epoch seconds (float): the same on SQLite and PostgreSQL, no time zones.
Secrets that grant access (session tokens, codes, refresh tokens) are stored as SHA-256
hashes, never in the clear.
"""

from __future__ import annotations

import json
import os
import time

import peewee

from identityctl.store.connection import database


def new_id() -> str:
    """A random (version 4) UUID as text, as ``str(uuid.uuid4())`` gives it.

    Formatted from 16 random bytes directly: ids are minted on hot paths (token ids, grant
    ids), and building a ``uuid.UUID`` first costs twice as much.
    """
    digits = ((int.from_bytes(os.urandom(16)) & _UUID4_KEEP) | _UUID4_SET).to_bytes(16).hex()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


#: RFC 9562 §5.4: version 4 in bits 48-51, variant 0b10 in bits 64-65.
_UUID4_KEEP = ~((0xF << 76) | (0x3 << 62)) & (2**128 - 1)
_UUID4_SET = (0x4 << 76) | (0x2 << 62)


def now() -> float:
    return time.time()


#: Compact JSON text; one encoder made once (``json.dumps`` with options makes one per call).
_compact_json = json.JSONEncoder(separators=(",", ":")).encode


class JSONField(peewee.TextField):
    """JSON document stored as text (portable between SQLite and PostgreSQL)."""

    def db_value(self, value: object) -> str | None:
        return None if value is None else _compact_json(value)

    def python_value(self, value: str | None) -> object:
        return None if value is None else json.loads(value)


class BaseModel(peewee.Model):
    class Meta:
        database = database
        legacy_table_names = False


class SchemaVersion(BaseModel):
    version = peewee.IntegerField()
    applied_at = peewee.DoubleField(default=now)


class OrganizationUnit(BaseModel):
    id = peewee.CharField(primary_key=True, default=new_id)
    handle = peewee.CharField(unique=True)
    name = peewee.CharField()
    description = peewee.TextField(default="")
    parent = peewee.ForeignKeyField("self", null=True, backref="children", on_delete="RESTRICT")
    #: Its people (and those of the units below it) sign in with passkeys only: no password,
    #: so no TOTP either (services/accounts/password_rule.py).
    passkeys_only = peewee.BooleanField(default=False)
    created_at = peewee.DoubleField(default=now)


class UserType(BaseModel):
    id = peewee.CharField(primary_key=True, default=new_id)
    name = peewee.CharField(unique=True)
    ou = peewee.ForeignKeyField(OrganizationUnit, on_delete="RESTRICT")
    allow_self_registration = peewee.BooleanField(default=False)
    #: Attribute schema: {"email": {"type": "string", "required": true, "unique": true}, ...}
    schema = JSONField(default=dict)
    created_at = peewee.DoubleField(default=now)


class User(BaseModel):
    id = peewee.CharField(primary_key=True, default=new_id)
    #: As typed at sign-up (what people see).
    username = peewee.CharField(unique=True)
    #: ``security.usernames.username_key(username)`` (RFC 8265 UsernameCaseMapped): what
    #: makes two usernames the same and what a lookup by username compares.
    username_key = peewee.CharField(unique=True)
    #: WebAuthn user handle (Base64URL of 32 random bytes): stable for the user's life.
    user_handle = peewee.CharField(unique=True)
    attributes = JSONField(default=dict)
    #: The ``email`` attribute in lower case (None without one): what the admin console's
    #: search finds by prefix, in its index (store/directory.py keeps it in step).
    email_key = peewee.CharField(null=True, index=True)
    user_type = peewee.ForeignKeyField(UserType, on_delete="RESTRICT")
    ou = peewee.ForeignKeyField(OrganizationUnit, on_delete="RESTRICT")
    password_hash = peewee.TextField(null=True)
    #: active | disabled | locked (services.directory.users.Standing)
    status = peewee.CharField(default="active")
    created_at = peewee.DoubleField(default=now)
    updated_at = peewee.DoubleField(default=now)


class Theme(BaseModel):
    id = peewee.CharField(primary_key=True, default=new_id)
    handle = peewee.CharField(unique=True)
    display_name = peewee.CharField()
    description = peewee.TextField(default="")
    #: {"colorSchemes": {...}, "typography": {...}}
    theme = JSONField(default=dict)
    created_at = peewee.DoubleField(default=now)
    updated_at = peewee.DoubleField(default=now)


class Flow(BaseModel):
    id = peewee.CharField(primary_key=True, default=new_id)
    handle = peewee.CharField()
    name = peewee.CharField()
    flow_type = peewee.CharField()
    nodes = JSONField(default=list)
    created_at = peewee.DoubleField(default=now)
    updated_at = peewee.DoubleField(default=now)

    class Meta:
        indexes = ((("handle", "flow_type"), True),)


class Application(BaseModel):
    id = peewee.CharField(primary_key=True, default=new_id)
    name = peewee.CharField(unique=True)
    description = peewee.TextField(default="")
    template = peewee.CharField(default="")
    ou = peewee.ForeignKeyField(OrganizationUnit, null=True, on_delete="SET NULL")
    auth_flow = peewee.ForeignKeyField(Flow, null=True, on_delete="SET NULL",
                                       backref="auth_applications")
    registration_flow = peewee.ForeignKeyField(Flow, null=True, on_delete="SET NULL",
                                               backref="registration_applications")
    registration_enabled = peewee.BooleanField(default=False)
    #: Whether its flows' PasskeyAuthExecutor ``upgrade`` may offer a passkey.
    passkey_upgrade = peewee.BooleanField(default=True)
    theme = peewee.ForeignKeyField(Theme, null=True, on_delete="SET NULL")
    allowed_user_types = JSONField(default=list)
    #: Nobody signs in to it with a password (services/accounts/password_rule.py).
    passkeys_only = peewee.BooleanField(default=False)
    client_id = peewee.CharField(unique=True)
    client_secret_hash = peewee.TextField(null=True)
    #: {"redirectUris", "grantTypes", "responseTypes", "tokenEndpointAuthMethod",
    #:  "pkceRequired", "publicClient", "scopes", "token": {...}}
    oauth = JSONField(default=dict)
    created_at = peewee.DoubleField(default=now)
    updated_at = peewee.DoubleField(default=now)


class PasskeyCredential(BaseModel):
    id = peewee.AutoField()
    #: Base64URL of the raw credential id; globally unique (WebAuthn §7.1 step 25).
    credential_id = peewee.CharField(max_length=1400, unique=True)
    user = peewee.ForeignKeyField(User, backref="passkeys", on_delete="CASCADE")
    public_key = peewee.BlobField()
    algorithm = peewee.IntegerField()
    sign_count = peewee.BigIntegerField(default=0)
    transports = JSONField(default=list)
    aaguid = peewee.CharField(default="")
    attestation_format = peewee.CharField(default="none")
    backup_eligible = peewee.BooleanField(default=False)
    backup_state = peewee.BooleanField(default=False)
    user_verified = peewee.BooleanField(default=False)
    name = peewee.CharField()
    created_at = peewee.DoubleField(default=now)
    last_used_at = peewee.DoubleField(null=True)


class CeremonySession(BaseModel):
    #: SHA-256 of the opaque session token handed to the client.
    token_hash = peewee.CharField(primary_key=True)
    #: registration | authentication
    ceremony = peewee.CharField()
    user = peewee.ForeignKeyField(User, null=True, on_delete="CASCADE")
    rp_id = peewee.CharField()
    challenge = peewee.CharField()
    #: What the verifier needs: allowed credential ids, UV requirement, offered algorithms...
    state = JSONField(default=dict)
    #: What the session is for, within its ceremony ("" for the plain one). The default is
    #: the database's, as migration 3 adds the column, so an insert may leave it out.
    scope = peewee.CharField(constraints=[peewee.SQL("DEFAULT ''")])
    superseded = peewee.BooleanField(default=False)
    created_at = peewee.DoubleField(default=now)
    expires_at = peewee.DoubleField(index=True)

    class Meta:
        # A start supersedes the open sessions of the same user, ceremony and scope: found
        # through this index, that costs the same however many sessions older starts left
        # behind (anyone may call start with a user id, so the count is not the user's to
        # bound).
        indexes = ((("user", "ceremony", "scope", "superseded"), False),)


class FlowExecution(BaseModel):
    id = peewee.CharField(primary_key=True, default=new_id)
    flow = peewee.ForeignKeyField(Flow, on_delete="CASCADE")
    application = peewee.ForeignKeyField(Application, on_delete="CASCADE")
    flow_type = peewee.CharField()
    current_node = peewee.CharField()
    #: Everything the engine remembers between steps (user id, passkey session token...).
    context = JSONField(default=dict)
    #: INCOMPLETE | COMPLETE | ERROR
    status = peewee.CharField(default="INCOMPLETE")
    #: Optimistic concurrency: a step advances only the version it read.
    version = peewee.IntegerField(default=0)
    #: Seam for OAuth: the authorization request this execution serves, if any.
    auth_request_id = peewee.CharField(null=True)
    created_at = peewee.DoubleField(default=now)
    updated_at = peewee.DoubleField(default=now)
    expires_at = peewee.DoubleField(index=True)


class ServiceSecret(BaseModel):
    """A secret of the deployment other than a signing key (Base64 of random bytes), made at
    first use and never changed (store.keys.service_secret)."""

    name = peewee.CharField(primary_key=True)
    value = peewee.TextField()
    created_at = peewee.DoubleField(default=now)


class SigningKey(BaseModel):
    kid = peewee.CharField(primary_key=True)
    algorithm = peewee.CharField()
    private_pem = peewee.TextField()
    public_jwk = JSONField()
    #: active (signs) | previous (verifies only) | retired (gone from JWKS)
    status = peewee.CharField(default="active")
    created_at = peewee.DoubleField(default=now)
    retired_at = peewee.DoubleField(null=True)


class AuthorizationRequest(BaseModel):
    id = peewee.CharField(primary_key=True)
    application = peewee.ForeignKeyField(Application, on_delete="CASCADE")
    redirect_uri = peewee.TextField()
    scope = peewee.TextField(default="")
    state = peewee.TextField(null=True)
    nonce = peewee.TextField(null=True)
    code_challenge = peewee.CharField(null=True)
    code_challenge_method = peewee.CharField(null=True)
    #: Other authorization parameters kept for the hand-off (prompt, max_age, resource...).
    extra = JSONField(default=dict)
    consumed = peewee.BooleanField(default=False)
    created_at = peewee.DoubleField(default=now)
    expires_at = peewee.DoubleField(index=True)


class AuthorizationCode(BaseModel):
    code_hash = peewee.CharField(primary_key=True)
    application = peewee.ForeignKeyField(Application, on_delete="CASCADE")
    user = peewee.ForeignKeyField(User, on_delete="CASCADE")
    redirect_uri = peewee.TextField()
    scope = peewee.TextField(default="")
    nonce = peewee.TextField(null=True)
    code_challenge = peewee.CharField(null=True)
    code_challenge_method = peewee.CharField(null=True)
    auth_time = peewee.DoubleField()
    amr = JSONField(default=list)
    extra = JSONField(default=dict)
    consumed_at = peewee.DoubleField(null=True)
    #: What the exchange issued, so a replayed code can revoke it (RFC 9700 §4.4.1).
    issued_jtis = JSONField(default=list)
    refresh_family = peewee.CharField(null=True)
    created_at = peewee.DoubleField(default=now)
    expires_at = peewee.DoubleField(index=True)


class RefreshToken(BaseModel):
    token_hash = peewee.CharField(primary_key=True)
    family = peewee.CharField(index=True)
    application = peewee.ForeignKeyField(Application, on_delete="CASCADE")
    user = peewee.ForeignKeyField(User, null=True, on_delete="CASCADE")
    scope = peewee.TextField(default="")
    auth_time = peewee.DoubleField(null=True)
    amr = JSONField(default=list)
    extra = JSONField(default=dict)
    rotated_at = peewee.DoubleField(null=True)
    revoked = peewee.BooleanField(default=False)
    created_at = peewee.DoubleField(default=now)
    expires_at = peewee.DoubleField(index=True)


class RevokedToken(BaseModel):
    """JWT ids revoked before they expire (RFC 7009); purged once past ``expires_at``."""

    jti = peewee.CharField(primary_key=True)
    expires_at = peewee.DoubleField(index=True)


class AuditEvent(BaseModel):
    id = peewee.AutoField()
    at = peewee.DoubleField(default=now)
    event = peewee.CharField()
    #: success | failure | denied | throttled
    outcome = peewee.CharField()
    actor = peewee.CharField(default="")
    user_id = peewee.CharField(null=True)
    client_address = peewee.CharField(default="")
    details = JSONField(default=dict)
    #: The id of the request that caused it (its X-Request-ID and log line); "" for none.
    request_id = peewee.CharField(default="")

    class Meta:
        # PERF: the log is paged newest first by (at, id), alone or within one actor, user
        # or event, so each page seeks its start in one of these (store/audit.page;
        # migration 19, which made them, says so too).
        indexes = ((("at", "id"), False), (("actor", "at", "id"), False),
                   (("user_id", "at", "id"), False), (("event", "at", "id"), False))


class Throttle(BaseModel):
    """Failure counters per account / client address, shared by every server instance."""

    key = peewee.CharField(primary_key=True)
    window_start = peewee.DoubleField()
    failures = peewee.IntegerField(default=0)
    blocked_until = peewee.DoubleField(null=True)


class Role(BaseModel):
    """A set of scopes (permissions) that users hold by holding the role."""

    id = peewee.CharField(primary_key=True, default=new_id)
    name = peewee.CharField(unique=True)
    description = peewee.TextField(default="")
    scopes = JSONField(default=list)
    created_at = peewee.DoubleField(default=now)


class UserRole(BaseModel):
    user = peewee.ForeignKeyField(User, on_delete="CASCADE", backref="roles")
    role = peewee.ForeignKeyField(Role, on_delete="CASCADE", backref="holders")
    granted_at = peewee.DoubleField(default=now)

    class Meta:
        primary_key = peewee.CompositeKey("user", "role")


class Grant(BaseModel):
    """What a person let a client have: the scopes granted to one application, remembered
    until revoked (revoking it ends every token the client holds for the person)."""

    user = peewee.ForeignKeyField(User, on_delete="CASCADE", backref="grants")
    application = peewee.ForeignKeyField(Application, on_delete="CASCADE", backref="grants")
    scopes = JSONField(default=list)
    granted_at = peewee.DoubleField(default=now)
    updated_at = peewee.DoubleField(default=now)

    class Meta:
        primary_key = peewee.CompositeKey("user", "application")


class ResourceServer(BaseModel):
    """An API (an MCP server of the team's, say) identityctl issues tokens for: its RFC 8707
    resource identifier, and the scopes its tokens may carry."""

    id = peewee.CharField(primary_key=True, default=new_id)
    identifier = peewee.CharField(unique=True)
    name = peewee.CharField()
    scopes = JSONField(default=list)
    created_at = peewee.DoubleField(default=now)


class ClientRegistration(BaseModel):
    """RFC 7592: the registration access token (hashed) with which a client that registered
    itself reads or deletes its registration."""

    application = peewee.ForeignKeyField(Application, primary_key=True, on_delete="CASCADE")
    token_hash = peewee.CharField()
    #: The client information response of RFC 7591 §3.2.1, as registered (read back as is).
    metadata = JSONField(default=dict)
    created_at = peewee.DoubleField(default=now)


class BrowserSession(BaseModel):
    """A person's sign-in at the identity service, kept in their browser as an opaque cookie
    (stored here by its hash): single sign-on for every application, from any instance."""

    id = peewee.CharField(primary_key=True)  # token_hash of the cookie's value
    user = peewee.ForeignKeyField(User, on_delete="CASCADE", backref="browser_sessions")
    auth_time = peewee.DoubleField()
    amr = JSONField(default=list)
    created_at = peewee.DoubleField(default=now)
    last_seen_at = peewee.DoubleField(default=now)
    expires_at = peewee.DoubleField()  # absolute: idle expiry counts from last_seen_at
    ended_at = peewee.DoubleField(null=True)
    client_address = peewee.CharField(default="")
    #: The browser's User-Agent when it signed in (the account page names the device by it).
    user_agent = peewee.TextField(default="")


class SessionGrant(BaseModel):
    """A client signed in through a browser session, and the token family (``sid``) it got:
    what ending the session ends, and whom back-channel logout tells."""

    session = peewee.ForeignKeyField(BrowserSession, on_delete="CASCADE", backref="grants")
    family = peewee.CharField()
    application = peewee.ForeignKeyField(Application, on_delete="CASCADE")
    user = peewee.ForeignKeyField(User, on_delete="CASCADE")
    created_at = peewee.DoubleField(default=now)

    class Meta:
        primary_key = peewee.CompositeKey("session", "family")


class OutboxMessage(BaseModel):
    """Something to deliver outside (a back-channel logout notice; later mail, webhooks),
    committed with the change that caused it and delivered by any instance, once."""

    id = peewee.CharField(primary_key=True, default=new_id)
    kind = peewee.CharField()
    target = peewee.TextField()
    payload = JSONField(default=dict)
    created_at = peewee.DoubleField(default=now)
    attempts = peewee.IntegerField(default=0)
    next_attempt_at = peewee.DoubleField(default=now)
    #: An instance delivering it holds it until then (a crashed one's claim runs out).
    claimed_until = peewee.DoubleField(null=True)
    delivered_at = peewee.DoubleField(null=True)
    #: Given up after its kind's retry time.
    failed_at = peewee.DoubleField(null=True)
    last_error = peewee.TextField(default="")

    class Meta:
        # PERF: finding what is due seeks the undelivered messages by time; delivered ones
        # (the history) are never scanned (bench/outbox.py).
        indexes = ((("delivered_at", "failed_at", "next_attempt_at"), False),
                   # The outbox view: the newest of a kind.
                   (("kind", "created_at"), False))


class VerifiedEmail(BaseModel):
    """The address a person proved they read (a code sent there came back). The user's
    ``email`` attribute is verified while it still equals this address: changing it
    unverifies it without anyone having to remember to."""

    user = peewee.ForeignKeyField(User, primary_key=True, on_delete="CASCADE")
    #: Lower-cased: recovery finds the person by it.
    address = peewee.CharField(unique=True)
    verified_at = peewee.DoubleField(default=now)


class EmailCode(BaseModel):
    """A code the account page e-mailed to confirm an address (the person's, or the one
    they want instead), kept as a keyed hash until it comes back, runs out or is guessed at
    too often; with the person's sends of the hour (a bound on mail from one account)."""

    user = peewee.ForeignKeyField(User, primary_key=True, on_delete="CASCADE")
    address = peewee.CharField()
    #: HMAC-SHA256 of the code (and the person and address) under a deployment secret.
    code_hash = peewee.CharField()
    expires_at = peewee.DoubleField()
    tries = peewee.IntegerField(default=0)
    sends = peewee.IntegerField(default=1)
    #: When the hour the sends count in began.
    sends_since = peewee.DoubleField(default=now)


class RecoveryCode(BaseModel):
    """One of a person's recovery codes: shown once, kept as a keyed hash, used once."""

    id = peewee.CharField(primary_key=True, default=new_id)
    user = peewee.ForeignKeyField(User, on_delete="CASCADE", index=True)
    #: HMAC-SHA256 of the code under a secret of the deployment (store/keys).
    code_hash = peewee.CharField(unique=True)
    created_at = peewee.DoubleField(default=now)
    used_at = peewee.DoubleField(null=True)


class TOTPSecret(BaseModel):
    """A person's authenticator app (RFC 6238): its seed sealed (security/totp.py), active
    once a first code confirmed it, and the last time step a code was accepted for."""

    user = peewee.ForeignKeyField(User, primary_key=True, on_delete="CASCADE")
    sealed_secret = peewee.TextField()
    confirmed = peewee.BooleanField(default=False)
    #: The step of the last accepted code: it and every earlier step are spent.
    last_step = peewee.BigIntegerField(null=True)
    created_at = peewee.DoubleField(default=now)


class IdentityProvider(BaseModel):
    """An upstream identity provider people may sign in through (federation/)."""

    id = peewee.CharField(primary_key=True, default=new_id)
    handle = peewee.CharField(unique=True)
    name = peewee.CharField()
    #: oidc | google | microsoft | github
    kind = peewee.CharField()
    #: OpenID kinds: the issuer (discovery at {issuer}/.well-known/openid-configuration).
    issuer = peewee.TextField(default="")
    client_id = peewee.TextField()
    #: Needed in clear to redeem codes upstream; never shown after creation, never logged.
    client_secret = peewee.TextField()
    scopes = JSONField(default=list)
    #: Our attribute -> the upstream claim it is taken from.
    mapping = JSONField(default=dict)
    #: Kind-specific: GitHub's endpoints (GitHub Enterprise), an icon.
    settings = JSONField(default=dict)
    created_at = peewee.DoubleField(default=now)


class FederatedIdentity(BaseModel):
    """A person's account at a provider, linked to our user."""

    id = peewee.CharField(primary_key=True, default=new_id)
    provider = peewee.ForeignKeyField(IdentityProvider, on_delete="CASCADE")
    #: The provider's stable id of the person (``sub``; GitHub's numeric id).
    subject = peewee.CharField()
    user = peewee.ForeignKeyField(User, on_delete="CASCADE", index=True)
    created_at = peewee.DoubleField(default=now)
    last_used_at = peewee.DoubleField(null=True)

    class Meta:
        indexes = ((("provider", "subject"), True),)


class WebhookSubscription(BaseModel):
    """An admin's HTTPS endpoint told about audit events (Standard Webhooks)."""

    id = peewee.CharField(primary_key=True, default=new_id)
    url = peewee.TextField()
    #: Audit event types ("passkey.register"), or prefixes ending in ".*", or "*".
    events = JSONField(default=list)
    #: ``whsec_`` + Base64 of 32 random bytes: signs every delivery; needed in clear.
    secret = peewee.TextField()
    description = peewee.TextField(default="")
    created_at = peewee.DoubleField(default=now)


class SpentIdentifier(BaseModel):
    """A one-time identifier seen once (a client assertion's or a DPoP proof's ``jti``), kept
    until it could no longer be accepted anyway; purged after ``expires_at``."""

    #: SHA-256 of "<kind>:<issuer of the identifier>:<identifier>".
    key = peewee.CharField(primary_key=True)
    expires_at = peewee.DoubleField(index=True)


class PushedRequest(BaseModel):
    """An authorization request a client pushed (RFC 9126), until it is used once."""

    #: SHA-256 of the request_uri's random part.
    id = peewee.CharField(primary_key=True)
    application = peewee.ForeignKeyField(Application, on_delete="CASCADE")
    #: The request's parameters as pushed (name -> value, "resource" -> list).
    parameters = JSONField(default=dict)
    expires_at = peewee.DoubleField(index=True)


class DeviceAuthorization(BaseModel):
    """A device's sign-in (RFC 8628) while the person answers on /device and the device
    polls; purged an hour after it expires."""

    #: SHA-256 of the device code (the device's secret).
    device_code_hash = peewee.CharField(primary_key=True)
    #: What the person types, as stored: 8 letters, no dash.
    user_code = peewee.CharField(unique=True)
    application = peewee.ForeignKeyField(Application, on_delete="CASCADE")
    scope = peewee.TextField(default="")
    #: The resources asked for; the DPoP key of the request.
    extra = JSONField(default=dict)
    #: None until the person answers.
    approved = peewee.BooleanField(null=True)
    user = peewee.ForeignKeyField(User, null=True, on_delete="CASCADE")
    auth_time = peewee.DoubleField(null=True)
    amr = JSONField(default=list)
    #: Seconds between polls (RFC 8628 §3.5: longer after each slow_down).
    interval = peewee.DoubleField()
    last_polled_at = peewee.DoubleField(null=True)
    redeemed_at = peewee.DoubleField(null=True)
    created_at = peewee.DoubleField(default=now)
    expires_at = peewee.DoubleField(index=True)


class ProposedChange(BaseModel):
    """A change an MCP tool proposed instead of making it (``admin.approve_mcp_changes``):
    a configuration-as-code fragment, the diff it made when proposed, and what a person
    decided; kept after the decision as its record."""

    id = peewee.CharField(primary_key=True, default=new_id)
    #: What the tool did, in its words ("create application").
    summary = peewee.TextField()
    #: The configuration-as-code fragment the change applies, and the diff it made then.
    document = JSONField()
    diff = JSONField()
    #: SHA-256 (hex) of document and diff together: an approval's challenge is made of it.
    digest = peewee.CharField()
    #: The MCP client that proposed it, and the actor it acted for.
    client_id = peewee.CharField(default="")
    author = peewee.CharField(default="")
    created_at = peewee.DoubleField(default=now)
    expires_at = peewee.DoubleField()
    #: pending, approved, rejected, expired or failed.
    state = peewee.CharField(default="pending")
    decided_by = peewee.CharField(null=True)
    decided_at = peewee.DoubleField(null=True)
    #: Why an approval failed (the deployment moved).
    reason = peewee.TextField(default="")

    class Meta:
        indexes = ((("created_at", "id"), False), (("client_id", "state"), False))


class AttestationMetadata(BaseModel):
    """The FIDO metadata (an MDS3 BLOB) registrations are checked against: one row, which
    every load replaces, raising ``version`` (the key of each process's parsed copy)."""

    id = peewee.IntegerField(primary_key=True)
    version = peewee.IntegerField()
    #: The BLOB as loaded (a JWS) and the root (DER, Base64) it was verified against.
    blob = peewee.TextField()
    trust_root = peewee.TextField()
    #: The BLOB's serial number, next update (ISO date), entries and legal header.
    number = peewee.IntegerField()
    next_update = peewee.CharField()
    entries = peewee.IntegerField()
    legal_header = peewee.TextField()
    loaded_at = peewee.DoubleField(default=now)


ALL_MODELS: list[type[BaseModel]] = [
    SchemaVersion, OrganizationUnit, UserType, User, Theme, Flow, Application,
    PasskeyCredential, CeremonySession, FlowExecution, SigningKey, AuthorizationRequest,
    AuthorizationCode, RefreshToken, RevokedToken, AuditEvent, Throttle, ServiceSecret,
    Role, UserRole, Grant, ResourceServer, ClientRegistration, BrowserSession, SessionGrant,
    OutboxMessage, VerifiedEmail, EmailCode, RecoveryCode, IdentityProvider, FederatedIdentity,
    WebhookSubscription, SpentIdentifier, PushedRequest, DeviceAuthorization, ProposedChange,
    AttestationMetadata,
    TOTPSecret,
]
