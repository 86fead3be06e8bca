"""Configuration: one TOML file read with tomllib, validated into typed, frozen objects.

Every problem is reported as :class:`ConfigError` naming the file, the dotted key and what is
wrong, so a bad deployment fails at start and says how to fix itself.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import math
import os
import re
import tomllib
import types
import typing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from email.utils import parseaddr
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from identityctl.errors import ConfigError

CONFIG_ENV = "IDENTITYCTL_CONFIG"
DEFAULT_CONFIG_NAME = "config.toml"

USER_VERIFICATION = ("required", "preferred", "discouraged")
ATTESTATION = ("none", "indirect", "direct", "enterprise")
#: An AAGUID as WebAuthn and the FIDO metadata write it (a UUID, dashed).
AAGUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
RESIDENT_KEY = ("required", "preferred", "discouraged")
AUTHENTICATOR_ATTACHMENT = ("platform", "cross-platform")
SIGNING_ALGS = ("ES256", "RS256", "EdDSA")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
LOG_FORMATS = ("text", "json")


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8090
    base_url: str = "http://localhost:8090"
    threads: int = 8
    #: Processes `serve` runs (server/workers.py): "auto" is one per core the process may
    #: use, or a number.
    workers: int | str = "auto"
    #: Whether each `serve` process keeps to one core (server/affinity.py): "auto" (when the
    #: processes cover the cores evenly), true or false.
    pin_cores: bool | str = "auto"
    #: Proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (IPs or CIDRs).
    trusted_proxies: tuple[str, ...] = ()
    max_body_bytes: int = 64 * 1024
    #: One log line per request (off by default, as in gunicorn: the proxy in front usually
    #: logs requests, and the audit log records every security event either way).
    access_log: bool = False
    #: "text" (a line a person reads) or "json" (one JSON object per line, for a log
    #: collector); either way each request's line carries its request id.
    log_format: str = "text"


@dataclass(frozen=True)
class DatabaseConfig:
    url: str = "sqlite:///identityctl.db"
    #: Seconds a writer waits for a locked SQLite database before answering 503.
    busy_timeout: float = 5.0
    #: PostgreSQL: seconds a statement may run before it is cancelled (503 database_busy);
    #: 0 leaves the server's (or role's) setting.
    statement_timeout: float = 10.0
    #: PostgreSQL: seconds a statement waits for a lock before it is cancelled (503
    #: database_busy); 0 leaves the server's (or role's) setting.
    lock_timeout: float = 5.0
    #: PostgreSQL: seconds opening a connection may take (503 database_unavailable).
    connect_timeout: float = 5.0
    #: PostgreSQL: most connections one process opens (requests and MCP tool calls check one
    #: out and return it; /health has its own).
    pool_size: int = 10
    #: PostgreSQL: seconds an unused connection stays open before it is closed.
    pool_idle_timeout: float = 300.0
    #: PostgreSQL: seconds a request waits for a free connection before it answers 503
    #: database_busy.
    pool_timeout: float = 5.0


@dataclass(frozen=True)
class PasskeyConfig:
    rp_id: str = "localhost"
    rp_name: str = "identityctl"
    allowed_origins: tuple[str, ...] = ("http://localhost:8090",)
    timeout_ms: int = 300_000
    user_verification: str = "preferred"
    attestation: str = "none"
    resident_key: str = "preferred"
    authenticator_attachment: str = ""
    session_token_ttl: int = 300
    #: A sign-in assertion younger than this may enrol a passkey for the same user.
    enrolment_window: int = 300
    #: COSE algorithms offered in pubKeyCredParams, in order of preference.
    algorithms: tuple[str, ...] = ("ES256", "EdDSA", "RS256")
    #: The only authenticators (AAGUIDs) that may register passkeys; empty: any.
    aaguid_allow: tuple[str, ...] = ()
    #: Authenticators (AAGUIDs) that may not register passkeys.
    aaguid_deny: tuple[str, ...] = ()
    #: Registrations must prove their authenticator with an attestation that verifies
    #: against the FIDO metadata loaded by `identityctl passkey metadata load`.
    metadata: bool = False
    #: Related Origin Requests (WebAuthn L3 §5.11): origins on other sites whose pages use
    #: this rp_id's passkeys, published at /.well-known/webauthn.
    related_origins: tuple[str, ...] = ()

    @property
    def restricts_authenticators(self) -> bool:
        """Whether registrations are checked against an authenticator policy (AAGUID lists
        or FIDO metadata), which needs each registration's attestation."""
        return bool(self.aaguid_allow or self.aaguid_deny or self.metadata)

    @property
    def accepted_origins(self) -> tuple[str, ...]:
        """Every origin whose ceremonies and browser requests are accepted: the one rule
        for allowed_origins and related_origins alike."""
        return tuple(dict.fromkeys((*self.allowed_origins, *self.related_origins)))


@dataclass(frozen=True)
class OAuthConfig:
    issuer: str = ""
    code_ttl: int = 60
    access_token_ttl: int = 3600
    id_token_ttl: int = 3600
    refresh_token_ttl: int = 86_400
    assertion_ttl: int = 300
    signing_alg: str = "ES256"
    #: Dynamic Client Registration (RFC 7591) at /oauth2/register: "off"; "open" (any client
    #: may register itself); "token" (with an initial access token, `identityctl token
    #: --scope client_registration`).
    dynamic_registration: str = "off"
    #: The scopes a self-registered client may ask for.
    registration_scopes: tuple[str, ...] = ("openid", "profile", "email")
    #: Registrations one address may make per security.failure_window (client metadata
    #: documents that made a new application count too).
    registrations_per_address: int = 20
    #: Client metadata documents one address may have fetched per security.failure_window,
    #: refused ones included (a bound on the work strangers' URLs cost; never on
    #: /oauth2/register).
    document_fetches_per_address: int = 60
    #: A self-registered or document-described client unused this many days is removed
    #: (at every `serve` start and now and then at a registration).
    registration_idle_days: int = 30
    #: Client ID Metadata Documents: a client_id that is an https URL is fetched and
    #: describes the client (as a self-registered one; services/outbound.py hardens the fetch).
    client_documents: bool = False
    #: Seconds a fetch may take in all, and the largest document in bytes.
    client_documents_timeout: float = 5.0
    client_documents_max_bytes: int = 5120
    #: Development only: documents on private, loopback or link-local addresses.
    client_documents_allow_private: bool = False
    #: A PEM bundle of CAs to verify document hosts with instead of the system's (private
    #: deployments, tests); empty: the system's.
    client_documents_ca_bundle: str = ""
    #: Every authorization request must come through /oauth2/par (RFC 9126); an application
    #: can require it alone (requirePushedAuthorizationRequests).
    require_pushed_authorization_requests: bool = False
    #: DPoP (RFC 9449 §8): proofs must carry a nonce the server gave (DPoP-Nonce), which
    #: bounds how long a proof made in advance can be used.
    dpop_nonces: bool = False
    #: Device authorization (RFC 8628): how long a device's codes work, and the seconds its
    #: client waits between polls.
    device_code_ttl: int = 600
    device_poll_interval: int = 5


@dataclass(frozen=True)
class GateClientConfig:
    url: str = ""


@dataclass(frozen=True)
class McpConfig:
    enabled: bool = True
    audience: str = ""
    required_scope: str = "system"


@dataclass(frozen=True)
class AdminConfig:
    #: Serve the admin console at {base_url}/admin and its API at {base_url}/admin/api/v1.
    enabled: bool = True
    #: Audience a bearer token for the admin API must carry; empty means
    #: {base_url}/admin/api.
    audience: str = ""
    #: Scope a bearer token for the admin API must carry (the role ``admin`` grants it).
    required_scope: str = "admin"
    #: Destructive changes need a passkey sign-in at most this many seconds old (step-up).
    step_up_seconds: int = 300
    #: Mutating MCP tools propose their change instead of making it; an admin approves the
    #: exact change with a passkey in the console (or ``identityctl change approve``).
    approve_mcp_changes: bool = False
    #: A proposed change nobody approved within this many seconds expires.
    change_ttl: int = 7 * 86400


@dataclass(frozen=True)
class FlowConfig:
    execution_ttl: int = 600


@dataclass(frozen=True)
class SessionConfig:
    """The browser session at the identity service: single sign-on
    (services/accounts/sessions.py)."""

    #: A session unused this long ends (seconds).
    idle_timeout: int = 28_800
    #: A session ends this long after its sign-in, however much it is used (seconds).
    absolute_timeout: int = 604_800


@dataclass(frozen=True)
class DeliveriesConfig:
    """The outbox (services/delivery/outbox.py): back-channel logout notices, later mail and
    webhooks."""

    #: Seconds one delivery may take; an instance's claim on a message lasts three times as
    #: long, then another instance (or this one restarted) delivers it.
    timeout: int = 10
    #: A message still undelivered this many hours after it was queued is given up.
    give_up_hours: int = 24


@dataclass(frozen=True)
class OutboundConfig:
    """Fetches a request waits for (services/outbound.py): client metadata documents, a
    client's jwks_uri, an identity provider's discovery, keys, token and userinfo."""

    #: Most fetches of URLs a stranger chose (client metadata documents, a client's
    #: jwks_uri) one process makes at once, one at a time per client address; past it the
    #: request answers 503 upstream_busy at once, so slow servers hold a bounded share of
    #: the threads.
    concurrent_fetches: int = 2
    #: The same for requests to identity providers, which have slots of their own.
    concurrent_provider_fetches: int = 2
    #: Seconds one request to an identity provider may take in all (connecting, TLS,
    #: headers and body).
    provider_timeout: float = 10.0


@dataclass(frozen=True)
class MetricsConfig:
    """`GET /metrics` (Prometheus): answered to loopback addresses, to the networks in
    ``allow``, and to a request carrying ``Authorization: Bearer <token>``."""

    enabled: bool = True
    allow: tuple[str, ...] = ()
    token: str = ""


#: email.security: how the SMTP connection is protected.
SMTP_SECURITY = ("none", "starttls", "tls")


@dataclass(frozen=True)
class EmailConfig:
    """Outgoing mail over SMTP (services/delivery/mail.py), sent from the outbox. Without
    ``smtp_host`` no mail is sent: e-mail verification and recovery by e-mail are skipped
    or refused, and say so."""

    smtp_host: str = ""
    smtp_port: int = 587
    security: str = "starttls"
    username: str = ""
    #: A file holding the SMTP password (the password is never in this file).
    password_file: str = ""
    #: The From address, e.g. "Example Identity <identity@example.com>" (TOML key ``from``).
    sender: str = ""
    #: Seconds a one-time code sent by e-mail works.
    code_ttl: int = 600
    #: Wrong codes one flow execution may try before it ends.
    code_attempts: int = 5

    #: TOML keys that are Python keywords -> the field holding them.
    TOML_NAMES: typing.ClassVar[dict[str, str]] = {"from": "sender"}

    @property
    def enabled(self) -> bool:
        return bool(self.smtp_host)


@dataclass(frozen=True)
class SecurityConfig:
    """Brute-force throttling (services/throttle.py; the properties in docs/security.md)."""

    #: Failed attempts at one account from one client address within ``failure_window``
    #: before that address is refused for that account (only) for ``lockout_seconds``.
    max_failures_per_account: int = 10
    #: Failed attempts per client address, at any accounts, within ``failure_window`` before
    #: the address is refused for ``lockout_seconds``.
    max_failures_per_address: int = 50
    failure_window: int = 900
    lockout_seconds: int = 300
    #: Wrong passwords for one account from all addresses together within
    #: ``account_window`` before the account's password sign-in slows down to one attempt
    #: per ``account_slowdown_seconds`` (addresses it signed in from are exempt).
    max_password_guesses_per_account: int = 100
    account_window: int = 3600
    account_slowdown_seconds: int = 30
    #: How long an address where an account signed in with its password stays exempt.
    trusted_address_days: int = 30
    #: Passkey ceremonies started per client address within ``failure_window``.
    max_starts_per_address: int = 1000
    audit_retention_days: int = 90

    @property
    def most_failures_from_one_address(self) -> int:
        """The most failures one address can make at one account within ``account_window``:
        ``max_failures_per_account`` in each failure window it touches, plus one per
        ``lockout_seconds`` after that (the slow-down), plus one per request in flight."""
        windows = math.ceil(self.account_window / self.failure_window) + 1
        per_window = self.max_failures_per_account + math.ceil(self.failure_window
                                                                / self.lockout_seconds)
        return windows * per_window

    @property
    def most_password_guesses_per_account(self) -> int:
        """The bound on wrong passwords at one account per ``account_window``, all addresses
        together: the allowance, then one per ``account_slowdown_seconds``."""
        return self.max_password_guesses_per_account + math.ceil(
            self.account_window / self.account_slowdown_seconds)


@dataclass(frozen=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    database: DatabaseConfig = field(default_factory=DatabaseConfig)
    passkey: PasskeyConfig = field(default_factory=PasskeyConfig)
    oauth: OAuthConfig = field(default_factory=OAuthConfig)
    gate_client: GateClientConfig = field(default_factory=GateClientConfig)
    mcp: McpConfig = field(default_factory=McpConfig)
    admin: AdminConfig = field(default_factory=AdminConfig)
    flow: FlowConfig = field(default_factory=FlowConfig)
    session: SessionConfig = field(default_factory=SessionConfig)
    deliveries: DeliveriesConfig = field(default_factory=DeliveriesConfig)
    outbound: OutboundConfig = field(default_factory=OutboundConfig)
    email: EmailConfig = field(default_factory=EmailConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    security: SecurityConfig = field(default_factory=SecurityConfig)
    #: File the configuration came from ("" when built in code); relative paths resolve here.
    source: str = ""

    @property
    def base_url(self) -> str:
        return self.server.base_url.rstrip("/")

    @property
    def issuer(self) -> str:
        return (self.oauth.issuer or self.base_url).rstrip("/")

    @property
    def gate_url(self) -> str:
        return (self.gate_client.url or f"{self.base_url}/gate").rstrip("/")

    @property
    def gate_is_hosted(self) -> bool:
        """The sign-in page is on this service's origin, so its requests carry its cookies."""
        gate, base = urlsplit(self.gate_url), urlsplit(self.base_url)
        return (gate.scheme.lower(), gate.netloc.lower()) == (base.scheme.lower(),
                                                             base.netloc.lower())

    @property
    def mcp_audience(self) -> str:
        return self.mcp.audience or f"{self.base_url}/mcp"

    @property
    def admin_audience(self) -> str:
        return self.admin.audience or f"{self.base_url}/admin/api"

    def resolve(self, name: str) -> Path:
        """A path from the configuration: relative ones are relative to the file."""
        path = Path(name)
        if path.is_absolute() or not self.source:
            return path
        return Path(self.source).resolve().parent / path

    @property
    def database_url(self) -> str:
        """The database URL with a relative SQLite path resolved against the config file."""
        url = self.database.url
        prefix = "sqlite:///"
        if url.startswith(prefix) and self.source and not Path(url[len(prefix):]).is_absolute():
            return prefix + str(Path(self.source).resolve().parent / url[len(prefix):])
        return url

    @property
    def database_shown(self) -> str:
        """The database URL as output may show it: its password (if any) as ``***``."""
        parts = urlsplit(self.database_url)
        if parts.password is None:
            return self.database_url
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return parts._replace(netloc=netloc).geturl()


SECTIONS = tuple(f.name for f in dataclasses.fields(Config) if f.name != "source")


def _coerce(path: str, key: str, value: object, hint: object) -> object:
    """Check one TOML value against a dataclass field's type."""
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ConfigError(path, key, "must be a list of strings")
        return tuple(value)
    if isinstance(hint, types.UnionType):  # `int | str`: any of them, checked later
        accepted: Any = typing.get_args(hint)
        # bool is an int in Python: a bool only where the union names bool itself.
        if (isinstance(value, bool) and bool not in accepted) \
                or not isinstance(value, accepted):
            names = " or ".join(kind.__name__ for kind in accepted)
            raise ConfigError(path, key, f"must be of type {names}, got {value!r}")
        return value
    accepted = (int, float) if hint is float else hint
    # bool is an int in Python, but `port = true` is still a mistake.
    if isinstance(value, bool) != (hint is bool) or not isinstance(value, accepted):
        raise ConfigError(path, key, f"must be of type {hint.__name__}, got {value!r}")
    return float(value) if hint is float else value


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """"did you mean X?" for the known key nearest a misspelt one, or "" when none is near."""
    near = difflib.get_close_matches(key, list(known), n=1)
    return f"did you mean {near[0]}?" if near else ""


def _unknown(path: str, key: str, known: Iterable[str], what: str) -> ConfigError:
    hint = did_you_mean(key.rsplit(".", 1)[-1], known)
    return ConfigError(path, key, f"unknown {what}; " + (
        hint or f"the {what}s are {', '.join(sorted(known))}"))


def _section(path: str, name: str, cls: type, raw: object,
             problems: list[ConfigError]) -> object:
    """The section's settings; a key that is not one, or a value of the wrong type, is added
    to ``problems`` and left at its default, so one check reports every problem."""
    if not isinstance(raw, dict):
        problems.append(ConfigError(path, name, "must be a table"))
        return cls()
    hints = typing.get_type_hints(cls)
    toml_names = getattr(cls, "TOML_NAMES", {})
    known = ({f.name for f in dataclasses.fields(cls)} - set(toml_names.values())) | set(toml_names)
    values = {}
    for key, value in raw.items():
        if key not in known:
            problems.append(_unknown(path, f"{name}.{key}", known, "key"))
            continue
        field_name = toml_names.get(key, key)
        try:
            values[field_name] = _coerce(path, f"{name}.{key}", value, hints[field_name])
        except ConfigError as wrong:
            problems.append(wrong)
    return cls(**values)


def _require_positive(path: str, key: str, value: int | float) -> Iterator[ConfigError]:
    if value <= 0:
        yield ConfigError(path, key, f"must be greater than 0, got {value}")


#: oauth.dynamic_registration: who may register a client at /oauth2/register.
DYNAMIC_REGISTRATION = ("off", "open", "token")


def _require_choice(path: str, key: str, value: str,
                    choices: tuple[str, ...]) -> Iterator[ConfigError]:
    if value not in choices:
        yield ConfigError(path, key, f"must be one of {', '.join(choices)}; got {value!r}")


def _require_url(path: str, key: str, value: str) -> Iterator[ConfigError]:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        yield ConfigError(path, key, f"must be an absolute http(s) URL, got {value!r}")


#: A host name as browsers serialize it in an origin: lower-case ASCII labels (an
#: internationalized name in its xn-- form), no trailing dot, no wildcard.
_HOST_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*")


def origin_form_problem(origin: str) -> str | None:
    """Why ``origin`` is not written as a browser sends it (``scheme://host[:port]``, lower
    case, no user, path, default port or trailing dot), or None. Ceremonies compare origins
    as written, so any other spelling would match nothing, or, read leniently elsewhere,
    something else."""
    try:
        parts = urlsplit(origin)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # an unclosed IPv6 bracket, a port out of range
        parts, host, port = urlsplit(""), "", -1
    default = {"http": 80, "https": 443}.get(parts.scheme)
    written = f"{parts.scheme}://{f'[{host}]' if ':' in host else host}" \
        + (f":{port}" if port and port != default else "")
    if default is None or not host or origin != written or port == -1:
        return f"{origin!r} is not an origin as browsers write it (scheme://host[:port], " \
               "lower case, no path, user or default port)"
    if ":" not in host and not _HOST_NAME.fullmatch(host):
        return f"{origin!r} has no valid host name (ASCII letters, digits and hyphens; an " \
               "internationalized name in its xn-- form; no trailing dot or wildcard)"
    return None


def check_origin(origin: str, rp_id: str) -> str | None:
    """Why ``origin`` cannot be a WebAuthn origin for ``rp_id``, or None when it can."""
    problem = origin_form_problem(origin)
    if problem:
        return problem
    parts = urlsplit(origin)
    host = parts.hostname or ""
    if parts.scheme == "http" and host not in LOCAL_HOSTS:
        return f"{origin!r} uses plain http; WebAuthn needs https except on localhost"
    if host != rp_id and not host.endswith("." + rp_id):
        return f"host of {origin!r} is neither rp_id {rp_id!r} nor a subdomain of it"
    return None


#: WebAuthn L3 §5.11.1: a browser reads at most this many distinct registrable-domain
#: labels of a /.well-known/webauthn list and ignores the origins after them.
MAX_RELATED_LABELS = 5


def related_origin_problems(origins: tuple[str, ...]) -> Iterator[tuple[int, str]]:
    """(index, why) for each entry of ``origins`` a browser would not use as a related
    origin: not an https origin (http only on loopback), or past the label limit."""
    labels: list[str] = []
    for index, origin in enumerate(origins):
        problem = origin_form_problem(origin)
        if problem:
            yield index, problem
            continue
        parts = urlsplit(origin)
        host = parts.hostname or ""
        if parts.scheme == "http" and not _loopback(host):
            yield index, f"{origin!r} uses plain http; only https (or http on localhost or a " \
                         "loopback address, for development) can be a related origin"
            continue
        label = registrable_label(host)
        if label is None or label in labels:
            continue
        labels.append(label)
        if len(labels) > MAX_RELATED_LABELS:
            yield index, (f"{origin!r} adds a sixth registrable-domain label ({label!r} after "
                          f"{', '.join(labels[:MAX_RELATED_LABELS])}); browsers read at "
                          f"most {MAX_RELATED_LABELS} (WebAuthn L3 §5.11) and ignore the rest")


def _loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def registrable_label(host: str) -> str | None:
    """The label a browser counts for ``host``: its registrable domain (eTLD+1, by the
    Public Suffix List with its private section) without the public suffix, e.g.
    ``example`` for ``shop.example.co.uk``; None for a host without one (an IP address,
    localhost)."""
    import tldextract  # PERF: read only when related origins are configured

    # The snapshot bundled with the package: no download at start or ever.
    parts = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None,
                                  include_psl_private_domains=True)(host)
    return parts.domain if parts.suffix and parts.domain else None


def _validate(path: str, config: Config) -> Iterator[ConfigError]:
    """Every problem of the settings' values (each key's, and those between keys)."""
    server, passkey, oauth = config.server, config.passkey, config.oauth
    if not 0 < server.port < 65536:
        yield ConfigError(path, "server.port", f"must be 1-65535, got {server.port}")
    # Every number in the file is a count, a size or a duration: none may be zero or less.
    for section in SECTIONS:
        for item in dataclasses.fields(getattr(config, section)):
            value = getattr(getattr(config, section), item.name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                yield from _require_positive(path, f"{section}.{item.name}", value)
    security = config.security
    if security.max_password_guesses_per_account <= security.most_failures_from_one_address:
        yield ConfigError(path, "security.max_password_guesses_per_account", (
            f"must be more than one address can fail at one account per account_window "
            f"({security.most_failures_from_one_address} with these settings), or one address "
            f"alone could slow down the account's password sign-in for everybody"))
    yield from _require_choice(path, "server.log_format", server.log_format, LOG_FORMATS)
    if server.pin_cores != "auto" and not isinstance(server.pin_cores, bool):
        yield ConfigError(path, "server.pin_cores", f'must be "auto", true or false, got '
                          f"{server.pin_cores!r}")
    if server.workers != "auto" and not isinstance(server.workers, int):
        yield ConfigError(path, "server.workers", f'must be "auto" (one per core) or a '
                          f"number, got {server.workers!r}")
    yield from _require_url(path, "server.base_url", server.base_url)
    for index, proxy in enumerate(server.trusted_proxies):
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            yield ConfigError(path, f"server.trusted_proxies[{index}]",
                              f"{proxy!r} is not an IP address or CIDR network")
    url = config.database.url
    if not url.startswith(("sqlite:///", "postgresql://", "postgres://")):
        yield ConfigError(path, "database.url",
                          f"must start with sqlite:/// or postgresql://, got {url!r}")
    yield from _require_positive(path, "database.connect_timeout",
                                 config.database.connect_timeout)
    for key in ("statement_timeout", "lock_timeout"):
        if getattr(config.database, key) < 0:
            yield ConfigError(path, f"database.{key}", "must be 0 (the server's setting) or "
                              f"more, got {getattr(config.database, key)}")
    if not passkey.rp_id or "/" in passkey.rp_id or ":" in passkey.rp_id:
        yield ConfigError(path, "passkey.rp_id",
                          f"must be a bare domain such as example.com, got {passkey.rp_id!r}")
    if not passkey.allowed_origins:
        yield ConfigError(path, "passkey.allowed_origins", "must list at least one origin")
    for index, origin in enumerate(passkey.allowed_origins):
        problem = check_origin(origin, passkey.rp_id)
        if problem:
            yield ConfigError(path, f"passkey.allowed_origins[{index}]", problem)
    for index, problem in related_origin_problems(passkey.related_origins):
        yield ConfigError(path, f"passkey.related_origins[{index}]", problem)
    yield from _require_choice(path, "passkey.user_verification", passkey.user_verification,
                               USER_VERIFICATION)
    yield from _require_choice(path, "passkey.attestation", passkey.attestation, ATTESTATION)
    yield from _validate_authenticator_policy(path, passkey)
    yield from _require_choice(path, "passkey.resident_key", passkey.resident_key, RESIDENT_KEY)
    yield from _require_choice(path, "passkey.authenticator_attachment",
                               passkey.authenticator_attachment, ("", *AUTHENTICATOR_ATTACHMENT))
    if not passkey.algorithms:
        yield ConfigError(path, "passkey.algorithms", "must list at least one algorithm")
    for index, alg in enumerate(passkey.algorithms):
        yield from _require_choice(path, f"passkey.algorithms[{index}]", alg, SIGNING_ALGS)
    yield from _require_choice(path, "oauth.signing_alg", oauth.signing_alg, SIGNING_ALGS)
    yield from _require_choice(path, "oauth.dynamic_registration", oauth.dynamic_registration,
                               DYNAMIC_REGISTRATION)
    yield from _validate_email(path, config)
    for index, network in enumerate(config.metrics.allow):
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError:
            yield ConfigError(path, f"metrics.allow[{index}]",
                              f"{network!r} is not an IP address or CIDR network")
    for key, value in (("oauth.issuer", oauth.issuer), ("gate_client.url", config.gate_client.url),
                       ("mcp.audience", config.mcp.audience),
                       ("admin.audience", config.admin.audience)):
        if value:
            yield from _require_url(path, key, value)


def _validate_authenticator_policy(path: str, passkey: PasskeyConfig) -> Iterator[ConfigError]:
    """The AAGUID lists and the metadata requirement (docs/passkey-api.md, "Which
    authenticators may register")."""
    for key in ("aaguid_allow", "aaguid_deny"):
        for index, aaguid in enumerate(getattr(passkey, key)):
            if not AAGUID.fullmatch(aaguid):
                yield ConfigError(path, f"passkey.{key}[{index}]", f"{aaguid!r} is not an AAGUID "
                                  f"(a UUID such as 08987058-cadc-4b81-b6e1-30de50dcbe96)")
    if passkey.aaguid_allow and passkey.aaguid_deny:
        yield ConfigError(path, "passkey.aaguid_deny", "set passkey.aaguid_allow or "
                          "passkey.aaguid_deny, not both (an allow list refuses every other "
                          "authenticator already)")
    if passkey.restricts_authenticators and passkey.attestation not in ("direct", "enterprise"):
        key = "passkey.metadata" if passkey.metadata else (
            "passkey.aaguid_allow" if passkey.aaguid_allow else "passkey.aaguid_deny")
        yield ConfigError(path, key, f'needs passkey.attestation = "direct" or "enterprise", '
                          f"got {passkey.attestation!r} (without attestation a browser may "
                          f"send an AAGUID of zeros)")


def _validate_email(path: str, config: Config) -> Iterator[ConfigError]:
    email = config.email
    yield from _require_choice(path, "email.security", email.security, SMTP_SECURITY)
    if not 0 < email.smtp_port < 65536:
        yield ConfigError(path, "email.smtp_port", f"must be 1-65535, got {email.smtp_port}")
    if not email.enabled:
        return
    _name, address = parseaddr(email.sender)
    if "@" not in address:
        yield ConfigError(path, "email.from", "must be an address such as "
                          f"\"Example Identity <identity@example.com>\", got {email.sender!r}")
    if email.password_file and not email.username:
        yield ConfigError(path, "email.username", "must be set when email.password_file is")
    if email.password_file:
        secret = config.resolve(email.password_file)
        if not secret.is_file():
            yield ConfigError(path, "email.password_file", f"{str(secret)!r} is not a file")


def parse_config(data: dict, path: str = "<config>") -> Config:
    """Validate an already-parsed TOML document; :class:`ConfigProblems` names every problem
    (the first is its ``key`` and ``problem``)."""
    sections = {}
    problems: list[ConfigError] = []
    hints = typing.get_type_hints(Config)
    for name, raw in data.items():
        if name not in SECTIONS:
            problems.append(_unknown(path, name, SECTIONS, "section"))
            continue
        sections[name] = _section(path, name, hints[name], raw, problems)
    config = Config(**sections, source=path if path != "<config>" else "")
    problems += _validate(path, config)
    if problems:
        raise ConfigProblems(problems)
    return config


class ConfigProblems(ConfigError):
    """Every problem of a configuration file, so that one `identityctl config check` lists
    them all; as a :class:`ConfigError`, the first one."""

    def __init__(self, problems: list[ConfigError]) -> None:
        first = problems[0]
        super().__init__(first.path, first.key, first.problem)
        self.problems = problems
        self.args = ("\n".join(str(problem) for problem in problems),)


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate the TOML file at ``path``."""
    path = str(path)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(path, "(file)", "does not exist; run `identityctl init` first") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, "(syntax)", str(exc)) from None
    return parse_config(data, path)


def resolve_config_path(explicit: str | None) -> Path:
    """--config wins, then $IDENTITYCTL_CONFIG, then ./config.toml."""
    return Path(explicit or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_NAME)
