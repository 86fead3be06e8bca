"""``POST /oauth2/token`` (RFC 6749 §3.2, §5): authenticate the client, run its grant, issue.

The grant type is looked up in the registry (``identityctl.oauth.grants.GRANT_TYPES``) and
runs its handler (:data:`HANDLERS`): it reads what it needs, applies its rules (one pure
module per RFC grant in ``identityctl.oauth.grants``), then writes what it issues and audits.
A replayed code or refresh token ends what was issued with it before the refusal goes out
(RFC 9700 §4.4.1, §4.14.2).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from identityctl import metrics
from identityctl.errors import Unauthorized
from identityctl.oauth.claims import (
    OPENID,
    SignIn,
    access_token_claims,
    id_token_claims,
    user_claims,
)
from identityctl.oauth.client import Client
from identityctl.oauth.discovery import TOKEN_PATH
from identityctl.oauth.dpop import Proof
from identityctl.oauth.errors import (
    AuthorizationPending,
    InvalidDpopProof,
    InvalidGrant,
    InvalidTarget,
    OAuthError,
    SlowDown,
    UnsupportedGrantType,
)
from identityctl.oauth.grants import GRANT_TYPES
from identityctl.oauth.grants.authorization_code import GRANT_TYPE as AUTHORIZATION_CODE
from identityctl.oauth.grants.authorization_code import CodeReplayed, validate_code_redemption
from identityctl.oauth.grants.client_credentials import GRANT_TYPE as CLIENT_CREDENTIALS
from identityctl.oauth.grants.client_credentials import validate_client_credentials
from identityctl.oauth.grants.device_code import GRANT_TYPE as DEVICE_CODE
from identityctl.oauth.grants.device_code import (
    SLOW_DOWN_STEP,
    DeviceGrant,
    check_poll,
    status_of,
)
from identityctl.oauth.grants.refresh_token import GRANT_TYPE as REFRESH_TOKEN
from identityctl.oauth.grants.refresh_token import RefreshTokenReplayed, validate_refresh
from identityctl.oauth.grants.token_exchange import (
    ACCESS_TOKEN_TYPE,
    ExchangePolicy,
    decide_exchange,
    read_exchange_request,
)
from identityctl.oauth.grants.token_exchange import GRANT_TYPE as TOKEN_EXCHANGE
from identityctl.oauth.parameters import (
    Parameters,
    RawParameters,
    parse_scope,
    read_parameters,
    require,
)
from identityctl.oauth.resource_indicators import token_audience
from identityctl.security.secrets import new_token, token_hash
from identityctl.security.tokens import ACCESS_TOKEN_TYP, ID_TOKEN_TYP
from identityctl.services import audit
from identityctl.services.clients import dpop, resource_servers
from identityctl.services.clients.client import authenticate_client
from identityctl.services.clients.revocation import end_grant
from identityctl.services.context import ServiceContext
from identityctl.services.directory import roles
from identityctl.services.directory.users import is_usable, may_use, sign_in_counts
from identityctl.services.origin import RequestOrigin
from identityctl.store import device as device_store
from identityctl.store import directory
from identityctl.store import oauth as oauth_store
from identityctl.store import recovery as recovery_store
from identityctl.store.db import transaction
from identityctl.store.directory import UserRecord
from identityctl.store.models import new_id
from identityctl.store.oauth import IssuedToken, NewRefreshToken


def token(ctx: ServiceContext, raw: RawParameters, *, authorization: str | None,
          origin: RequestOrigin, dpop_proof: str | None = None) -> dict[str, Any]:
    """``POST /oauth2/token``: the token response of RFC 6749 §5.1 (OIDC: with id_token).
    ``dpop_proof``: the request's DPoP header; its key binds the tokens (RFC 9449 §5)."""
    parameters = read_parameters(raw)
    grant_type = require(parameters, "grant_type")
    if grant_type not in GRANT_TYPES:
        raise UnsupportedGrantType(f"grant_type {grant_type!r} is not supported (supported: "
                                   f"{', '.join(GRANT_TYPES)}).", code="grant_type_unsupported")
    client = authenticate_client(ctx, parameters, authorization,
                                 origin=origin)
    try:
        client.require_grant(grant_type)
        proof = dpop.checked_proof(ctx, dpop_proof, method="POST",
                                   url=ctx.config.base_url + TOKEN_PATH) \
            if dpop_proof is not None else None
        if proof is None and client.dpop_required:
            raise InvalidDpopProof("This client's tokens are bound to its key: send a DPoP "
                                   "proof.", code="dpop_proof_missing")
        issued = HANDLERS[grant_type](ctx, client, parameters, origin, proof)
        metrics.count(metrics.TOKENS, grant_type)
        return issued
    except (AuthorizationPending, SlowDown):
        raise  # a device polling while the person answers: not a failure to audit
    except OAuthError as refusal:
        audit.record("oauth.token", "failure", origin=origin.acting_as(client.client_id),
                     details={"grantType": grant_type, "error": refusal.code})
        raise


# --- the grants -----------------------------------------------------------------------------


def _exchange_code(ctx: ServiceContext, client: Client, parameters: Parameters,
                   origin: RequestOrigin, proof: Proof | None) -> dict[str, Any]:
    code_hash = token_hash(require(parameters, "code"))
    try:
        code = validate_code_redemption(
            oauth_store.find_code(code_hash), client=client,
            redirect_uri=parameters.get("redirect_uri"),
            code_verifier=parameters.get("code_verifier"), now=time.time())
    except CodeReplayed:
        _refuse_code_replay(ctx, code_hash, client, origin)
    bound_to = code.extra.get("dpopJkt")
    if bound_to is not None and (proof is None or proof.jkt != bound_to):
        raise InvalidGrant("The authorization was bound to a DPoP key (dpop_jkt): redeem the "
                           "code with a proof by that key.", code="dpop_jkt_mismatch")
    # PERF: a code's sign-in is not checked against "passkeys only" again: it was when the
    # code was issued (authorization._hand_off), at most oauth.code_ttl ago (like its access
    # token's hour, that window stays); refresh checks, where a grant lives for weeks.
    user = _active_user(code.user_id, client)
    scope = parse_scope(code.scope)
    resources = code.extra.get("resources", [])
    sign_in = SignIn(subject=user.id, auth_time=int(code.auth_time), amr=tuple(code.amr))
    # The family a browser session recorded for this client (so ending the session ends
    # it, services/accounts/sessions.py), or a new one.
    session_id = code.extra.get("family") or new_id()
    issued = _issue(ctx, client, subject=user.id, scope=scope, sign_in=sign_in, user=user,
                    audience=resource_servers.audience_for(
                        ctx, parameters.resources, authorized=resources, scope=scope),
                    nonce=code.nonce, session_id=session_id, with_refresh_token=True,
                    proof=proof)
    refresh = _new_refresh_token(ctx, client, issued, family=session_id, user=user,
                                 scope=scope, sign_in=sign_in, resources=resources,
                                 origin=origin,
                                 bound_to=proof.jkt if proof and client.public else None)
    with transaction():  # the audit event commits with the redemption, in one write
        redeemed = oauth_store.redeem_code(code_hash, issued=issued.tokens,
                                           refresh_token=refresh, session_id=session_id)
        if redeemed:
            audit.record("oauth.token", "success", origin=origin.acting_as(client.client_id),
                         user_id=user.id, details={"grant": AUTHORIZATION_CODE})
    if not redeemed:  # a parallel exchange of the same code won
        _refuse_code_replay(ctx, code_hash, client, origin)
    return issued.response


def _refuse_code_replay(ctx: ServiceContext, code_hash: str, client: Client,
                        origin: RequestOrigin) -> NoReturn:
    """Revoke what the code issued, audit, refuse (RFC 9700 §4.4.1)."""
    stored = oauth_store.find_code(code_hash)
    if stored is not None:
        oauth_store.revoke_tokens(stored.issued)
        if stored.refresh_family:
            end_grant(ctx, stored.refresh_family, client)
    audit.record("oauth.code_reuse", "denied", origin=origin.acting_as(client.client_id),
                 user_id=stored.user_id if stored else None)
    raise CodeReplayed


def _refresh(ctx: ServiceContext, client: Client, parameters: Parameters,
             origin: RequestOrigin, proof: Proof | None) -> dict[str, Any]:
    presented_hash = token_hash(require(parameters, "refresh_token"))
    stored = oauth_store.find_refresh_token(presented_hash)
    try:
        scope = validate_refresh(stored, client=client,
                                 requested_scope=parse_scope(parameters.get("scope")),
                                 now=time.time())
    except RefreshTokenReplayed:
        assert stored is not None  # a replay is of a token that exists
        _refuse_refresh_replay(ctx, stored.family, stored.user_id, client, origin)
    assert stored is not None  # validate_refresh refuses an unknown token
    bound_to = stored.extra.get("jkt")  # RFC 9449 §5: a public client's, to its DPoP key
    if bound_to is not None and (proof is None or proof.jkt != bound_to):
        raise InvalidDpopProof("This refresh token is bound to a DPoP key: send a proof by "
                               "that key.", code="dpop_key_mismatch")
    if bound_to is None and proof is not None and client.public:
        bound_to = proof.jkt  # from the first proof on, the grant's successors are bound
    user = _active_user(stored.user_id, client)
    _require_sign_in_counts(client, user, stored.amr)
    _require_roles(user, scope)
    resources = stored.extra.get("resources", [])
    # A resource server may have lost scopes since the grant (or gone: invalid_target).
    scope = resource_servers.scope_for_resources(ctx, list(parameters.resources) or resources,
                                                 scope)
    sign_in = SignIn(subject=user.id, auth_time=int(stored.auth_time or 0),
                     amr=tuple(stored.amr))
    issued = _issue(ctx, client, subject=user.id, scope=scope, sign_in=sign_in, user=user,
                    audience=token_audience(parameters.resources, authorized=resources,
                                            issuer=ctx.config.issuer),
                    session_id=stored.family, with_refresh_token=True, proof=proof)
    # The successor keeps the scope of the grant: narrowing applies to this access token only.
    successor = _new_refresh_token(ctx, client, issued, family=stored.family, user=user,
                                   scope=parse_scope(stored.scope), sign_in=sign_in,
                                   resources=resources, origin=origin,
                                   bound_to=bound_to)
    if successor is None or not oauth_store.rotate_refresh_token(presented_hash, successor):
        _refuse_refresh_replay(ctx, stored.family, stored.user_id, client, origin)
    audit.record("oauth.token", "success", origin=origin.acting_as(client.client_id),
                 user_id=user.id, details={"grant": REFRESH_TOKEN})
    return issued.response


def _refuse_refresh_replay(ctx: ServiceContext, family: str, user_id: str | None,
                           client: Client, origin: RequestOrigin) -> NoReturn:
    """End the whole grant, audit, refuse (RFC 9700 §4.14.2)."""
    end_grant(ctx, family, client)
    audit.record("oauth.refresh_reuse", "denied", origin=origin.acting_as(client.client_id),
                 user_id=user_id, details={"family": family})
    raise RefreshTokenReplayed


def _client_credentials(ctx: ServiceContext, client: Client, parameters: Parameters,
                        origin: RequestOrigin, proof: Proof | None) -> dict[str, Any]:
    scope = validate_client_credentials(client,
                                        requested_scope=parse_scope(parameters.get("scope")))
    issued = _issue(ctx, client, subject=client.client_id, scope=scope,
                    audience=resource_servers.audience_for(
                        ctx, parameters.resources, authorized=[], scope=scope), proof=proof)
    audit.record("oauth.token", "success", origin=origin.acting_as(client.client_id),
                 details={"grant": CLIENT_CREDENTIALS})
    return issued.response


def _exchange_token(ctx: ServiceContext, client: Client, parameters: Parameters,
                    origin: RequestOrigin, proof: Proof | None) -> dict[str, Any]:
    """RFC 8693: a token for another resource, for the subject token's user, naming this
    client (or the actor token's subject) as the actor. Audited with who acted for whom."""
    request = read_exchange_request(parameters)
    subject = _presented_token(ctx, request.subject_token, "subject")
    actor = _presented_token(ctx, request.actor_token, "actor") if request.actor_token \
        else None
    now = time.time()
    exchange = decide_exchange(
        request, client=client, policy=ExchangePolicy.of(client), subject=subject,
        actor=actor, access_ttl=client.ttl("accessTokenTtl", ctx.config.oauth.access_token_ttl),
        now=now)
    own = resource_servers.own_resources(ctx)
    if any(target in own for target in exchange.audience):
        raise InvalidTarget("Tokens for identityctl itself are not exchanged; name one of "
                            "your resource servers.", code="target_not_allowed")
    resource_servers.check_requested_resources(ctx, exchange.audience, exchange.scope)
    user = directory.find_user_by_id(exchange.subject)
    if user is not None or "auth_time" in subject:  # a person's token: still theirs to give
        user = _active_user(exchange.subject, client)
        _require_sign_in_counts(client, user, list(subject.get("amr") or ()))
        _require_roles(user, exchange.scope)
    sign_in = SignIn(subject=exchange.subject, auth_time=int(subject["auth_time"]),
                     amr=tuple(subject.get("amr") or ())) if "auth_time" in subject else None
    issued = _issue(ctx, client, subject=exchange.subject, scope=exchange.scope,
                    audience=list(exchange.audience), sign_in=sign_in,
                    session_id=exchange.grant_id, actor=exchange.act,
                    access_ttl=max(1, int(exchange.expires_at - now)), proof=proof)
    audit.record("oauth.token_exchange", "success", origin=origin.acting_as(client.client_id),
                 user_id=user.id if user else None,
                 details={"audience": list(exchange.audience), "scope": " ".join(exchange.scope),
                          "subjectClient": subject.get("client_id"), "act": exchange.act})
    return {**issued.response, "issued_token_type": ACCESS_TOKEN_TYPE}


def _presented_token(ctx: ServiceContext, token: str, role: str) -> dict[str, Any]:
    """The claims of a subject or actor token: one of our live, unrevoked access tokens."""
    try:
        return ctx.tokens.verify_access_token(token, audience=None)
    except Unauthorized as refusal:
        raise InvalidGrant(f"The {role} token is not valid: {refusal.description}",
                           code=f"{role}_token_invalid") from None


def _redeem_device_code(ctx: ServiceContext, client: Client, parameters: Parameters,
                        origin: RequestOrigin, proof: Proof | None) -> dict[str, Any]:
    """RFC 8628 §3.4-3.5: the device's poll; tokens once the person approved, once."""
    code_hash = token_hash(require(parameters, "device_code"))
    stored, now = device_store.by_device_code(code_hash), time.time()
    try:
        check_poll(DeviceGrant(
            application_id=stored.application_id, expires_at=stored.expires_at,
            status=status_of(approved=stored.approved, redeemed=stored.redeemed),
            interval=stored.interval, last_polled_at=stored.last_polled_at)
            if stored else None, client=client, now=now)
    except SlowDown:
        assert stored is not None
        device_store.polled(code_hash, at=now, interval=stored.interval + SLOW_DOWN_STEP)
        raise
    except AuthorizationPending:
        assert stored is not None
        device_store.polled(code_hash, at=now, interval=stored.interval)
        raise
    assert stored is not None and stored.user_id is not None  # approved: by someone
    user = _active_user(stored.user_id, client)
    _require_sign_in_counts(client, user, stored.amr)
    scope = parse_scope(stored.scope)
    _require_roles(user, scope)
    resources = stored.extra.get("resources", [])
    sign_in = SignIn(subject=user.id, auth_time=int(stored.auth_time or now),
                     amr=tuple(stored.amr))
    session_id = new_id()
    issued = _issue(ctx, client, subject=user.id, scope=scope, sign_in=sign_in, user=user,
                    audience=resource_servers.audience_for(
                        ctx, parameters.resources, authorized=resources, scope=scope),
                    session_id=session_id, with_refresh_token=True, proof=proof)
    refresh = _new_refresh_token(ctx, client, issued, family=session_id, user=user,
                                 scope=scope, sign_in=sign_in, resources=resources,
                                 origin=origin,
                                 bound_to=proof.jkt if proof and client.public else None)
    with transaction():  # the tokens are handed out by the one poll that redeems
        redeemed = device_store.redeem(code_hash)
        if redeemed and refresh is not None:
            refresh.create()
        if redeemed:
            audit.record("oauth.token", "success", origin=origin.acting_as(client.client_id),
                         user_id=user.id, details={"grant": DEVICE_CODE})
    if not redeemed:
        raise InvalidGrant("The device code was used already.", code="device_code_used")
    return issued.response


#: What the token endpoint runs for a grant: the context, the authenticated client, the
#: request's parameters, the client's address and its checked DPoP proof; the token response.
GrantHandler = Callable[[ServiceContext, Client, Parameters, str, Proof | None], dict[str, Any]]

#: The handler of each grant type of the registry (identityctl.oauth.grants.GRANT_TYPES).
HANDLERS: dict[str, GrantHandler] = {
    AUTHORIZATION_CODE: _exchange_code,
    REFRESH_TOKEN: _refresh,
    CLIENT_CREDENTIALS: _client_credentials,
    DEVICE_CODE: _redeem_device_code,
    TOKEN_EXCHANGE: _exchange_token,
}


# --- issuing --------------------------------------------------------------------------------


@dataclass(slots=True)
class IssuedResponse:
    """What one token response hands out."""

    response: dict[str, Any]
    #: The JWTs issued (a replayed code revokes them).
    tokens: list[IssuedToken]
    access_token: IssuedToken
    refresh_token: str | None


def _issue(ctx: ServiceContext, client: Client, *, subject: str, scope: tuple[str, ...],
           audience: list[str], sign_in: SignIn | None = None, user: UserRecord | None = None,
           nonce: str | None = None, session_id: str | None = None,
           with_refresh_token: bool = False, actor: dict[str, Any] | None = None,
           access_ttl: int | None = None, proof: Proof | None = None) -> IssuedResponse:
    """The token response; ``proof``: the access token is bound to its key (DPoP)."""
    oauth, tokens, now = ctx.config.oauth, ctx.tokens, time.time()
    access_ttl = access_ttl or client.ttl("accessTokenTtl", oauth.access_token_ttl)
    access = IssuedToken(jti=new_id(), expires_at=now + access_ttl)
    response: dict[str, Any] = {
        "access_token": tokens.sign(
            access_token_claims(subject=subject, client_id=client.client_id, scope=scope,
                                audience=audience, jti=access.jti, sign_in=sign_in,
                                grant_id=session_id, actor=actor,
                                key_thumbprint=proof.jkt if proof else None),
            typ=ACCESS_TOKEN_TYP, ttl=access_ttl),
        "token_type": "DPoP" if proof else "Bearer", "expires_in": access_ttl,
        "scope": " ".join(scope)}
    issued = [access]
    if OPENID in scope and sign_in is not None and user is not None and session_id:
        id_ttl = client.ttl("idTokenTtl", oauth.id_token_ttl)
        id_token = IssuedToken(jti=new_id(), expires_at=now + id_ttl)
        response["id_token"] = tokens.sign(
            id_token_claims(sign_in=sign_in, client_id=client.client_id, nonce=nonce,
                            session_id=session_id, jti=id_token.jti,
                            user_claims=released_claims(user, scope)),
            typ=ID_TOKEN_TYP, ttl=id_ttl)
        issued.append(id_token)
    refresh_token = None
    if with_refresh_token and REFRESH_TOKEN in client.grant_types:
        refresh_token = response["refresh_token"] = new_token()
    return IssuedResponse(response=response, tokens=issued, access_token=access,
                          refresh_token=refresh_token)


def released_claims(user: UserRecord, scope: tuple[str, ...]) -> dict[str, Any]:
    """The user's claims that ``scope`` releases (ID token and userinfo alike).
    ``email_verified``: the address is the one the person proved (a code sent there came
    back), services/accounts/email_codes.py."""
    attributes = user.attributes
    address = str(attributes.get("email") or "")
    if address and "email" in scope:
        verified = recovery_store.verified_address(user.id) == address.strip().lower()
        attributes = {**attributes, "email_verified": verified}
    return user_claims(subject=user.id, username=user.username, attributes=attributes,
                       updated_at=user.updated_at, scope=scope)


def _new_refresh_token(ctx: ServiceContext, client: Client, issued: IssuedResponse, *,
                       family: str, user: UserRecord, scope: tuple[str, ...], sign_in: SignIn,
                       resources: list[str], origin: RequestOrigin,
                       bound_to: str | None = None) -> NewRefreshToken | None:
    """The refresh token to store (with where it was used from: the person's account page
    lists their sessions by client, time and address; ``bound_to``: the DPoP key a public
    client's refresh token is bound to)."""
    if issued.refresh_token is None:
        return None
    ttl = client.ttl("refreshTokenTtl", ctx.config.oauth.refresh_token_ttl)
    return NewRefreshToken(
        token_hash=token_hash(issued.refresh_token), family=family,
        application_id=client.application_id, user_id=user.id, scope=" ".join(scope),
        auth_time=sign_in.auth_time, amr=list(sign_in.amr),
        extra={"resources": resources, "address": origin.address,
               **({"jkt": bound_to} if bound_to else {})},
        access_token=issued.access_token, expires_at=time.time() + ttl)


def _require_roles(user: UserRecord, scope: tuple[str, ...]) -> None:
    """The user still holds a role for each protected scope of the grant."""
    not_held = roles.scopes_not_held(user.id, scope)
    if not_held:
        raise InvalidGrant(f"The user no longer holds a role that grants "
                           f"{' '.join(not_held)!r}; sign in again.", code="scope_not_held")


def _require_sign_in_counts(client: Client, user: UserRecord, amr: list[str]) -> None:
    """The sign-in the grant came from still stands: not one that rests on a password where
    passkeys only hold now (the application's rule, the person's unit's: switched on after
    the sign-in, it ends the grant's use). Reads nothing for a passkey's sign-in or a
    passkeys-only application; else one statement (the unit)."""
    if not sign_in_counts(amr, application=client.passkeys_only, user_id=user.id):
        raise InvalidGrant("This grant comes from a password sign-in, and only passkeys "
                           "sign in here now; sign in again with a passkey.",
                           code="passwords_not_allowed")


def _active_user(user_id: str | None, client: Client) -> UserRecord:
    """The grant's user, while they may still act for ``client``'s application."""
    user = directory.find_user_by_id(user_id) if user_id else None
    if not is_usable(user):
        raise InvalidGrant("The user of this grant no longer exists or is disabled or locked.",
                           code="user_inactive")
    if not may_use(user, client.allowed_user_types):
        raise InvalidGrant(f"Users of type {user.user_type!r} may not use this application; "
                           "sign in again with another account.", code="user_type_not_allowed")
    return user
