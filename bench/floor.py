"""The floor: the same crypto and SQL as identityctl's hot paths, with no product layers.

A minimal Falcon app on waitress, in this file, that answers the hot paths' URLs with the same
request and response shapes as `identityctl serve` (and the same waitress threads, dispatched
and reading requests in batches as `serve` does on SQLite), doing per request only what the
work itself needs: py_webauthn for the passkey checks, pyjwt ES256 for the tokens, argon2
for passwords (identityctl.security.passwords' own hash/verify: the product's argon2id
parameters, crypto only), and the same kind of inserts/updates/deletes on a SQLite file in
WAL mode (stdlib sqlite3, one connection per thread, `synchronous=NORMAL` and enforced
foreign keys as the product's store; each table with the columns, indexes and foreign keys
of its product counterpart, see SCHEMA). It runs the statements the product runs on each path
(the same reads of the same columns, including the brute-force throttle read every attempt
makes, and the same writes of the same values in the same transactions), written by hand: no
middleware, no ORM, no audit or throttle layers beyond those statements, no OpenAPI
validation, no error catalogue. It is the ceiling
of this stack: bench/hotpaths.py drives it and the real server under the same load and
prints each hot path as a share of it.

Work per request, by route ("throttle read": one SELECT of the account's and the client
address's throttle rows):

- `GET /health`: `SELECT 1`.
- `POST /auth/passkey/start`: select the user and their credentials, the throttle read (the
  account at the address, the address, its starts); in one transaction count the start
  against the address, mark the same user's, ceremony's and address's older session
  superseded and insert the challenge row (1 in 64 requests first deletes sessions expired
  an hour ago); options JSON (py_webauthn).
- `POST /auth/passkey/finish`: select the session, the throttle read, select credential + user,
  `verify_authentication_response`, then in one transaction delete the session, update the
  counter, insert an audit row; sign one JWT (the assertion).
- `POST /oauth2/token` client_credentials: the throttle read, select the client, check the
  secret (argon2 once per process with the product's `verify_password`, then a SHA-256
  cache, as services/clients/client.py does), sign one ES256 JWT, insert an audit row.
- `POST /oauth2/token` authorization_code: the throttle read, select the client, select the
  code, PKCE S256, select the user, sign access + ID token; in one transaction mark the code
  used (with the ids of the tokens it issued), insert the refresh token, insert an audit row.
- `POST /flow/execute`: start inserts the execution row; the `password` action selects the
  execution and the user, verifies argon2 (the product's `verify_password`: time_cost=2,
  19 MiB, parallelism=1; a dummy hash for unknown users), signs the assertion, deletes the
  execution.
- `POST /mcp` tools/list: verify the bearer JWT (ES256, typ, audience, scope); answer a
  precomputed tool list (the product's own, fetched once by bench/hotpaths.py).

Registration (`/register/passkey/*`) and `/bench/*` exist for the untimed set-up only.

Its processes keep to cores as `serve`'s do (identityctl/server/affinity.py, `--pin-cores`
as `server.pin_cores`): the floor shares the stack's serving conditions, not its layers.

Run it alone (one process, or N forked processes sharing one socket like `serve --workers`):

    .venv/bin/python bench/floor.py --port 8099 --threads 4 --workers 1
"""

# ruff: noqa: E402  (sys.path is fixed before the imports below)
from __future__ import annotations

import os
import sys

# Run as a script, this folder comes first on sys.path, where a bench module could shadow the
# standard library: the repository root goes there instead.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import argparse
import base64
import gc
import hashlib
import json
import secrets
import signal
import socket
import sqlite3
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import falcon
import jwt
import waitress
from cryptography.hazmat.primitives.asymmetric import ec
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url
from webauthn.helpers.options_to_json_dict import options_to_json_dict
from webauthn.helpers.structs import (
    PublicKeyCredentialDescriptor,
    UserVerificationRequirement,
)

# Crypto only: the product's own argon2id profile and verify (same parameters, same dummy-hash
# equalisation for unknown users), so the password path does exactly the product's argon2 work.
from identityctl.security.passwords import hash_password, verify_password
from identityctl.server.affinity import cores_for, keep_to
from identityctl.server.batches import read_in_batches
from identityctl.server.dispatch import FinishingThreadDispatcher

# The hot paths' tables are their identityctl counterparts (store/models.py): the same columns,
# indexes and foreign keys, and the floor writes the same values into them. What an insert,
# update or commit costs depends on the rows' size and on every index and foreign key, so the
# floor pays for them as the product does; its statements read the columns the product reads.
SCHEMA = """
CREATE TABLE IF NOT EXISTS user_types (id TEXT PRIMARY KEY, name TEXT NOT NULL);
INSERT OR IGNORE INTO user_types VALUES ('person', 'person');
CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, username TEXT NOT NULL UNIQUE,
    user_handle TEXT NOT NULL UNIQUE, attributes TEXT NOT NULL,
    user_type_id TEXT NOT NULL REFERENCES user_types (id), ou_id TEXT NOT NULL,
    password_hash TEXT, status TEXT NOT NULL, created_at REAL NOT NULL,
    updated_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS users_type ON users (user_type_id);
CREATE INDEX IF NOT EXISTS users_ou ON users (ou_id);
CREATE TABLE IF NOT EXISTS credentials (id INTEGER PRIMARY KEY, credential_id TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE, public_key BLOB NOT NULL,
    algorithm INTEGER NOT NULL, sign_count INTEGER NOT NULL, transports TEXT NOT NULL,
    aaguid TEXT NOT NULL, attestation_format TEXT NOT NULL, backup_eligible INTEGER NOT NULL,
    backup_state INTEGER NOT NULL, user_verified INTEGER NOT NULL, name TEXT NOT NULL,
    created_at REAL NOT NULL, last_used_at REAL);
CREATE UNIQUE INDEX IF NOT EXISTS credentials_credential_id ON credentials (credential_id);
CREATE INDEX IF NOT EXISTS credentials_user ON credentials (user_id);
CREATE TABLE IF NOT EXISTS sessions (token_hash TEXT PRIMARY KEY, ceremony TEXT NOT NULL,
    user_id TEXT REFERENCES users (id) ON DELETE CASCADE, rp_id TEXT NOT NULL,
    challenge TEXT NOT NULL, state TEXT NOT NULL, scope TEXT NOT NULL DEFAULT '',
    superseded INTEGER NOT NULL,
    created_at REAL NOT NULL, expires_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS sessions_user ON sessions (user_id);
CREATE INDEX IF NOT EXISTS sessions_expiry ON sessions (expires_at);
CREATE INDEX IF NOT EXISTS sessions_open ON sessions (user_id, ceremony, scope, superseded);
CREATE TABLE IF NOT EXISTS clients (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL, template TEXT NOT NULL, ou_id TEXT, auth_flow_id TEXT,
    registration_flow_id TEXT, registration_enabled INTEGER NOT NULL, theme_id TEXT,
    allowed_user_types TEXT NOT NULL, client_id TEXT NOT NULL UNIQUE, client_secret_hash TEXT,
    oauth TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS codes (code_hash TEXT PRIMARY KEY,
    application_id TEXT NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE, redirect_uri TEXT NOT NULL,
    scope TEXT NOT NULL, nonce TEXT, code_challenge TEXT, code_challenge_method TEXT,
    auth_time REAL NOT NULL, amr TEXT NOT NULL, extra TEXT NOT NULL, consumed_at REAL,
    issued_jtis TEXT NOT NULL, refresh_family TEXT, created_at REAL NOT NULL,
    expires_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS codes_client ON codes (application_id);
CREATE INDEX IF NOT EXISTS codes_user ON codes (user_id);
CREATE INDEX IF NOT EXISTS codes_expiry ON codes (expires_at);
CREATE TABLE IF NOT EXISTS refresh_tokens (token_hash TEXT PRIMARY KEY, family TEXT NOT NULL,
    application_id TEXT NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    user_id TEXT REFERENCES users (id) ON DELETE CASCADE, scope TEXT NOT NULL, auth_time REAL,
    amr TEXT NOT NULL, extra TEXT NOT NULL, rotated_at REAL, revoked INTEGER NOT NULL,
    created_at REAL NOT NULL, expires_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS refresh_tokens_family ON refresh_tokens (family);
CREATE INDEX IF NOT EXISTS refresh_tokens_client ON refresh_tokens (application_id);
CREATE INDEX IF NOT EXISTS refresh_tokens_user ON refresh_tokens (user_id);
CREATE INDEX IF NOT EXISTS refresh_tokens_expiry ON refresh_tokens (expires_at);
CREATE TABLE IF NOT EXISTS throttle (key TEXT PRIMARY KEY, window_start REAL NOT NULL,
    failures INTEGER NOT NULL, blocked_until REAL);
CREATE TABLE IF NOT EXISTS executions (id TEXT PRIMARY KEY, application_id TEXT,
    state TEXT, created_at REAL, expires_at REAL);
CREATE INDEX IF NOT EXISTS executions_application ON executions (application_id);
CREATE INDEX IF NOT EXISTS executions_expiry ON executions (expires_at);
CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY, at REAL NOT NULL, event TEXT NOT NULL,
    outcome TEXT NOT NULL, actor TEXT NOT NULL, user_id TEXT, client_address TEXT NOT NULL,
    details TEXT NOT NULL, request_id TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_at ON audit (at, id);
CREATE INDEX IF NOT EXISTS audit_actor ON audit (actor, at, id);
CREATE INDEX IF NOT EXISTS audit_user ON audit (user_id, at, id);
CREATE INDEX IF NOT EXISTS audit_event ON audit (event, at, id);
"""

ISSUER = "http://localhost"
SESSION_TTL = 300
CLIENT_ID = "floor-m2m"
PUBLIC_CLIENT_ID = "floor-spa"
#: The applications' OAuth settings, as identityctl stores them (its JSON `oauth` column).
M2M_OAUTH = {"grantTypes": ["client_credentials"], "responseTypes": [],
             "tokenEndpointAuthMethod": "client_secret_basic", "pkceRequired": False,
             "publicClient": False, "scopes": ["system"], "token": {}}
SPA_OAUTH = {"redirectUris": ["https://bench.example/callback"],
             "grantTypes": ["authorization_code", "refresh_token"], "responseTypes": ["code"],
             "tokenEndpointAuthMethod": "none", "pkceRequired": True, "publicClient": True,
             "scopes": ["openid", "profile", "email"], "token": {}}
#: A user and their type's name, the columns identityctl reads with every user.
USER_COLUMNS = ("u.id, u.username, u.user_handle, u.attributes, u.user_type_id, u.ou_id, "
                "u.password_hash, u.status, u.created_at, u.updated_at, t.name")
#: A user read by id or by username, with their type's name.
USER_BY = {column: f"SELECT {USER_COLUMNS} FROM users u JOIN user_types t "
                   f"ON t.id = u.user_type_id WHERE u.{column} = ?"
           for column in ("id", "username")}
PURGE_ONE_IN = 64  # expired challenges are deleted now and then, as the product does
EXPIRED_GRACE = 3600  # and kept this long past their expiry, as the product keeps them
FAILURE_WINDOW = 900  # security.failure_window's default: the window starts are counted in
#: One start counted (the product's store/throttle.py ``count``: a new row, or the row
#: counted on, in a new window when its window is over).
COUNT_START = ("INSERT INTO throttle (key, window_start, failures) VALUES (?1, ?2, 1) "
               "ON CONFLICT (key) DO UPDATE SET failures = CASE WHEN window_start <= ?3 "
               "THEN 1 ELSE failures + 1 END, window_start = CASE WHEN window_start <= ?3 "
               "THEN ?2 ELSE window_start END")
ORIGIN_DEFAULT = "http://localhost:8090"
RP_ID_DEFAULT = "localhost"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _s256(verifier: str) -> str:
    """The PKCE S256 challenge of ``verifier`` (RFC 7636 §4.2)."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()) \
        .rstrip(b"=").decode()


class Floor:
    """Everything the floor app shares between its threads: the database file, the signing
    key, the relying party, the verified-secret cache."""

    def __init__(self, db_path: str, *, rp_id: str, origin: str, client_secret: str,
                 mcp_tools: list[Any]) -> None:
        self.db_path, self.rp_id, self.origin = db_path, rp_id, origin
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.public_key = self.key.public_key()
        self.kid = uuid.uuid4().hex[:16]
        self.mcp_tools = mcp_tools
        self._local = threading.local()
        self._verified: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._verified_lock = threading.Lock()
        with self.db() as conn:
            conn.executescript(SCHEMA)
            now = time.time()
            for client_id, secret_hash, oauth in (
                    (CLIENT_ID, hash_password(client_secret), M2M_OAUTH),
                    (PUBLIC_CLIENT_ID, None, SPA_OAUTH)):
                conn.execute("INSERT OR REPLACE INTO clients VALUES (?, ?, '', 'M2M', NULL, "
                             "NULL, NULL, 0, NULL, '[]', ?, ?, ?, ?, ?)",
                             (client_id, client_id, client_id, secret_hash, json.dumps(oauth),
                              now, now))

    def db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.db_path, timeout=5, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode=wal")
            conn.execute("PRAGMA synchronous=normal")
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("PRAGMA foreign_keys=1")
            self._local.conn = conn
        return conn

    def sign(self, claims: dict[str, Any], typ: str, ttl: int = 300) -> str:
        now = int(time.time())
        payload = {"iss": ISSUER, "iat": now, "exp": now + ttl, "jti": uuid.uuid4().hex,
                   **claims}
        return jwt.encode(payload, self.key, algorithm="ES256",
                          headers={"kid": self.kid, "typ": typ})

    def audit(self, conn: sqlite3.Connection, event: str, actor: str, details: dict[str, Any],
              *, user_id: str | None, client_address: str) -> None:
        # The request id: a new one per request, as the product makes when none was sent.
        conn.execute("INSERT INTO audit (at, event, outcome, actor, user_id, client_address, "
                     "details, request_id) VALUES (?, ?, 'success', ?, ?, ?, ?, ?)",
                     (time.time(), event, actor, user_id, client_address, json.dumps(details),
                      secrets.token_hex(8)))

    def secret_matches(self, stored_hash: str, secret: str) -> bool:
        key = (stored_hash, _hash(secret))
        with self._verified_lock:
            if key in self._verified:
                self._verified.move_to_end(key)
                return True
        if not verify_password(stored_hash, secret):
            return False
        with self._verified_lock:
            self._verified[key] = None
        return True


def _add_user(conn: sqlite3.Connection, user_id: str, *, password_hash: str | None = None,
              replace: bool = False) -> None:
    """A user row as identityctl writes it (set-up only)."""
    now = time.time()
    conn.execute(f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO users VALUES "
                 "(?, ?, ?, '{}', 'person', 'root', ?, 'active', ?, ?)",
                 (user_id, user_id, bytes_to_base64url(secrets.token_bytes(32)), password_hash,
                  now, now))


def _body(req: falcon.Request) -> dict[str, Any]:
    return json.loads(req.bounded_stream.read() or b"{}")


def _throttled(conn: sqlite3.Connection, resp: falcon.Response, *keys: str) -> bool:
    """The brute-force throttle read the product makes before an attempt (one SELECT over
    the account and the client address); True after answering 429."""
    now = time.time()
    rows = conn.execute(f"SELECT key, blocked_until FROM throttle WHERE key IN "
                        f"({', '.join('?' * len(keys))})", keys).fetchall()
    if any(until is not None and until > now for _, until in rows):
        _json(resp, {"code": "too_many_attempts"}, "429 Too Many Requests")
        return True
    return False


def _json(resp: falcon.Response, body: Any, status: str = falcon.HTTP_200) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.text = json.dumps(body)


def _start_session(floor: Floor, conn: sqlite3.Connection, *, ceremony: str,
                   user_id: str | None, challenge: bytes, state: dict[str, Any],
                   client_address: str) -> str:
    token, now = secrets.token_urlsafe(32), time.time()
    scope = f"address:{client_address}"
    if secrets.randbelow(PURGE_ONE_IN) == 0:
        conn.execute("DELETE FROM sessions WHERE expires_at < ?", (now - EXPIRED_GRACE,))
    conn.execute("BEGIN IMMEDIATE")
    # The start counted against its address (the product's `max_starts_per_address`).
    conn.execute(COUNT_START, (f"starts:{client_address}", now, now - FAILURE_WINDOW))
    # Without a user too (usernameless): the product supersedes on a user id nobody has.
    conn.execute("UPDATE sessions SET superseded = 1 WHERE user_id = ? AND ceremony = ? "
                 "AND scope = ? AND superseded = 0", (user_id or "nobody", ceremony, scope))
    conn.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
                 (_hash(token), ceremony, user_id, floor.rp_id, bytes_to_base64url(challenge),
                  json.dumps(state), scope, now, now + SESSION_TTL))
    conn.execute("COMMIT")
    return token


def _take_session(conn: sqlite3.Connection, token: str, ceremony: str) -> tuple | None:
    row = conn.execute("SELECT user_id, challenge, state, superseded, expires_at, token_hash, "
                       "ceremony, rp_id, created_at FROM sessions WHERE token_hash = ?",
                       (_hash(token),)).fetchone()
    if row is None or row[6] != ceremony or row[3] or row[4] <= time.time():
        return None
    return row


class Health:
    def __init__(self, floor: Floor) -> None:
        self.floor = floor

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.floor.db().execute("SELECT 1").fetchone()
        _json(resp, {"status": "ok", "database": "ok"})


class RegisterStart:
    """Set-up only: registration options for a user (created on first use)."""

    def __init__(self, floor: Floor) -> None:
        self.floor = floor

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body, conn = _body(req), self.floor.db()
        user_id = body["userId"]
        _add_user(conn, user_id)
        handle = conn.execute("SELECT user_handle FROM users WHERE id = ?",
                              (user_id,)).fetchone()[0]
        options = generate_registration_options(rp_id=self.floor.rp_id, rp_name="floor",
                                                user_name=user_id,
                                                user_id=base64url_to_bytes(handle))
        token = _start_session(self.floor, conn, ceremony="registration", user_id=user_id,
                               challenge=options.challenge, state={},
                               client_address=req.remote_addr)
        _json(resp, {"publicKeyCredentialCreationOptions": options_to_json_dict(options),
                     "sessionToken": token})


class RegisterFinish:
    def __init__(self, floor: Floor) -> None:
        self.floor = floor

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body, conn = _body(req), self.floor.db()
        session = _take_session(conn, body["sessionToken"], "registration")
        if session is None:
            _json(resp, {"code": "unknown_session_token"}, falcon.HTTP_400)
            return
        verified = verify_registration_response(
            credential=body["publicKeyCredential"],
            expected_challenge=base64url_to_bytes(session[1]),
            expected_rp_id=self.floor.rp_id, expected_origin=self.floor.origin)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DELETE FROM sessions WHERE token_hash = ?", (_hash(body["sessionToken"]),))
        conn.execute("INSERT INTO credentials (credential_id, user_id, public_key, algorithm, "
                     "sign_count, transports, aaguid, attestation_format, backup_eligible, "
                     "backup_state, user_verified, name, created_at) VALUES "
                     "(?, ?, ?, -7, ?, '[\"internal\"]', ?, 'none', 0, 0, 1, ?, ?)",
                     (bytes_to_base64url(verified.credential_id), session[0],
                      verified.credential_public_key, verified.sign_count, verified.aaguid,
                      "Passkey " + time.strftime("%Y-%m-%d"), time.time()))
        conn.execute("COMMIT")
        _json(resp, {"id": bytes_to_base64url(verified.credential_id)}, falcon.HTTP_201)


class AuthStart:
    """Hot path: one challenge row + the request options JSON."""

    def __init__(self, floor: Floor) -> None:
        self.floor = floor

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body, conn = _body(req), self.floor.db()
        user_id = body.get("userId") or None
        allowed: list[str] = []
        if user_id is not None:
            if conn.execute(USER_BY["id"], (user_id,)).fetchone() is None:
                _json(resp, {"code": "user_not_found"}, falcon.HTTP_404)
                return
            allowed = [row[0] for row in conn.execute(
                "SELECT credential_id, transports FROM credentials WHERE user_id = ? "
                "ORDER BY created_at, id", (user_id,))]
        address = req.remote_addr
        if _throttled(conn, resp, *([f"pair:{address}|{user_id}"] if user_id else []),
                      f"address:{address}", f"starts:{address}"):
            return
        uv = "preferred" if user_id else "required"
        options = generate_authentication_options(
            rp_id=self.floor.rp_id, user_verification=UserVerificationRequirement(uv),
            allow_credentials=[PublicKeyCredentialDescriptor(id=base64url_to_bytes(c))
                               for c in allowed])
        state: dict[str, Any] = {"userVerification": uv, "allowCredentials": allowed}
        if user_id:
            state["account"] = user_id  # the finish's throttle account, as the product keeps it
        token = _start_session(self.floor, conn, ceremony="authentication", user_id=user_id,
                               challenge=options.challenge, state=state, client_address=address)
        _json(resp, {"publicKeyCredentialRequestOptions": options_to_json_dict(options),
                     "sessionToken": token})


class AuthFinish:
    """Hot path: select, py_webauthn verify, update the counter, delete the challenge, one JWT."""

    def __init__(self, floor: Floor) -> None:
        self.floor = floor

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body, conn = _body(req), self.floor.db()
        credential, token = body["publicKeyCredential"], body["sessionToken"]
        session = _take_session(conn, token, "authentication")
        if session is None:
            _json(resp, {"code": "unknown_session_token"}, falcon.HTTP_400)
            return
        if _throttled(conn, resp, *([f"account:{session[0]}"] if session[0] else []),
                      f"address:{req.remote_addr}"):
            return
        row = conn.execute(f"SELECT c.user_id, c.public_key, c.sign_count, u.user_handle, "
                           f"c.credential_id, c.backup_eligible, {USER_COLUMNS} FROM credentials c "
                           "JOIN users u ON u.id = c.user_id JOIN user_types t "
                           "ON t.id = u.user_type_id WHERE c.credential_id = ?",
                           (credential["id"],)).fetchone()
        if row is None or (session[0] is not None and row[0] != session[0]):
            _json(resp, {"code": "unknown_credential"}, falcon.HTTP_400)
            return
        state = json.loads(session[2])
        verified = verify_authentication_response(
            credential=credential, expected_challenge=base64url_to_bytes(session[1]),
            expected_rp_id=self.floor.rp_id, expected_origin=self.floor.origin,
            credential_public_key=row[1], credential_current_sign_count=row[2],
            require_user_verification=state["userVerification"] == "required")
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        gone = conn.execute("DELETE FROM sessions WHERE token_hash = ? AND ceremony = ? "
                            "AND NOT superseded AND expires_at > ?",
                            (_hash(token), "authentication", now))
        counted = conn.execute("UPDATE credentials SET sign_count = ?, backup_state = ?, "
                               "last_used_at = ? WHERE credential_id = ? AND (sign_count < ? "
                               "OR ? = 0) AND backup_eligible = ?",
                               (verified.new_sign_count, verified.credential_backed_up, now,
                                credential["id"], verified.new_sign_count,
                                verified.new_sign_count, False))
        if gone.rowcount != 1 or counted.rowcount != 1:
            conn.execute("ROLLBACK")
            _json(resp, {"code": "unknown_session_token"}, falcon.HTTP_400)
            return
        self.floor.audit(conn, "passkey.authenticate", row[0],
                         {"credentialId": credential["id"], "userVerified": True,
                          "usernameless": session[0] is None},
                         user_id=row[0], client_address=req.remote_addr)
        conn.execute("COMMIT")
        assertion = self.floor.sign({"sub": row[0], "aud": [ISSUER], "auth_time": int(now),
                                     "amr": ["passkey"]}, typ="assertion+jwt")
        _json(resp, {"id": row[0], "type": "user", "ouId": "root", "assertion": assertion})


class Token:
    """Hot paths: client_credentials and authorization_code."""

    def __init__(self, floor: Floor) -> None:
        self.floor = floor

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form = dict(parse_qsl(req.bounded_stream.read().decode()))
        client_id = form.get("client_id") or base64.b64decode(
            (req.get_header("Authorization") or " ").split(" ", 1)[1]).decode().partition(":")[0]
        if _throttled(self.floor.db(), resp, f"account:client:{client_id}",
                      f"address:{req.remote_addr}"):
            return
        if form.get("grant_type") == "client_credentials":
            self._client_credentials(req, resp)
        else:
            self._exchange(form, resp, req.remote_addr)

    def _client_credentials(self, req: falcon.Request, resp: falcon.Response) -> None:
        floor, conn = self.floor, self.floor.db()
        client_id, _, secret = base64.b64decode(
            (req.get_header("Authorization") or " ").split(" ", 1)[1]).decode().partition(":")
        row = conn.execute("SELECT client_secret_hash, oauth, id, client_id FROM clients "
                           "WHERE client_id = ?", (client_id,)).fetchone()
        if row is None or not floor.secret_matches(row[0], secret):
            _json(resp, {"error": "invalid_client"}, falcon.HTTP_401)
            return
        scope = " ".join(json.loads(row[1])["scopes"])
        access = floor.sign({"sub": client_id, "client_id": client_id, "aud": [ISSUER],
                             "scope": scope}, typ="at+jwt", ttl=3600)
        floor.audit(conn, "oauth.token", client_id, {"grant": "client_credentials"},
                    user_id=None, client_address=req.remote_addr)
        _json(resp, {"access_token": access, "token_type": "Bearer", "expires_in": 3600,
                     "scope": scope})

    def _exchange(self, form: dict[str, str], resp: falcon.Response, remote_addr: str) -> None:
        floor, conn = self.floor, self.floor.db()
        client = conn.execute("SELECT id, oauth, client_id, client_secret_hash FROM clients "
                              "WHERE client_id = ?", (form.get("client_id"),)).fetchone()
        if client is None:
            _json(resp, {"error": "invalid_client"}, falcon.HTTP_401)
            return
        json.loads(client[1])  # its settings, as every token request reads them
        code_hash = _hash(form.get("code", ""))
        row = conn.execute("SELECT application_id, user_id, code_challenge, redirect_uri, "
                           "consumed_at, expires_at, scope, auth_time, amr, extra, * "
                           "FROM codes WHERE code_hash = ?", (code_hash,)).fetchone()
        verifier = form.get("code_verifier", "")
        challenge = _s256(verifier)
        if (row is None or row[4] is not None or row[5] <= time.time()
                or row[0] != client[0] or row[3] != form.get("redirect_uri")
                or row[2] != challenge):
            _json(resp, {"error": "invalid_grant"}, falcon.HTTP_400)
            return
        user = conn.execute(USER_BY["id"], (row[1],)).fetchone()
        amr, extra = json.loads(row[8]), json.loads(row[9])
        now, family = time.time(), str(uuid.uuid4())
        # recorded with the code (id and expiry), as the product does
        jtis = [{"jti": str(uuid.uuid4()), "exp": now + 3600} for _ in range(2)]
        client_id = form["client_id"]
        access = floor.sign({"sub": user[0], "client_id": client_id, "aud": [ISSUER],
                             "scope": row[6], "jti": jtis[0]["jti"]}, typ="at+jwt", ttl=3600)
        id_token = floor.sign({"sub": user[0], "aud": client_id, "sid": family,
                               "auth_time": int(row[7]), "amr": amr,
                               "preferred_username": user[1], "jti": jtis[1]["jti"]},
                              typ="JWT", ttl=3600)
        refresh = secrets.token_urlsafe(32)
        conn.execute("BEGIN IMMEDIATE")
        used = conn.execute("UPDATE codes SET consumed_at = ?, issued_jtis = ?, "
                            "refresh_family = ? WHERE code_hash = ? AND consumed_at IS NULL",
                            (now, json.dumps(jtis, separators=(",", ":")), family, code_hash))
        if used.rowcount != 1:
            conn.execute("ROLLBACK")
            _json(resp, {"error": "invalid_grant"}, falcon.HTTP_400)
            return
        conn.execute("INSERT INTO refresh_tokens (token_hash, family, application_id, user_id, "
                     "scope, auth_time, amr, extra, revoked, created_at, expires_at) VALUES "
                     "(?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
                     (_hash(refresh), family, client[0], user[0], row[6], row[7],
                      json.dumps(amr, separators=(",", ":")),
                      json.dumps(extra, separators=(",", ":")), now, now + 86400))
        floor.audit(conn, "oauth.token", client_id, {"grant": "authorization_code"},
                    user_id=user[0], client_address=remote_addr)
        conn.execute("COMMIT")
        _json(resp, {"access_token": access, "token_type": "Bearer", "expires_in": 3600,
                     "scope": row[6], "id_token": id_token, "refresh_token": refresh})


class FlowExecute:
    """Hot path: password sign-in through a flow, start then the `password` action."""

    def __init__(self, floor: Floor) -> None:
        self.floor = floor

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body, floor, conn = _body(req), self.floor, self.floor.db()
        if "executionId" not in body:
            execution = uuid.uuid4().hex
            now = time.time()
            conn.execute("INSERT INTO executions VALUES (?, ?, ?, ?, ?)",
                         (execution, body.get("applicationId"), "{}", now, now + 600))
            _json(resp, {"executionId": execution, "flowStatus": "INCOMPLETE",
                         "type": "VIEW", "data": {"actions": [{"id": "password"}]}})
            return
        execution, inputs = body["executionId"], body.get("inputs", {})
        if conn.execute("SELECT state FROM executions WHERE id = ?",
                        (execution,)).fetchone() is None:
            _json(resp, {"code": "unknown_execution"}, falcon.HTTP_400)
            return
        user = conn.execute(USER_BY["username"], (inputs.get("username"),)).fetchone()
        if not verify_password(user[6] if user else None, inputs.get("password", "")):
            _json(resp, {"executionId": execution, "flowStatus": "ERROR",
                         "failureReason": "invalid credentials"})
            return
        assertion = floor.sign({"sub": user[0], "aud": [ISSUER], "amr": ["pwd"]},
                               typ="assertion+jwt")
        conn.execute("DELETE FROM executions WHERE id = ?", (execution,))
        _json(resp, {"executionId": execution, "flowStatus": "COMPLETE",
                     "assertion": assertion})


class Mcp:
    """Hot path: /mcp tools/list: verify the bearer token, answer the (precomputed) tools."""

    def __init__(self, floor: Floor) -> None:
        self.floor = floor

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        token = (req.get_header("Authorization") or " ").split(" ", 1)[1]
        try:
            if jwt.get_unverified_header(token).get("typ") != "at+jwt":
                raise jwt.InvalidTokenError("typ")
            claims = jwt.decode(token, self.floor.public_key, algorithms=["ES256"],
                                audience=ISSUER, issuer=ISSUER)
            if "system" not in str(claims.get("scope", "")).split():
                raise jwt.InvalidTokenError("scope")
        except jwt.InvalidTokenError:
            _json(resp, {"code": "invalid_token"}, falcon.HTTP_401)
            return
        message = _body(req)
        _json(resp, {"jsonrpc": "2.0", "id": message.get("id"),
                     "result": {"tools": self.floor.mcp_tools}})


class BenchUsers:
    """Set-up only: users with passwords (argon2 hashes with the same profile)."""

    def __init__(self, floor: Floor) -> None:
        self.floor = floor

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body, conn = _body(req), self.floor.db()
        _add_user(conn, body["username"], password_hash=hash_password(body["password"]),
                  replace=True)
        _json(resp, {"id": body["username"]}, falcon.HTTP_201)


class BenchCodes:
    """Set-up only: ``count`` authorization codes for a user, with their PKCE verifiers."""

    def __init__(self, floor: Floor) -> None:
        self.floor = floor

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body, conn = _body(req), self.floor.db()
        _add_user(conn, body["userId"])
        application_id = conn.execute("SELECT id FROM clients WHERE client_id = ?",
                                      (body["clientId"],)).fetchone()[0]
        pairs, rows = [], []
        for _ in range(body["count"]):
            code, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(48)
            challenge = _s256(verifier)
            now = time.time()
            rows.append((_hash(code), application_id, body["userId"], body["redirectUri"],
                         challenge, float(int(now)), now, now + 600))
            pairs.append([code, verifier])
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO codes VALUES (?, ?, ?, ?, 'openid', NULL, ?, 'S256', ?, "
                         "'[\"pwd\"]', '{\"resources\":[]}', NULL, '[]', NULL, ?, ?)", rows)
        conn.execute("COMMIT")
        _json(resp, {"codes": pairs})


def create_app(floor: Floor) -> falcon.App:
    app = falcon.App()
    for path, resource in (("/health", Health), ("/register/passkey/start", RegisterStart),
                           ("/register/passkey/finish", RegisterFinish),
                           ("/auth/passkey/start", AuthStart),
                           ("/auth/passkey/finish", AuthFinish), ("/oauth2/token", Token),
                           ("/flow/execute", FlowExecute), ("/mcp", Mcp),
                           ("/bench/users", BenchUsers), ("/bench/codes", BenchCodes)):
        app.add_route(path, resource(floor))
    return app


def run_waitress(app: Any, options: dict[str, Any], threads: int) -> None:
    """waitress with the dispatcher and the batched reads `identityctl serve` gives it on
    SQLite: the floor shares the stack (its server, its threads), not the product's
    layers."""
    dispatcher = FinishingThreadDispatcher()
    dispatcher.set_thread_count(threads)
    server = waitress.create_server(app, **options, _dispatcher=dispatcher)
    read_in_batches(server)
    server.run()


def serve(floor: Floor, *, host: str, port: int, threads: int, workers: int,
          pin_cores: bool | str = "auto") -> None:
    """One waitress process, or ``workers`` forked ones accepting on one socket, each kept to
    a core as `identityctl serve` keeps its processes (``pin_cores``)."""
    app = create_app(floor)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(1024)
    options = {"threads": threads, "sockets": [listener], "connection_limit": 1000,
               "backlog": 1024}
    # As `identityctl serve` does (identityctl/server/heap.py): what exists now lives as long
    # as the process, so full collections need not walk it.
    gc.collect()
    gc.freeze()
    cores = cores_for(workers, pin_cores)
    if workers <= 1:
        if cores:
            keep_to(cores[0])
        run_waitress(app, options, threads)
        return
    children = []
    for slot in range(workers):
        pid = os.fork()
        if pid == 0:
            if cores:
                keep_to(cores[slot])
            signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
            floor._local = threading.local()  # no connection crosses a fork
            run_waitress(app, options, threads)
            os._exit(0)
        children.append(pid)

    def stop(signum: int, frame: object) -> None:
        for child in children:
            os.kill(child, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for child in children:
        os.waitpid(child, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--threads", type=int, default=4, help="waitress threads per process.")
    parser.add_argument("--workers", type=int, default=1, help="Forked server processes.")
    parser.add_argument("--pin-cores", choices=["auto", "true", "false"], default="auto",
                        help="Keep each process to one core, as serve's server.pin_cores.")
    parser.add_argument("--db", default="", help="SQLite file (default: a temporary one).")
    parser.add_argument("--rp-id", default=RP_ID_DEFAULT)
    parser.add_argument("--origin", default=ORIGIN_DEFAULT)
    parser.add_argument("--client-secret", default="floor-secret",
                        help=f"Secret of the client_credentials client {CLIENT_ID!r}.")
    parser.add_argument("--mcp-tools", default="",
                        help="JSON file: the tool list /mcp tools/list answers.")
    args = parser.parse_args()

    tools = json.loads(Path(args.mcp_tools).read_text()) if args.mcp_tools else []
    with tempfile.TemporaryDirectory(prefix="identityctl-floor-") as folder:
        floor = Floor(args.db or str(Path(folder) / "floor.db"), rp_id=args.rp_id,
                      origin=args.origin, client_secret=args.client_secret, mcp_tools=tools)
        serve(floor, host=args.host, port=args.port, threads=args.threads,
              workers=args.workers,
              pin_cores={"true": True, "false": False}.get(args.pin_cores, "auto"))


if __name__ == "__main__":
    main()
