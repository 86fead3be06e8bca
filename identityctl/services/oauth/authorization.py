"""``/oauth2/authorize`` and the hand-off from the hosted sign-in (RFC 6749 §4.1.1-4.1.2,
OIDC Core §3.1.2): validate and store the request; answer it from the browser's session
where the application's flow allows (single sign-on), else run the flow's sign-in; then
answer the client's redirect URI with a one-time code, after the person's consent where a
client needs one."""

from __future__ import annotations

import dataclasses
import hmac
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from identityctl.errors import BadRequest, IdentityError, Unauthorized
from identityctl.flow.definition import session_check
from identityctl.oauth.authorization import (
    AuthorizationParameters,
    error_response_url,
    success_response_url,
)
from identityctl.oauth.client import Client
from identityctl.oauth.consent import ConsentRequest, consent_required
from identityctl.oauth.discovery import AUTHORIZE_PATH
from identityctl.oauth.errors import (
    AccessDenied,
    ConsentRequired,
    LoginRequired,
    OAuthError,
    ServerError,
    UntrustedRedirect,
)
from identityctl.oauth.parameters import RawParameters, parse_scope, read_parameters
from identityctl.oauth.sso import session_answers
from identityctl.security.secrets import new_token, token_hash
from identityctl.services import audit, catalog
from identityctl.services.accounts import sessions
from identityctl.services.catalog.applications import oauth_config
from identityctl.services.clients.client import client_of, find_client_application
from identityctl.services.context import ServiceContext
from identityctl.services.directory import roles
from identityctl.services.directory.users import (
    ensure_sign_in_counts,
    is_usable,
    may_use,
    sign_in_counts,
)
from identityctl.services.flows import execution as flow_execution
from identityctl.services.oauth import pushed_requests
from identityctl.services.oauth.request_checks import EndpointRequest, run_checks
from identityctl.services.origin import RequestOrigin
from identityctl.store import catalog as catalog_store
from identityctl.store import directory, grants
from identityctl.store import oauth as oauth_store
from identityctl.store.db import transaction
from identityctl.store.directory import UserRecord
from identityctl.store.oauth import IssuedToken, StoredAuthorizationRequest
from identityctl.store.sessions import SessionRecord


def authorize(ctx: ServiceContext, raw: RawParameters, *, origin: RequestOrigin,
              session_cookie: str | None = None, browser: str = "") -> str:
    """Where to send the browser for ``GET /oauth2/authorize``.

    The client's redirect URI with a code when the browser's session answers the request
    (no page at all); the hosted UI (with the stored request's opaque id) when the person
    must sign in or consent; the client's redirect URI with an error once the redirect URI
    is trusted; an :class:`UntrustedRedirect` (shown as a page) before that.
    """
    try:
        parameters = read_parameters(raw)
    except OAuthError as error:
        raise UntrustedRedirect(error.description, code=error.code) from error
    client_id = parameters.get("client_id")
    if client_id is None:
        raise UntrustedRedirect("client_id is required.", code="client_id_missing")
    application = find_client_application(ctx, client_id, origin=origin)
    if application is None:
        raise UntrustedRedirect(f"No application has client id {client_id!r}.",
                                code="unknown_client")
    client = client_of(application)
    request_uri = parameters.get("request_uri")
    if request_uri is not None:  # RFC 9126 §4: the request the client pushed, used up
        parameters = pushed_requests.take(client.application_id, client_id, request_uri)
    state = parameters.get("state")
    checking = EndpointRequest(ctx=ctx, client=client, parameters=parameters,
                               pushed=request_uri is not None)
    try:
        run_checks(AUTHORIZE_PATH, checking)
        request = checking.checked()
        request_id = new_token(24)
        oauth_store.create_authorization_request(
            request_id=request_id, application_id=client.application_id,
            redirect_uri=request.redirect_uri, scope=" ".join(request.scope), state=state,
            nonce=request.nonce, code_challenge=request.code_challenge,
            code_challenge_method=request.code_challenge_method,
            extra=_request_extra(request),
            expires_at=time.time() + ctx.config.flow.execution_ttl)
        session = _answering_session(ctx, application, request, session_cookie)
        if session is not None:
            answered = _continue(ctx, request_id, _signed_in_by(session), in_page=False,
                                 origin=origin)
            if answered.redirect_uri is not None:
                return answered.redirect_uri
            return _gate_link(ctx, request_id, client, resume=True,  # the consent page
                              ui_locales=parameters.get("ui_locales"))
        if "none" in request.prompts:
            raise LoginRequired("prompt=none, and no sign-in session answers this request.")
        first_step = _start_sign_in(ctx, client, request_id, origin, browser)
    except UntrustedRedirect:
        raise  # the redirect URI is not trusted (yet): a page says it, never a redirect
    except OAuthError as error:
        audit.record("oauth.authorize", "failure", origin=origin.acting_as(client.client_id),
                     details={"error": error.code})
        return error_response_url(checking.redirect_uri, error, state=state,
                                  issuer=ctx.config.issuer)
    if first_step is None:  # an application's own page starts the flow it drives
        return _gate_link(ctx, request_id, client, ui_locales=parameters.get("ui_locales"))
    execution_id = str(first_step["executionId"])
    oauth_store.update_authorization_request_extra(request_id, {
        **_request_extra(request), "executionId": execution_id, "firstStep": first_step})
    return _gate_link(ctx, request_id, client, execution_id=execution_id,
                      ui_locales=parameters.get("ui_locales"))


def _request_extra(request: AuthorizationParameters) -> dict[str, Any]:
    """What the stored request keeps besides its columns, for the hand-off."""
    return {"resources": list(request.resources), "prompts": list(request.prompts),
            **({"dpopJkt": request.dpop_jkt} if request.dpop_jkt else {})}


def _gate_link(ctx: ServiceContext, request_id: str, client: Client, *,
               execution_id: str = "", resume: bool = False,
               ui_locales: str | None = None) -> str:
    """The hosted page for the request: a sign-in (an execution started), or, with
    ``resume``, the consent of a person the session already signed in."""
    query = {"authId": request_id, "applicationId": client.application_id}
    if execution_id:
        query["executionId"] = execution_id
    if resume:
        query["resume"] = "session"
    if ui_locales:  # OIDC Core §3.1.2.1: the page speaks the client's language
        query["ui_locales"] = ui_locales[:100]
    return f"{ctx.config.gate_url}/signin?" + urlencode(query)


def _answering_session(ctx: ServiceContext, application: dict[str, Any],
                       request: AuthorizationParameters,
                       session_cookie: str | None) -> SessionRecord | None:
    """The browser's session, when it may stand for a sign-in for this request: the
    application's flow accepts sessions (its SSOCheckExecutor) and neither the flow nor the
    request (prompt=login, max_age) asks for a fresher sign-in, and it was no password
    sign-in where passkeys only hold now (the application's rule, the person's unit's)."""
    session = sessions.current(ctx, session_cookie)
    if session is None or not application.get("authFlowId"):
        return None
    if not sign_in_counts(session.amr, application=application, user_id=session.user_id):
        return None  # signed in with a password, and passkeys only hold: a new sign-in
    check = session_check(catalog.flows.get_flow(application["authFlowId"])["nodes"])
    if check is None or not session_answers(
            auth_time=session.auth_time, now=time.time(), prompts=request.prompts,
            max_age=request.max_age, flow_max_age=check.max_age):
        return None
    return session


def _signed_in_by(session: SessionRecord) -> dict[str, Any]:
    return {"sub": session.user_id, "authTime": session.auth_time, "amr": session.amr,
            "session": session.id}


def _start_sign_in(ctx: ServiceContext, client: Client, request_id: str,
                   origin: RequestOrigin, browser: str) -> dict[str, Any] | None:
    """Start the application's AUTHENTICATION flow for the request, bound to ``browser``
    (the browser secret); its first step. None when the sign-in page is on another origin
    (``gate_client.url``): its requests carry no cookie, so it starts the execution itself
    and holds its id, which no link ever carries (docs/security.md, "Flow executions"); the
    flow is only checked here."""
    try:
        if not ctx.config.gate_is_hosted:
            flow_execution.ensure_startable(client.application_id, "AUTHENTICATION")
            return None
        return flow_execution.start_execution(
            ctx, application_id=client.application_id, flow_type="AUTHENTICATION",
            auth_request_id=request_id, origin=origin, browser=browser)
    except IdentityError as error:
        raise ServerError(f"The application's sign-in flow could not start: "
                          f"{error.description or error.message}",
                          code="sign_in_unavailable") from error


def pending_first_step(*, auth_id: str, application_id: str, execution_id: str,
                       browser: str) -> dict[str, Any] | None:
    """For the hosted UI: the flow step authorize started, while the request is pending.

    None when the page is not for that execution, or the execution is not this browser's
    (``browser``: its secret): the UI then starts a fresh one.
    """
    pending = oauth_store.find_authorization_request(auth_id)
    if pending is None or pending.application_id != application_id:
        raise UntrustedRedirect("This sign-in link has expired or was already used. Return to "
                                "the application and sign in again.",
                                code="authorization_request_invalid")
    if not execution_id or pending.extra.get("executionId") != execution_id \
            or not flow_execution.resumable_in(execution_id, browser):
        return None
    return pending.extra.get("firstStep")


@dataclass(frozen=True, slots=True)
class HandOff:
    """What the hosted page does after a sign-in: follow ``redirect_uri`` (a code, or
    ``access_denied`` with ``refused`` said to the person first), or ask for ``consent``."""

    redirect_uri: str | None = None
    refused: str | None = None
    consent: ConsentRequest | None = None
    consent_token: str | None = None
    #: The username of who signed in, shown with the consent question.
    signed_in_as: str | None = None
    #: The cookie value of the session this sign-in started (set by the adapter).
    new_session: str | None = None

    def to_api(self) -> dict[str, Any]:
        answer: dict[str, Any] = {"redirect_uri": self.redirect_uri}
        if self.refused:
            answer["refused"] = self.refused
        if self.consent is not None:
            answer.update(consent=self.consent.to_api(), consentToken=self.consent_token,
                          signedInAs=self.signed_in_as)
        return answer


def complete_authorization(ctx: ServiceContext, *, auth_id: str, assertion: str,
                           origin: RequestOrigin, user_agent: str = "",
                           session_cookie: str | None = None) -> HandOff:
    """The hand-off from the hosted UI: a sign-in assertion for a pending request.

    Starts the browser's session (single sign-on), then answers: a code (or
    ``access_denied``) for the client's redirect URI, or a consent question when the person
    must approve first (oauth/consent.py). The request and the assertion are both
    single-use.
    """
    claims = ctx.tokens.verify_assertion(assertion)
    pending = oauth_store.find_authorization_request(auth_id)
    if pending is None:
        raise _request_gone()
    if claims.get("app", pending.application_id) != pending.application_id:
        # A flow's assertion answers its own application's requests: another application's
        # flow may lack this one's rules (passkeys only, a second step).
        raise BadRequest("This sign-in was made for another application; sign in again here.",
                         code="assertion_for_another_application")
    # Whatever flow made it, a password sign-in completes nothing where passkeys only hold.
    ensure_sign_in_counts(list(claims.get("amr") or []), user_id=str(claims["sub"]),
                          application=catalog_store.get_application(pending.application_id))
    if not oauth_store.use_once(IssuedToken(jti=str(claims["jti"]),
                                            expires_at=float(claims["exp"]))):
        raise Unauthorized("This sign-in assertion was already used.", code="assertion_reused")
    signed_in = {"sub": str(claims["sub"]),
                 "authTime": float(claims.get("auth_time") or claims["iat"]),
                 "amr": list(claims.get("amr") or [])}
    cookie = None
    if is_usable(directory.find_user_by_id(signed_in["sub"])):
        cookie, session = sessions.start(
            ctx, user_id=signed_in["sub"], auth_time=signed_in["authTime"],
            amr=signed_in["amr"], origin=origin, user_agent=user_agent,
            replacing=session_cookie)
        signed_in["session"] = session.id
    answer = _continue(ctx, auth_id, signed_in, in_page=True, origin=origin)
    return dataclasses.replace(answer, new_session=cookie)


def resume_with_session(ctx: ServiceContext, *, auth_id: str, session_cookie: str | None,
                        origin: RequestOrigin) -> HandOff:
    """The hosted page of a request the browser's session answered but for the person's
    consent: ask it (the page sent no assertion; the session is who signed in)."""
    session = sessions.current(ctx, session_cookie)
    if session is None:
        raise Unauthorized("Your sign-in session has ended; sign in again.",
                           code="session_expired")
    pending = oauth_store.find_authorization_request(auth_id)
    if pending is not None:  # (else _continue's refusal)
        ensure_sign_in_counts(session.amr, user_id=session.user_id,
                              application=catalog_store.get_application(pending.application_id))
    return _continue(ctx, auth_id, _signed_in_by(session), in_page=True,
                     origin=origin)


def _continue(ctx: ServiceContext, auth_id: str, signed_in: dict[str, Any], *,
              in_page: bool, origin: RequestOrigin) -> HandOff:
    """A person signed in for a pending request: ask their consent where needed (on the
    page; without one, ``prompt=none`` is ``consent_required`` and else the page is
    needed: an empty answer), then the code or the refusal."""
    pending = oauth_store.find_authorization_request(auth_id)
    if pending is None:
        raise _request_gone()
    application = catalog_store.get_application(pending.application_id)
    client = client_of(application)
    user = directory.find_user_by_id(signed_in["sub"])
    scope = parse_scope(pending.scope)
    prompts = pending.extra.get("prompts", ())
    if user is not None and user_refusal(user, application, scope) is None \
            and consent_required(described_itself=client.described_itself, requested=scope,
                                 granted=grants.granted_scopes(user.id, application["id"]),
                                 prompts=prompts):
        if in_page:
            return _ask_consent(auth_id, pending, signed_in, client, application)
        if "none" in prompts:
            raise ConsentRequired(f"prompt=none, and the person has not approved "
                                  f"{application['name']}.")
        return HandOff()
    request = _consume(auth_id)
    return _hand_off(ctx, request, application, signed_in, origin=origin)


def _request_gone() -> BadRequest:
    return BadRequest("The sign-in request is unknown, expired or already completed; start "
                      "again from the application.", code="authorization_request_invalid")


def _ask_consent(auth_id: str, pending: StoredAuthorizationRequest, signed_in: dict[str, Any],
                 client: Client, application: dict[str, Any]) -> HandOff:
    """Park the request with who signed in and a secret only this page learns: the decision
    counts only from the page that signed in (an id seen elsewhere decides nothing)."""
    consent_token = new_token()
    if not oauth_store.update_authorization_request_extra(auth_id, {
            **pending.extra, "signedIn": signed_in, "consent": token_hash(consent_token)}):
        raise BadRequest("The sign-in request was completed by another tab.",
                         code="authorization_request_invalid")
    return HandOff(consent=ConsentRequest(
        client_name=application["name"], client_id=client.client_id,
        described_itself=client.described_itself, scopes=parse_scope(pending.scope),
        resources=tuple(pending.extra.get("resources") or ())), consent_token=consent_token,
        signed_in_as=_username_of(signed_in["sub"]))


def _username_of(user_id: str) -> str | None:
    user = directory.find_user_by_id(user_id)
    return user.username if user else None


def decide_consent(ctx: ServiceContext, *, auth_id: str, consent_token: str, approve: bool,
                   origin: RequestOrigin) -> HandOff:
    """The person's answer on the consent page: a code, or ``access_denied``."""
    pending = oauth_store.find_authorization_request(auth_id)
    if pending is None or not _consent_matches(pending, consent_token):
        raise BadRequest("This approval is unknown, expired or already answered; start again "
                         "from the application.", code="consent_invalid")
    request = _consume(auth_id)
    if not _consent_matches(request, consent_token):  # another tab of the person re-parked it
        raise BadRequest("The sign-in request was answered in another tab.",
                         code="consent_invalid")
    application = catalog_store.get_application(request.application_id)
    signed_in = request.extra["signedIn"]
    if not approve:
        refusal = f"You did not allow {application['name']} access."
        audit.record("oauth.consent", "denied",
                     origin=origin.acting_as(oauth_config(application)["clientId"]),
                     user_id=signed_in["sub"])
        return HandOff(redirect_uri=error_response_url(
            request.redirect_uri, AccessDenied(refusal, code="consent_denied"),
            state=request.state, issuer=ctx.config.issuer), refused=refusal)
    audit.record("oauth.consent", "success",
                 origin=origin.acting_as(oauth_config(application)["clientId"]),
                 user_id=signed_in["sub"],
                 details={"scopes": list(parse_scope(request.scope))})
    return _hand_off(ctx, request, application, signed_in, origin=origin)


def _consent_matches(request: StoredAuthorizationRequest, consent_token: str) -> bool:
    return hmac.compare_digest(str(request.extra.get("consent") or ""),
                               token_hash(consent_token))


def _consume(auth_id: str) -> StoredAuthorizationRequest:
    request = oauth_store.consume_authorization_request(auth_id)
    if request is None:
        raise BadRequest("The sign-in request was completed by another tab.",
                         code="authorization_request_invalid")
    return request


def _hand_off(ctx: ServiceContext, request: StoredAuthorizationRequest,
              application: dict[str, Any], signed_in: dict[str, Any], *,
              origin: RequestOrigin) -> HandOff:
    """The consumed request's answer: a code for the signed-in person, or ``access_denied``
    when they may not have what it asks (checked again after a consent: a role may have gone
    meanwhile). A sign-in resting on a password where passkeys only hold now is refused
    (403 ``passwords_not_allowed``): the rule may have been switched on while the request
    waited for the person's consent."""
    ensure_sign_in_counts(signed_in["amr"], application=application, user_id=signed_in["sub"])
    user = directory.find_user_by_id(signed_in["sub"])
    issuer = ctx.config.issuer
    refusal = user_refusal(user, application, parse_scope(request.scope))
    if refusal is not None or user is None:
        refusal = refusal or "The user no longer exists."
        audit.record("oauth.authorize", "denied",
                     origin=origin.acting_as(oauth_config(application)["clientId"]),
                     user_id=user.id if user else None,
                     details={"reason": refusal})
        return HandOff(redirect_uri=error_response_url(
            request.redirect_uri, AccessDenied(refusal), state=request.state, issuer=issuer),
            refused=refusal)
    code = new_token()
    with transaction():  # the grant, the code, the session's record and the event together
        grants.remember(user.id, request.application_id, list(parse_scope(request.scope)))
        family = sessions.record_client(
            session_id=signed_in["session"], application_id=request.application_id,
            user_id=user.id) if signed_in.get("session") else None
        oauth_store.create_code(
            code_hash=token_hash(code), application_id=request.application_id,
            user_id=user.id, redirect_uri=request.redirect_uri, scope=request.scope,
            nonce=request.nonce, code_challenge=request.code_challenge,
            code_challenge_method=request.code_challenge_method,
            auth_time=signed_in["authTime"], amr=signed_in["amr"],
            extra={"resources": request.extra.get("resources", []),
                   **({"family": family} if family else {}),
                   **({"dpopJkt": request.extra["dpopJkt"]}
                      if "dpopJkt" in request.extra else {})},
            expires_at=time.time() + ctx.config.oauth.code_ttl)
        audit.record("oauth.authorize", "success",
                     origin=origin.acting_as(oauth_config(application)["clientId"]),
                     user_id=user.id)
    return HandOff(redirect_uri=success_response_url(request.redirect_uri, code=code,
                                                     state=request.state, issuer=issuer))


def user_refusal(user: UserRecord | None, application: dict[str, Any],
                 scope: tuple[str, ...]) -> str | None:
    """Why this user may not get tokens with ``scope`` for this application, or None."""
    if user is None:
        return "The user no longer exists."
    if not is_usable(user):
        return "The account is disabled or locked."
    if not may_use(user, application.get("allowedUserTypes") or ()):
        return f"Users of type {user.user_type!r} may not use this application."
    not_held = roles.scopes_not_held(user.id, scope)
    if not_held:
        # Not naming the user: this text reaches the client in error_description.
        return (f"Your account holds no role that allows {' '.join(not_held)!r}. Ask an "
                "administrator to give you one.")
    return None
