"""Who is calling: the OAuth client of a request, and its authentication (RFC 6749 §2.3)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from identityctl.oauth import client_auth
from identityctl.oauth.client import Client
from identityctl.oauth.client_assertion import assertion_key_id, verify_client_assertion
from identityctl.oauth.client_documents import is_document_url, validate_document
from identityctl.oauth.consent import shown_host
from identityctl.oauth.discovery import TOKEN_PATH
from identityctl.oauth.errors import InvalidClient, OAuthError, UntrustedRedirect
from identityctl.oauth.parameters import Parameters
from identityctl.security import passwords
from identityctl.security.jwks import ASYMMETRIC_ALGORITHMS
from identityctl.services import audit, outbound, throttle
from identityctl.services import catalog as catalog_service
from identityctl.services.attempts import CredentialAttempt
from identityctl.services.catalog.applications import oauth_config
from identityctl.services.clients import resource_servers
from identityctl.services.clients.keys import client_jwks
from identityctl.services.context import ServiceContext
from identityctl.services.origin import RequestOrigin
from identityctl.store import catalog as catalog_store
from identityctl.store import replay


def client_of(application: dict[str, Any]) -> Client:
    """The OAuth client of an application."""
    return Client.from_config(application["id"], oauth_config(application),
                              allowed_user_types=application.get("allowedUserTypes") or (),
                              passkeys_only=bool(application.get("passkeysOnly")))


def find_client_application(ctx: ServiceContext, client_id: str, *,
                            origin: RequestOrigin) -> dict[str, Any] | None:
    """The application with this client id, or None. A client id that is an https URL is a
    client metadata document when the deployment takes them (``oauth.client_documents``): it
    is fetched for the request from ``client_address``, checked and kept as an application
    while its HTTP caching allows (a minute at least), then fetched again.

    Every fetch, a refused one too, counts toward the address's
    ``oauth.document_fetches_per_address``; a document that makes a new application is a
    registration and counts toward its ``oauth.registrations_per_address``, as
    ``/oauth2/register`` does. A fetch the process had no room for (503 upstream_busy)
    counts toward neither."""
    application = catalog_store.find_application_by_client_id(client_id)
    oauth = ctx.config.oauth
    if not (oauth.client_documents and is_document_url(client_id)):
        return application
    if application is not None and \
            oauth_config(application).get("documentExpiresAt", 0) > time.time():
        return application
    throttle.ensure_document_fetches_left(ctx, action=DOCUMENT_ACTION,
                                          origin=origin)
    if application is None:  # no allowance left: refused before it costs a fetch
        throttle.ensure_registrations_left(ctx, action=DOCUMENT_ACTION,
                                           origin=origin)
    return _from_document(ctx, client_id, application, origin)


def _from_document(ctx: ServiceContext, url: str, known: dict[str, Any] | None,
                   origin: RequestOrigin) -> dict[str, Any]:
    oauth = ctx.config.oauth
    try:
        fetched = outbound.fetch_json(url, outbound.FetchPolicy(
            timeout=oauth.client_documents_timeout, max_bytes=oauth.client_documents_max_bytes,
            allow_private=oauth.client_documents_allow_private,
            ca_bundle=oauth.client_documents_ca_bundle),
            client_address=origin.address)
        throttle.count_document_fetch(ctx, origin=origin)
        metadata = validate_document(fetched.document, url=url,
                                     allowed_scopes=resource_servers.registrable_scopes(ctx),
                                     default_scopes=tuple(oauth.registration_scopes))
    except outbound.FetchRefused as refused:
        throttle.count_document_fetch(ctx, origin=origin)
        audit.record(DOCUMENT_ACTION, "failure", origin=origin.acting_as(url),
                     details={"code": refused.code, "detail": refused.detail})
        raise UntrustedRedirect(f"The client's metadata document cannot be used: "
                                f"{refused.description}", code="client_document_refused") \
            from None
    except OAuthError as invalid:
        audit.record(DOCUMENT_ACTION, "failure", origin=origin.acting_as(url),
                     details={"code": invalid.code})
        raise UntrustedRedirect(f"The client's metadata document is not valid: "
                                f"{invalid.description}", code="client_document_refused") \
            from None
    if known is not None and oauth_config(known).get("publicClient") != (
            metadata.token_endpoint_auth_method == client_auth.NONE):
        # Its grants were made to a client of the other kind: not carried over silently.
        audit.record(DOCUMENT_ACTION, "failure", origin=origin.acting_as(url),
                     details={"code": "client_type_changed"})
        raise UntrustedRedirect(
            "The client's metadata document changed how the client authenticates (public or "
            "with its own keys). An administrator removes the client it described before "
            f"(identityctl app delete {known['id']}); then it is read anew.",
            code="client_document_refused")
    host = urlsplit(url).hostname
    document = {
        "name": f"{metadata.client_name} ({shown_host(host or '')}) "
                f"[{hashlib.sha256(url.encode()).hexdigest()[:8]}]",
        "description": f"Described by its client metadata document {url}",
        "inboundAuthConfig": [{"type": "oauth2", "config": metadata.oauth_config(url)}]}
    marks = {"clientDocument": True, "documentExpiresAt": time.time() + fetched.max_age,
             **({"logoUri": metadata.logo_uri} if metadata.logo_uri else {})}
    registrar = origin.acting_as("client-document:" + (host or ""))
    if known is None:
        throttle.count_registration(ctx, action=DOCUMENT_ACTION, origin=origin)
        application, _ = catalog_service.applications.create_application(
            document, origin=registrar, marks=marks)
    else:
        application = catalog_service.applications.update_application(
            {**document, "id": known["id"]}, origin=registrar, marks=marks)
    audit.record(DOCUMENT_ACTION, "success", origin=origin.acting_as(url),
                 details={"applicationId": application["id"], "maxAge": fetched.max_age})
    return application


def _check_assertion(ctx: ServiceContext, assertion: str, config: dict[str, Any],
                     endpoint: str, origin: RequestOrigin) -> None:
    """private_key_jwt: signed by one of the client's keys, for us, used once."""
    base, registered = ctx.config.base_url, config.get("tokenEndpointAuthSigningAlg")
    checked = verify_client_assertion(
        assertion, client_id=config["clientId"],
        jwks=client_jwks(ctx, config, kid=assertion_key_id(assertion),
                         origin=origin),
        audiences={ctx.config.issuer, base + TOKEN_PATH, base + endpoint}, now=time.time(),
        algorithms=(registered,) if registered else ASYMMETRIC_ALGORITHMS)
    if not replay.first_use("client_assertion", checked.client_id, checked.jti,
                            expires_at=checked.expires_at):
        raise InvalidClient("This client assertion was used before (its jti); sign a new one "
                            "for each request.", code="client_assertion_replayed")


class _VerifiedSecrets:
    """Recently verified client secrets, so client_credentials does not pay argon2 each time.

    Client secrets are 256-bit random values, for which a SHA-256 is as strong as argon2; the
    stored hash is part of the key, so a rotated secret misses at once. Only successes are
    kept, and only a bounded number of them.
    """

    def __init__(self, capacity: int = 1024) -> None:
        self._entries: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def matches(self, stored_hash: str | None, secret: str) -> bool:
        key = (stored_hash or "", hashlib.sha256(secret.encode()).hexdigest())
        with self._lock:
            if stored_hash and key in self._entries:
                self._entries.move_to_end(key)
                return True
        if not passwords.verify_password(stored_hash, secret):
            return False
        with self._lock:
            self._entries[key] = None
            if len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
        return True


_verified_secrets = _VerifiedSecrets()


@dataclass(slots=True)
class _KnownClient:
    """A client as authentication needs it: parsed, with its configuration and secret hash."""

    client: Client
    config: dict[str, Any]
    secret_hash: str | None


class _KnownClients:
    """The clients of recent requests, kept while no application changes anywhere.

    PERF: reading and parsing a client's application on every token request was a third of
    client authentication. Every change to an application, on any instance, raises the
    catalog's version in its own transaction (``catalog_store.catalog_version``); a lookup
    reads that version (one row) and answers with the client kept under the same version,
    else reads the application again. The version is read before the application, so a
    client is never kept under a version newer than itself: a change committed anywhere is
    seen by the next lookup everywhere. Unknown client ids are not kept; at most
    ``capacity`` clients are, the first kept leaving first.
    """

    def __init__(self, capacity: int = 1024) -> None:
        self._entries: dict[str, tuple[tuple[object, int], _KnownClient]] = {}
        self._capacity = capacity
        self._lock = threading.Lock()

    def find(self, client_id: str) -> _KnownClient | None:
        version = catalog_store.catalog_version()
        kept = self._entries.get(client_id)
        if kept is not None and kept[0] == version:
            return kept[1]
        found = catalog_store.find_oauth_client(client_id)
        if found is None:
            return None
        known = _KnownClient(
            client=Client.from_config(found.application_id, found.config,
                                      allowed_user_types=found.allowed_user_types,
                                      passkeys_only=found.passkeys_only),
            config=found.config, secret_hash=found.secret_hash)
        with self._lock:
            self._entries.pop(client_id, None)
            self._entries[client_id] = (version, known)
            if len(self._entries) > self._capacity:
                del self._entries[next(iter(self._entries))]
        return known


_known_clients = _KnownClients()


#: Audit event of fetching a client metadata document.
DOCUMENT_ACTION = "oauth.client_document"
#: Throttle action (and audit actor) for failed client authentication.
CLIENT_AUTH_ACTION = "oauth.client_auth"


def client_throttle_account(client_id: str) -> str:
    """The throttle account of a client id: namespaced, so a username that equals a client id
    (client ids are public) cannot lock the client out, nor the reverse."""
    return "oauth-client:" + client_id


def authenticate_client(ctx: ServiceContext, parameters: Parameters, authorization: str | None,
                         *, origin: RequestOrigin, endpoint: str = TOKEN_PATH) -> Client:
    """The client of a token, revocation, introspection or pushed authorization request
    (``endpoint``: its path, an audience a client assertion may name), authenticated.

    Failed authentication (unknown client, wrong secret, a bad or replayed assertion) counts
    against the client id and the client address (``services.throttle``); a blocked one is
    refused with 429 before any secret is checked.
    """
    presented = client_auth.presented_client(authorization=authorization, parameters=parameters)
    failed = "Unknown client, or wrong client credentials."
    with CredentialAttempt(ctx, action=CLIENT_AUTH_ACTION,
                           origin=origin) as attempt:
        attempt.actor = presented.client_id
        attempt.check(client_throttle_account(presented.client_id))
        attempt.at_stake()  # the secret presented is the named client's
        found = _known_clients.find(presented.client_id)
        if found is None:
            if presented.client_secret is not None:
                passwords.verify_password(None, presented.client_secret)  # a miss's cost
            attempt.fail("client_authentication_failed")
            raise presented.refuse(failed, code="client_authentication_failed")
        client = found.client
        client_auth.check_method(presented, registered_method=client.auth_method)
        if presented.assertion is not None:
            try:
                _check_assertion(ctx, presented.assertion, found.config, endpoint, origin)
            except InvalidClient as refusal:
                attempt.fail(refusal.code)
                raise
            attempt.succeeded()
        if presented.client_secret is not None:
            if not _verified_secrets.matches(found.secret_hash, presented.client_secret):
                attempt.fail("client_authentication_failed")
                raise presented.refuse(failed, code="client_authentication_failed")
            attempt.succeeded()
    return client
