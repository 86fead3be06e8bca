"""The OAuth 2.0 / OpenID Connect provider: authorize, hand-off, tokens, userinfo, logout.

Protocol checks live in ``identityctl.oauth`` (pure); this module adds what needs the store,
the token service and the flow engine, and writes the audit trail. Docs: docs/oauth.md.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import urlencode

from identityctl.errors import BadRequest, IdentityError, Unauthorized
from identityctl.oauth import client_auth, pkce
from identityctl.oauth.authorization import (
    error_response_url,
    success_response_url,
    trusted_redirect_uri,
    validate_request,
    with_query,
)
from identityctl.oauth.claims import (
    OPENID,
    SignIn,
    access_token_claims,
    id_token_claims,
    user_claims,
)
from identityctl.oauth.client import (
    AUTHORIZATION_CODE,
    CLIENT_CREDENTIALS,
    REFRESH_TOKEN,
    Client,
)
from identityctl.oauth.discovery import provider_metadata
from identityctl.oauth.errors import (
    AccessDenied,
    InsufficientScope,
    InvalidGrant,
    InvalidToken,
    OAuthError,
    ServerError,
    UnauthorizedClient,
    UnsupportedGrantType,
    UntrustedRedirect,
)
from identityctl.oauth.parameters import (
    Parameters,
    granted_scope,
    parse_scope,
    read_parameters,
    require,
)
from identityctl.security import passwords
from identityctl.security.secrets import new_token, token_hash
from identityctl.security.tokens import ACCESS_TOKEN_TYP, ID_TOKEN_TYP, LEEWAY_SECONDS
from identityctl.services import flow_execution, throttle
from identityctl.services.catalog import oauth_config
from identityctl.services.context import ServiceContext
from identityctl.store import audit, directory
from identityctl.store import catalog as catalog_store
from identityctl.store import keys as key_store
from identityctl.store import oauth as oauth_store
from identityctl.store.db import transaction
from identityctl.store.directory import UserRecord
from identityctl.store.models import new_id
from identityctl.store.oauth import IssuedToken, NewRefreshToken

RawParameters = Mapping[str, str | list[str]]
BEARER_REALM = 'Bearer realm="identityctl"'


# --- metadata -------------------------------------------------------------------------------


def jwks() -> dict[str, Any]:
    """The published keys, read from the store on each request (not the signer's cache), so
    a key rotated on any instance is published everywhere at once."""
    return {"keys": [key.public_jwk for key in key_store.published_keys()]}


def metadata(ctx: ServiceContext) -> dict[str, Any]:
    """OIDC discovery / RFC 8414 metadata; signing algorithms are those of the JWKS keys."""
    algorithms = sorted({key["alg"] for key in jwks()["keys"]})
    return provider_metadata(issuer=ctx.config.issuer, base_url=ctx.config.base_url,
                             signing_algorithms=algorithms)


# --- clients --------------------------------------------------------------------------------


def _client_of(application: dict[str, Any]) -> Client:
    return Client.from_config(application["id"], oauth_config(application))


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


#: Throttle action (and audit actor) for failed client authentication.
CLIENT_AUTH_ACTION = "oauth.client_auth"


def client_throttle_account(client_id: str) -> str:
    """The throttle account of a client id: namespaced, so a username that equals a client id
    (client ids are public) cannot lock the client out, nor the reverse."""
    return "oauth-client:" + client_id


def _authenticate_client(ctx: ServiceContext, parameters: Parameters, authorization: str | None,
                         *, client_address: str = "") -> Client:
    """The client of a token, revocation or introspection request, authenticated.

    Failed authentication (unknown client, wrong secret) counts against the client id and the
    client address (``services.throttle``); a blocked one is refused with 429 before any
    secret is checked.
    """
    presented = client_auth.presented_client(authorization=authorization, parameters=parameters)
    account = client_throttle_account(presented.client_id)
    allowed = throttle.ensure_allowed(ctx, action=CLIENT_AUTH_ACTION, account=account,
                                      client_address=client_address)
    found = catalog_store.find_oauth_client(presented.client_id)
    failed = "Unknown client, or wrong client credentials."
    if found is None:
        if presented.client_secret is not None:
            passwords.verify_password(None, presented.client_secret)  # same cost as a miss
        throttle.record_failure(ctx, action=CLIENT_AUTH_ACTION, account=account,
                                client_address=client_address)
        raise presented.refuse(failed, code="client_authentication_failed")
    client = Client.from_config(found.application_id, found.config)
    client_auth.check_method(presented, registered_method=client.auth_method)
    if presented.client_secret is not None:
        if not _verified_secrets.matches(found.secret_hash, presented.client_secret):
            throttle.record_failure(ctx, action=CLIENT_AUTH_ACTION, account=account,
                                    client_address=client_address)
            audit.record(CLIENT_AUTH_ACTION, "failure", actor=client.client_id,
                         client_address=client_address)
            raise presented.refuse(failed, code="client_authentication_failed")
        throttle.record_success(allowed)
    return client


# --- authorization --------------------------------------------------------------------------


def authorize(ctx: ServiceContext, raw: RawParameters, *, client_address: str = "") -> str:
    """Where to send the browser for ``GET /oauth2/authorize``.

    The hosted UI (with the stored request's opaque id) when the request is valid; the
    client's redirect URI with an error once the redirect URI is trusted; an
    :class:`UntrustedRedirect` (shown as a page) before that.
    """
    try:
        parameters = read_parameters(raw)
    except OAuthError as error:
        raise UntrustedRedirect(error.description, code=error.code) from error
    client_id = parameters.get("client_id")
    if client_id is None:
        raise UntrustedRedirect("client_id is required.", code="client_id_missing")
    application = catalog_store.find_application_by_client_id(client_id)
    if application is None:
        raise UntrustedRedirect(f"No application has client id {client_id!r}.",
                                code="unknown_client")
    client = _client_of(application)
    redirect_uri = trusted_redirect_uri(client, parameters.get("redirect_uri"))
    state = parameters.get("state")
    try:
        request = validate_request(client, parameters, redirect_uri=redirect_uri)
        request_id = new_token(24)
        oauth_store.create_authorization_request(
            request_id=request_id, application_id=client.application_id,
            redirect_uri=redirect_uri, scope=" ".join(request.scope), state=state,
            nonce=request.nonce, code_challenge=request.code_challenge,
            code_challenge_method=request.code_challenge_method,
            extra={"resources": list(request.resources)},
            expires_at=time.time() + ctx.config.flow.execution_ttl)
        first_step = _start_sign_in(ctx, client, request_id, client_address)
    except OAuthError as error:
        audit.record("oauth.authorize", "failure", actor=client.client_id,
                     client_address=client_address, details={"error": error.code})
        return error_response_url(redirect_uri, error, state=state, issuer=ctx.config.issuer)
    execution_id = str(first_step["executionId"])
    oauth_store.update_authorization_request_extra(request_id, {
        "resources": list(request.resources), "executionId": execution_id,
        "firstStep": first_step})
    return f"{ctx.config.gate_url}/signin?" + urlencode(
        {"authId": request_id, "applicationId": client.application_id,
         "executionId": execution_id})


def _start_sign_in(ctx: ServiceContext, client: Client, request_id: str,
                   client_address: str) -> dict[str, Any]:
    """Start the application's AUTHENTICATION flow for the request; its first step."""
    try:
        return flow_execution.start_execution(
            ctx, application_id=client.application_id, flow_type="AUTHENTICATION",
            auth_request_id=request_id, client_address=client_address)
    except IdentityError as error:
        raise ServerError(f"The application's sign-in flow could not start: "
                          f"{error.description or error.message}",
                          code="sign_in_unavailable") from error


def pending_first_step(*, auth_id: str, application_id: str,
                       execution_id: str) -> dict[str, Any] | None:
    """For the hosted UI: the flow step authorize started, while the request is pending.

    None when the page is not for that execution (the UI then starts a fresh one).
    """
    pending = oauth_store.find_authorization_request(auth_id)
    if pending is None or pending.application_id != application_id:
        raise UntrustedRedirect("This sign-in link has expired or was already used. Return to "
                                "the application and sign in again.",
                                code="authorization_request_invalid")
    if not execution_id or pending.extra.get("executionId") != execution_id:
        return None
    return pending.extra.get("firstStep")


def complete_authorization(ctx: ServiceContext, *, auth_id: str, assertion: str,
                           client_address: str = "") -> str:
    """The hand-off from the hosted UI: a sign-in assertion for a pending request.

    Returns the client's redirect URI with a one-time code (or ``access_denied``). The
    request and the assertion are both single-use.
    """
    claims = ctx.tokens.verify_assertion(assertion)
    pending = oauth_store.find_authorization_request(auth_id)
    if pending is None:
        raise BadRequest("The sign-in request is unknown, expired or already completed; "
                         "start again from the application.", code="authorization_request_invalid")
    if not oauth_store.use_once(IssuedToken(jti=str(claims["jti"]),
                                            expires_at=float(claims["exp"]))):
        raise Unauthorized("This sign-in assertion was already used.", code="assertion_reused")
    request = oauth_store.consume_authorization_request(auth_id)
    if request is None:
        raise BadRequest("The sign-in request was completed by another tab.",
                         code="authorization_request_invalid")
    application = catalog_store.get_application(request.application_id)
    user = directory.find_user_by_id(str(claims["sub"]))
    issuer = ctx.config.issuer
    refusal = _user_refusal(user, application)
    if refusal is not None:
        audit.record("oauth.authorize", "denied", actor=oauth_config(application)["clientId"],
                     user_id=user.id if user else None, client_address=client_address,
                     details={"reason": refusal})
        return error_response_url(request.redirect_uri, AccessDenied(refusal),
                                  state=request.state, issuer=issuer)
    code = new_token()
    oauth_store.create_code(
        code_hash=token_hash(code), application_id=request.application_id, user_id=user.id,
        redirect_uri=request.redirect_uri, scope=request.scope, nonce=request.nonce,
        code_challenge=request.code_challenge,
        code_challenge_method=request.code_challenge_method,
        auth_time=float(claims.get("auth_time") or claims["iat"]),
        amr=list(claims.get("amr") or []), extra={"resources": request.extra.get("resources", [])},
        expires_at=time.time() + ctx.config.oauth.code_ttl)
    audit.record("oauth.authorize", "success", actor=oauth_config(application)["clientId"],
                 user_id=user.id, client_address=client_address)
    return success_response_url(request.redirect_uri, code=code, state=request.state,
                                issuer=issuer)


def _user_refusal(user: UserRecord | None, application: dict[str, Any]) -> str | None:
    """Why this user may not get tokens for this application, or None."""
    if user is None:
        return "The user no longer exists."
    if user.status != "active" or (user.locked_until or 0) > time.time():
        return "The account is disabled or locked."
    allowed = application.get("allowedUserTypes") or []
    if allowed and user.user_type not in allowed and user.user_type_id not in allowed:
        return f"Users of type {user.user_type!r} may not use this application."
    return None


# --- token endpoint -------------------------------------------------------------------------


@dataclass(slots=True)
class _Issue:
    """What one token response hands out."""

    response: dict[str, Any]
    #: JWTs a replayed code must revoke.
    issued: list[IssuedToken]
    access_token: IssuedToken
    refresh_token: str | None


def token(ctx: ServiceContext, raw: RawParameters, *, authorization: str | None,
          client_address: str = "") -> dict[str, Any]:
    """``POST /oauth2/token``: the token response of RFC 6749 §5.1 (OIDC: with id_token)."""
    parameters = read_parameters(raw)
    grant_type = require(parameters, "grant_type")
    grant = _GRANTS.get(grant_type)
    if grant is None:
        raise UnsupportedGrantType(f"grant_type {grant_type!r} is not supported (supported: "
                                   f"{', '.join(_GRANTS)}).", code="grant_type_unsupported")
    client = _authenticate_client(ctx, parameters, authorization,
                                  client_address=client_address)
    try:
        client.require_grant(grant_type)
        return grant(ctx, client, parameters, client_address)
    except OAuthError as refusal:
        audit.record("oauth.token", "failure", actor=client.client_id,
                     client_address=client_address,
                     details={"grantType": grant_type, "error": refusal.code})
        raise


def _audience(requested: tuple[str, ...], *, authorized: list[str], issuer: str) -> list[str]:
    """RFC 8707: the token's audience is the resources asked for (within those authorized)."""
    if authorized:
        outside = [resource for resource in requested if resource not in authorized]
        if outside:
            raise InvalidGrant(f"resource {outside[0]!r} was not part of the authorization.",
                               code="resource_not_authorized")
    return list(requested or authorized or [issuer])


def _issue(ctx: ServiceContext, client: Client, *, subject: str, scope: tuple[str, ...],
           audience: list[str], sign_in: SignIn | None = None, user: UserRecord | None = None,
           nonce: str | None = None, session_id: str | None = None,
           with_refresh_token: bool = False) -> _Issue:
    oauth, tokens, now = ctx.config.oauth, ctx.tokens, time.time()
    access_ttl = client.ttl("accessTokenTtl", oauth.access_token_ttl)
    access = IssuedToken(jti=new_id(), expires_at=now + access_ttl)
    response: dict[str, Any] = {
        "access_token": tokens.sign(
            access_token_claims(subject=subject, client_id=client.client_id, scope=scope,
                                audience=audience, jti=access.jti, sign_in=sign_in,
                                grant_id=session_id),
            typ=ACCESS_TOKEN_TYP, ttl=access_ttl),
        "token_type": "Bearer", "expires_in": access_ttl, "scope": " ".join(scope)}
    issued = [access]
    if OPENID in scope and sign_in is not None and user is not None and session_id:
        id_ttl = client.ttl("idTokenTtl", oauth.id_token_ttl)
        id_token = IssuedToken(jti=new_id(), expires_at=now + id_ttl)
        response["id_token"] = tokens.sign(
            id_token_claims(sign_in=sign_in, client_id=client.client_id, nonce=nonce,
                            session_id=session_id, jti=id_token.jti,
                            user_claims=_user_claims(user, scope)),
            typ=ID_TOKEN_TYP, ttl=id_ttl)
        issued.append(id_token)
    refresh_token = None
    if with_refresh_token and REFRESH_TOKEN in client.grant_types:
        refresh_token = response["refresh_token"] = new_token()
    return _Issue(response=response, issued=issued, access_token=access,
                  refresh_token=refresh_token)


def _user_claims(user: UserRecord, scope: tuple[str, ...]) -> dict[str, Any]:
    return user_claims(subject=user.id, username=user.username, attributes=user.attributes,
                       updated_at=user.updated_at, scope=scope)


def _new_refresh_token(ctx: ServiceContext, client: Client, issue: _Issue, *, family: str,
                       user: UserRecord, scope: tuple[str, ...], sign_in: SignIn,
                       resources: list[str]) -> NewRefreshToken | None:
    if issue.refresh_token is None:
        return None
    ttl = client.ttl("refreshTokenTtl", ctx.config.oauth.refresh_token_ttl)
    return NewRefreshToken(
        token_hash=token_hash(issue.refresh_token), family=family,
        application_id=client.application_id, user_id=user.id, scope=" ".join(scope),
        auth_time=sign_in.auth_time, amr=list(sign_in.amr), extra={"resources": resources},
        access_token=issue.access_token, expires_at=time.time() + ttl)


def _active_user(user_id: str | None) -> UserRecord:
    user = directory.find_user_by_id(user_id) if user_id else None
    if user is None or user.status != "active" or (user.locked_until or 0) > time.time():
        raise InvalidGrant("The user of this grant no longer exists or is disabled or locked.",
                           code="user_inactive")
    return user


def _exchange_code(ctx: ServiceContext, client: Client, parameters: Parameters,
                   client_address: str) -> dict[str, Any]:
    code_hash = token_hash(require(parameters, "code"))
    stored = oauth_store.find_code(code_hash)
    if stored is not None and stored.consumed_at is not None:
        _refuse_code_reuse(ctx, stored.code_hash, client, client_address)
    if stored is None or stored.application_id != client.application_id:
        raise InvalidGrant("The code is unknown or was issued to another client.",
                           code="invalid_code")
    if stored.expires_at <= time.time():
        raise InvalidGrant("The code has expired; authorize again.", code="code_expired")
    if parameters.get("redirect_uri") != stored.redirect_uri:
        raise InvalidGrant("redirect_uri must equal the one of the authorization request.",
                           code="redirect_uri_mismatch")
    pkce.verify_code_verifier(code_verifier=parameters.get("code_verifier"),
                              expected_challenge=stored.code_challenge)
    user = _active_user(stored.user_id)
    scope = parse_scope(stored.scope)
    resources = stored.extra.get("resources", [])
    sign_in = SignIn(subject=user.id, auth_time=int(stored.auth_time), amr=tuple(stored.amr))
    session_id = new_id()
    issue = _issue(ctx, client, subject=user.id, scope=scope, sign_in=sign_in, user=user,
                   audience=_audience(parameters.resources, authorized=resources,
                                      issuer=ctx.config.issuer),
                   nonce=stored.nonce, session_id=session_id, with_refresh_token=True)
    refresh = _new_refresh_token(ctx, client, issue, family=session_id, user=user, scope=scope,
                                 sign_in=sign_in, resources=resources)
    with transaction():  # the audit event commits with the redemption, in one write
        redeemed = oauth_store.redeem_code(code_hash, issued=issue.issued,
                                           refresh_token=refresh, session_id=session_id)
        if redeemed:
            audit.record("oauth.token", "success", actor=client.client_id, user_id=user.id,
                         client_address=client_address, details={"grant": AUTHORIZATION_CODE})
    if not redeemed:
        _refuse_code_reuse(ctx, code_hash, client, client_address)  # a parallel exchange won
    return issue.response


def _end_grant(ctx: ServiceContext, family: str, client: Client | None) -> None:
    """End a grant: its refresh tokens, and every access token that names it (``sid``),
    remembered until the longest-lived of them would have expired anyway."""
    default = ctx.config.oauth.access_token_ttl
    ttl = max(default, client.ttl("accessTokenTtl", default)) if client else default
    oauth_store.revoke_family(family, tokens_live_until=time.time() + ttl + LEEWAY_SECONDS)


def _refuse_code_reuse(ctx: ServiceContext, code_hash: str, client: Client,
                       client_address: str) -> NoReturn:
    """RFC 9700 §4.4.1: a replayed code is refused and what it issued is revoked."""
    stored = oauth_store.find_code(code_hash)
    if stored is not None:
        oauth_store.revoke_tokens(stored.issued)
        if stored.refresh_family:
            _end_grant(ctx, stored.refresh_family, client)
    audit.record("oauth.code_reuse", "denied", actor=client.client_id,
                 user_id=stored.user_id if stored else None, client_address=client_address)
    raise InvalidGrant("The code was already used; the tokens it issued are now revoked.",
                       code="code_reused")


def _refresh(ctx: ServiceContext, client: Client, parameters: Parameters,
             client_address: str) -> dict[str, Any]:
    presented_hash = token_hash(require(parameters, "refresh_token"))
    stored = oauth_store.find_refresh_token(presented_hash)
    if stored is None or stored.application_id != client.application_id:
        raise InvalidGrant("The refresh token is unknown or was issued to another client.",
                           code="invalid_refresh_token")
    if stored.revoked or stored.rotated_at is not None:
        _refuse_refresh_reuse(ctx, stored.family, stored.user_id, client, client_address)
    if stored.expires_at <= time.time():
        raise InvalidGrant("The refresh token has expired; sign in again.",
                           code="refresh_token_expired")
    authorized = parse_scope(stored.scope)
    scope = granted_scope(parse_scope(parameters.get("scope")), allowed=authorized,
                          default=authorized)
    user = _active_user(stored.user_id)
    resources = stored.extra.get("resources", [])
    sign_in = SignIn(subject=user.id, auth_time=int(stored.auth_time or 0),
                     amr=tuple(stored.amr))
    issue = _issue(ctx, client, subject=user.id, scope=scope, sign_in=sign_in, user=user,
                   audience=_audience(parameters.resources, authorized=resources,
                                      issuer=ctx.config.issuer),
                   session_id=stored.family, with_refresh_token=True)
    # The successor keeps the scope of the grant: narrowing applies to this access token only.
    successor = _new_refresh_token(ctx, client, issue, family=stored.family, user=user,
                                   scope=authorized, sign_in=sign_in, resources=resources)
    if successor is None or not oauth_store.rotate_refresh_token(presented_hash, successor):
        _refuse_refresh_reuse(ctx, stored.family, stored.user_id, client, client_address)
    audit.record("oauth.token", "success", actor=client.client_id, user_id=user.id,
                 client_address=client_address, details={"grant": REFRESH_TOKEN})
    return issue.response


def _refuse_refresh_reuse(ctx: ServiceContext, family: str, user_id: str | None, client: Client,
                          client_address: str) -> NoReturn:
    """RFC 9700 §4.14.2: a rotated token coming back means theft; end the whole grant."""
    _end_grant(ctx, family, client)
    audit.record("oauth.refresh_reuse", "denied", actor=client.client_id, user_id=user_id,
                 client_address=client_address, details={"family": family})
    raise InvalidGrant("The refresh token was already used; every token of this grant is now "
                       "revoked. Sign in again.", code="refresh_token_reused")


def _client_credentials(ctx: ServiceContext, client: Client, parameters: Parameters,
                        client_address: str) -> dict[str, Any]:
    if client.public:
        raise UnauthorizedClient("A public client cannot use client_credentials.",
                                 code="grant_not_allowed")
    scope = granted_scope(parse_scope(parameters.get("scope")), allowed=client.scopes,
                          default=client.scopes)
    issue = _issue(ctx, client, subject=client.client_id, scope=scope,
                   audience=_audience(parameters.resources, authorized=[],
                                      issuer=ctx.config.issuer))
    audit.record("oauth.token", "success", actor=client.client_id,
                 client_address=client_address, details={"grant": CLIENT_CREDENTIALS})
    return issue.response


_GRANTS: dict[str, Callable[[ServiceContext, Client, Parameters, str], dict[str, Any]]] = {
    AUTHORIZATION_CODE: _exchange_code,
    REFRESH_TOKEN: _refresh,
    CLIENT_CREDENTIALS: _client_credentials,
}


# --- using and ending tokens ----------------------------------------------------------------


def userinfo(ctx: ServiceContext, access_token: str | None) -> dict[str, Any]:
    """OIDC Core §5.3: the standard claims the token's scope releases about its user."""
    if access_token is None:
        raise InvalidToken("Send the access token in an Authorization: Bearer header.",
                           code="missing_token", headers={"WWW-Authenticate": BEARER_REALM})
    challenge = {"WWW-Authenticate": f'{BEARER_REALM}, error="invalid_token"'}
    try:
        claims = ctx.tokens.verify_access_token(access_token, audience=ctx.config.issuer)
    except Unauthorized as refusal:
        raise InvalidToken(refusal.description, headers=challenge) from refusal
    scope = parse_scope(claims.get("scope"))
    if OPENID not in scope:
        raise InsufficientScope("userinfo needs a token with the openid scope.", headers={
            "WWW-Authenticate": f'{BEARER_REALM}, error="insufficient_scope", scope="openid"'})
    user = directory.find_user_by_id(str(claims["sub"]))
    if user is None or user.status != "active":
        raise InvalidToken("The token's user no longer exists or is disabled.",
                           code="user_inactive", headers=challenge)
    return _user_claims(user, scope)


def revoke(ctx: ServiceContext, raw: RawParameters, *, authorization: str | None,
           client_address: str = "") -> None:
    """RFC 7009: end a refresh token's grant, or an access token, of the calling client.

    Unknown, invalid and other clients' tokens are answered alike (200, nothing done), so
    the endpoint says nothing about tokens the caller does not own.
    """
    parameters = read_parameters(raw)
    client = _authenticate_client(ctx, parameters, authorization, client_address=client_address)
    presented = require(parameters, "token")
    stored = oauth_store.find_refresh_token(token_hash(presented))
    if stored is not None:
        if stored.application_id == client.application_id:
            _end_grant(ctx, stored.family, client)
            audit.record("oauth.revoke", "success", actor=client.client_id,
                         user_id=stored.user_id, client_address=client_address,
                         details={"token": "refresh_token"})
        return
    try:
        claims = ctx.tokens.verify_access_token(presented, audience=None)
    except Unauthorized:
        return
    if claims.get("client_id") == client.client_id:
        oauth_store.revoke_tokens([IssuedToken(jti=str(claims["jti"]),
                                               expires_at=float(claims["exp"]))])
        audit.record("oauth.revoke", "success", actor=client.client_id,
                     client_address=client_address, details={"token": "access_token"})


def introspect(ctx: ServiceContext, raw: RawParameters, *, authorization: str | None,
               client_address: str = "") -> dict[str, Any]:
    """RFC 7662 for confidential clients (resource servers): is this token live, and whose."""
    parameters = read_parameters(raw)
    client = _authenticate_client(ctx, parameters, authorization, client_address=client_address)
    if client.public:
        raise UnauthorizedClient("Public clients cannot introspect tokens.",
                                 code="introspection_not_allowed")
    presented = require(parameters, "token")
    stored = oauth_store.find_refresh_token(token_hash(presented))
    if stored is not None:
        live = (stored.application_id == client.application_id and not stored.revoked
                and stored.rotated_at is None and stored.expires_at > time.time())
        if not live or _inactive_user(stored.user_id):
            return {"active": False}
        return {"active": True, "token_type": "refresh_token", "scope": stored.scope,
                "client_id": client.client_id, "sub": stored.user_id,
                "exp": int(stored.expires_at), "iss": ctx.config.issuer}
    try:
        claims = ctx.tokens.verify_access_token(presented, audience=None)
    except Unauthorized:
        return {"active": False}
    if claims.get("auth_time") is not None and _inactive_user(str(claims["sub"])):
        return {"active": False}
    return {"active": True, "token_type": "Bearer",
            **{name: claims[name] for name in ("scope", "client_id", "sub", "aud", "iss", "exp",
                                               "iat", "jti") if name in claims}}


def _inactive_user(user_id: str | None) -> bool:
    user = directory.find_user_by_id(user_id) if user_id else None
    return user is None or user.status != "active"


def logout(ctx: ServiceContext, raw: RawParameters) -> str | None:
    """OIDC RP-Initiated Logout 1.0: end the grant named by the ID token's ``sid``.

    Returns where to send the browser (a registered redirect URI of the client, with
    ``state``), or None to show the signed-out page.
    """
    try:
        parameters = read_parameters(raw)
    except OAuthError as error:
        raise UntrustedRedirect(error.description, code=error.code) from error
    client_id = parameters.get("client_id")
    hint = parameters.get("id_token_hint")
    if hint is not None:
        try:
            claims = ctx.tokens.verify_id_token(hint)
        except Unauthorized as refusal:
            raise UntrustedRedirect(f"id_token_hint is not a valid ID token of this service: "
                                    f"{refusal.description}", code="invalid_id_token_hint") \
                from refusal
        if client_id is not None and client_id != claims.get("aud"):
            raise UntrustedRedirect("client_id is not the audience of id_token_hint.",
                                    code="client_id_mismatch")
        client_id = str(claims.get("aud"))
        if claims.get("sid"):
            issued_to = catalog_store.find_application_by_client_id(client_id)
            _end_grant(ctx, str(claims["sid"]), _client_of(issued_to) if issued_to else None)
        audit.record("oauth.logout", "success", actor=client_id, user_id=str(claims["sub"]))
    target = parameters.get("post_logout_redirect_uri")
    if target is None:
        return None
    application = catalog_store.find_application_by_client_id(client_id) if client_id else None
    if application is None:
        raise UntrustedRedirect("post_logout_redirect_uri needs id_token_hint or client_id to "
                                "name the client.", code="logout_client_unknown")
    trusted = trusted_redirect_uri(_client_of(application), target)
    return with_query(trusted, {"state": parameters.get("state")})

