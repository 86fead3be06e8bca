"""The OAuth 2.0 / OpenID Connect endpoints (thin adapters over ``services/oauth/``).

Token, revocation and introspection requests are form-encoded (RFC 6749 §3.2); their
errors carry RFC 6749's ``error`` / ``error_description`` next to our ``code`` (see
``identityctl.oauth.errors``). docs/oauth.md describes every endpoint.
"""

from __future__ import annotations

from typing import Any

import falcon

from identityctl.errors import BadRequest
from identityctl.oauth import discovery
from identityctl.oauth.dpop import HEADER as DPOP_HEADER
from identityctl.oauth.errors import InvalidRequest
from identityctl.server.openapi import error_response, json_response
from identityctl.server.openapi import json_body as json_request_body
from identityctl.server.requests import (
    bearer_token,
    json_object,
    json_value,
    language_of,
    page_address,
    presented_token,
    string_field,
)
from identityctl.server.resources.flow import browser_secret
from identityctl.server.resources.gate import write_page
from identityctl.services.accounts import sessions
from identityctl.services.clients import dpop, revocation
from identityctl.services.context import ServiceContext
from identityctl.services.oauth import (
    authorization,
    device,
    logout,
    pushed_requests,
    registration,
    resource_access,
    token_endpoint,
)
from identityctl.services.oauth import discovery as provider
from identityctl.ui import gate
from identityctl.ui.account_page import ACCOUNT_PATH

FORM = "application/x-www-form-urlencoded"


def _form(req: falcon.Request) -> dict[str, Any]:
    """The form-encoded body of an OAuth POST (anything else is invalid_request)."""
    media_type = (req.content_type or "").split(";")[0].strip().lower()
    if media_type != FORM:
        raise InvalidRequest(f"Send the parameters as {FORM} (got {req.content_type or 'none'}).",
                             code="form_body_required")
    return req.get_media(default_when_empty={})


def _cross_origin(req: falcon.Request, resp: falcon.Response, resource: object,
                  params: dict[str, Any]) -> None:
    """Browser apps (SPAs) call these endpoints cross-origin; no cookies are involved, so
    any origin may read the answers (errors included: the header is set before the
    responder runs)."""
    resp.set_header("Access-Control-Allow-Origin", "*")
    # A browser client reads the DPoP nonce and challenge (RFC 9449 §8, §7.1).
    resp.set_header("Access-Control-Expose-Headers", "DPoP-Nonce, WWW-Authenticate")


def _preflight(resp: falcon.Response, methods: str) -> None:
    resp.status = falcon.HTTP_204
    resp.set_header("Access-Control-Allow-Methods", methods)
    resp.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, DPoP")
    resp.set_header("Access-Control-Max-Age", "600")


def _client(req: falcon.Request) -> dict[str, Any]:
    """How the calling client identifies itself on token, revoke and introspect requests."""
    return {"authorization": req.get_header("Authorization"),
            "origin": req.context.origin}


def _with_proof(req: falcon.Request) -> dict[str, Any]:
    """:func:`_client`, and the request's DPoP proof (token and PAR endpoints)."""
    return {**_client(req), "dpop_proof": req.get_header(DPOP_HEADER)}


def _no_store(resp: falcon.Response) -> None:
    """RFC 6749 §5.1: token responses must not be cached."""
    resp.set_header("Cache-Control", "no-store")
    resp.set_header("Pragma", "no-cache")


# --- OpenAPI vocabulary: what the resources' operations share ----------------------------
# Each resource carries its operations (``openapi``). openapi.json_body is imported as
# json_request_body: a resource's own ``json_body = True`` hides that name in its class body.

_OAUTH_ERROR = {
    "type": "object", "required": ["code", "message", "description", "error",
                                   "error_description"],
    "properties": {
        "code": {"type": "string", "description": "Our stable, specific code."},
        "message": {"type": "string"}, "description": {"type": "string"},
        "error": {"type": "string", "description": "RFC 6749 §5.2 / RFC 6750 §3.1 error code."},
        "error_description": {"type": "string"}},
}


def _oauth_error(description: str) -> dict[str, Any]:
    return json_response(description, _OAUTH_ERROR)


def _form_body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"required": True, "content": {FORM: {"schema": {
        "type": "object", "required": required, "properties": properties}}}}


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _page(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"text/html": {}}}


_CLIENT_AUTH = ("Client authentication: HTTP Basic (client_secret_basic), client_id + "
                "client_secret in the body (client_secret_post), or client_id alone for "
                "public clients (none).")
_CLIENT_FIELDS = {"client_id": _string(_CLIENT_AUTH),
                  "client_secret": _string("For client_secret_post."),
                  "client_assertion_type": _string(
                      "For private_key_jwt: urn:ietf:params:oauth:client-assertion-type:"
                      "jwt-bearer."),
                  "client_assertion": _string(
                      "For private_key_jwt: a JWT signed with one of the client's keys "
                      "(iss and sub the client id, aud the issuer or this endpoint, a jti, "
                      "valid at most 300 s).")}
_CLIENT_ERRORS = ("invalid_request (form_body_required, repeated_parameter, missing_parameter, "
                  "multiple_client_auth, client_id_mismatch); invalid_client 401 "
                  "(client_auth_missing, malformed_client_credentials, "
                  "client_authentication_failed, client_auth_method_mismatch, "
                  "client_assertion_type_unsupported, client_assertion_invalid, "
                  "client_assertion_expired, client_assertion_audience, "
                  "client_assertion_lifetime, client_assertion_replayed, client_keys_missing, "
                  "client_keys_unavailable)")
_AUTHORIZE_QUERY = [
    {"name": name, "in": "query", "required": required, "schema": {"type": "string"},
     "description": description}
    for name, required, description in (
        ("response_type", True, "code"),
        ("client_id", True, "The application's client id."),
        ("redirect_uri", True, "Exactly one of the client's registered redirect URIs."),
        ("scope", False, "Space-separated; default: the client's allowed scopes."),
        ("state", False, "Returned unchanged."),
        ("nonce", False, "Copied into the ID token."),
        ("code_challenge", False, "PKCE S256 challenge (required for public clients and "
                                  "whenever pkceRequired)."),
        ("code_challenge_method", False, "S256 (plain is refused)."),
        ("resource", False, "RFC 8707 resource indicator(s): the access token's audience."),
        ("prompt", False, "login | consent | select_account; none answers login_required."))
]
_TOKEN_RESPONSE = {
    "type": "object", "required": ["access_token", "token_type", "expires_in", "scope"],
    "properties": {"access_token": _string("JWT (RFC 9068, typ at+jwt)."),
                   "token_type": {"const": "Bearer"}, "expires_in": {"type": "integer"},
                   "scope": {"type": "string"},
                   "id_token": _string("OIDC ID token (scope openid, user grants)."),
                   "refresh_token": _string("Opaque; rotates on every use.")},
}

_HAND_OFF = {"type": "object", "properties": {
    "redirect_uri": {"type": ["string", "null"], "format": "uri"},
    "refused": _string("Why the person may not give the client access, in plain words."),
    "consentToken": _string("Sent back with the person's decision."),
    "consent": {"type": "object", "description": "Who asks for what (client, clientId, "
                "clientHost, registeredItself, scopes with descriptions, resources)."}}}
_CLIENT_METADATA = {
    "type": "object", "required": ["redirect_uris"],
    "properties": {
        "redirect_uris": {"type": "array", "items": {"type": "string", "format": "uri"},
                          "description": "https URIs, or http on 127.0.0.1, [::1] or "
                                         "localhost (then any port matches, RFC 8252 §7.3)."},
        "client_name": _string("Shown to people (at most 100 characters)."),
        "grant_types": {"type": "array", "items": {"enum": ["authorization_code",
                                                            "refresh_token"]}},
        "response_types": {"type": "array", "items": {"const": "code"}},
        "token_endpoint_auth_method": {
            "enum": ["none", "private_key_jwt"],
            "description": "none (default): a public client, PKCE its proof. private_key_jwt: "
                           "it signs client assertions with a key of jwks or jwks_uri. No "
                           "secret is ever issued."},
        "jwks": {"type": "object", "description": "private_key_jwt: a JWK Set of public keys "
                 "(or jwks_uri, not both)."},
        "jwks_uri": _string("private_key_jwt: an https URL of the client's JWK Set."),
        "token_endpoint_auth_signing_alg": _string("private_key_jwt: the algorithm it signs "
                                                   "with (an asymmetric one)."),
        "dpop_bound_access_tokens": {"type": "boolean", "description": "RFC 9449 §5.2: every "
                                     "token request carries a DPoP proof."},
        "require_pushed_authorization_requests": {
            "type": "boolean", "description": "RFC 9126 §6: its authorization requests come "
                                              "through /oauth2/par only."},
        "scope": _string("Space-separated, within oauth.registration_scopes."),
        "client_uri": _string("https URL."), "logo_uri": _string("https URL.")},
}
_REGISTERED = {"type": "object", "required": ["client_id"], "properties": {
    "client_id": {"type": "string"}, "client_id_issued_at": {"type": "integer"},
    "registration_access_token": _string("RFC 7592: reads or deletes this registration."),
    "registration_client_uri": {"type": "string", "format": "uri"},
    **_CLIENT_METADATA["properties"]}}


# --- Resources -------------------------------------------------------------------------------

class _OAuthResource:
    def __init__(self, context: ServiceContext) -> None:
        self.context = context


class _PostResource(_OAuthResource):
    """An endpoint browsers' scripts may POST to (with ``_cross_origin``): its preflight."""

    def on_options(self, req: falcon.Request, resp: falcon.Response) -> None:
        _preflight(resp, "POST")


class AuthorizeResource(_OAuthResource):
    """GET (or form POST, OIDC Core §3.1.2.1) /oauth2/authorize -> 302."""

    openapi = {"get": {
        "summary": "Start an authorization (code flow): on to the hosted sign-in UI",
        "operationId": "oauthAuthorize", "parameters": [*_AUTHORIZE_QUERY, {
            "name": "request_uri", "in": "query", "required": False,
            "schema": {"type": "string"},
            "description": "A pushed request's request_uri from /oauth2/par (RFC 9126): then "
                           "only client_id is needed besides it; used once."}],
        "responses": {
            "302": {"description": "To {gate}/signin?authId&applicationId&executionId, or to "
                                   "redirect_uri with error, error_description, state and iss "
                                   "(unsupported_response_type, unauthorized_client, "
                                   "invalid_scope, invalid_request: pkce_required, "
                                   "pkce_method_unsupported, pkce_challenge_malformed, "
                                   "repeated_parameter..., login_required, server_error)."},
            "400": _page("An HTML error page, never a redirect: client_id_missing, "
                         "unknown_client, redirect_uri_missing, redirect_uri_mismatch, "
                         "repeated_parameter.")}}}

    def _authorize(self, req: falcon.Request, resp: falcon.Response,
                   parameters: dict[str, Any]) -> None:
        resp.status = falcon.HTTP_302
        resp.location = authorization.authorize(
            self.context, parameters, origin=req.context.origin,
            session_cookie=req.cookies.get(sessions.COOKIE), browser=browser_secret(req, resp))

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._authorize(req, resp, req.params)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._authorize(req, resp, _form(req))


def _set_session_cookie(resp: falcon.Response, value: str, max_age: int) -> None:
    """The browser session (services/accounts/sessions.py): ``__Host-`` with Secure and path /,
    HttpOnly (no script reads it), SameSite=Lax (sent on top-level navigations to
    /oauth2/authorize, never on another site's POST or fetch)."""
    resp.set_cookie(sessions.COOKIE, value, max_age=max_age, path="/", secure=True,
                    http_only=True, same_site="Lax")


class CallbackResource(_OAuthResource):
    """POST /oauth2/auth/callback {authId, assertion} -> {redirect_uri} (or a consent
    question); {authId, resume: "session"} when the browser's session signed the person in
    and only their consent is missing."""

    json_body = True

    openapi = {"post": {
        "summary": "Hand a completed sign-in back: the hosted UI's last step",
        "operationId": "oauthCallback",
        "description": "A completed sign-in starts the browser's session: the answer sets "
                       "the __Host-identityctl-session cookie (single sign-on). With "
                       "{authId, resume: \"session\"} instead of an assertion, the browser's "
                       "session is who signed in (the consent page after single sign-on).",
        "requestBody": json_request_body({"type": "object", "required": ["authId"],
                                  "properties": {"authId": _string("From the gate link."),
                                                 "assertion": _string("From the flow."),
                                                 "resume": {"enum": ["session"]}}}),
        "responses": {
            "200": json_response("Where the browser goes next: redirect_uri with code, state "
                                 "and iss (or error=access_denied, with `refused` for the "
                                 "person); or, for a client that described itself, the "
                                 "`consent` to ask and the `consentToken` that answers it.",
                                 _HAND_OFF),
            "400": error_response("missing_field, authorization_request_invalid (unknown, "
                                  "expired or used), assertion_for_another_application."),
            "401": error_response("invalid_token (the assertion), assertion_reused, "
                                  "session_expired (resume without a live session)."),
            "403": error_response("passwords_not_allowed: the sign-in (the assertion's, or "
                                  "the session's) rests on a password, and passkeys only "
                                  "hold for the application or the person's unit.")}}}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req)
        auth_id = string_field(body, "authId")
        cookie = req.cookies.get(sessions.COOKIE)
        if body.get("resume") == "session":
            handed = authorization.resume_with_session(
                self.context, auth_id=auth_id, session_cookie=cookie,
                origin=req.context.origin)
        else:
            handed = authorization.complete_authorization(
                self.context, auth_id=auth_id, assertion=string_field(body, "assertion"),
                origin=req.context.origin, user_agent=req.user_agent or "",
                session_cookie=cookie)
        if handed.new_session:
            _set_session_cookie(resp, handed.new_session,
                                self.context.config.session.absolute_timeout)
        resp.media = handed.to_api()


class ConsentResource(_OAuthResource):
    """POST /oauth2/auth/consent {authId, consentToken, decision} -> {redirect_uri}."""

    json_body = True

    openapi = {"post": {
        "summary": "The person's answer to a consent question of the hosted UI",
        "operationId": "oauthConsent",
        "requestBody": json_request_body({"type": "object",
                                  "required": ["authId", "consentToken", "decision"],
                                  "properties": {"authId": _string("From the gate link."),
                                                 "consentToken": _string("From the callback."),
                                                 "decision": {"enum": ["allow", "deny"]}}}),
        "responses": {
            "200": json_response("Where the browser goes next: redirect_uri with a code, or "
                                 "error=access_denied after a denial.", _HAND_OFF),
            "400": error_response("missing_field, invalid_field, consent_invalid (unknown, "
                                  "expired, answered, or another page's token).")}}}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req)
        decision = string_field(body, "decision")
        if decision not in ("allow", "deny"):
            raise BadRequest("decision must be 'allow' or 'deny'.", code="invalid_field")
        resp.media = authorization.decide_consent(
            self.context, auth_id=string_field(body, "authId"),
            consent_token=string_field(body, "consentToken"), approve=decision == "allow",
            origin=req.context.origin).to_api()


@falcon.before(_cross_origin)
class TokenResource(_PostResource):
    openapi = {"post": {
        "summary": "Exchange a grant for tokens (authorization_code, refresh_token, "
                   "client_credentials, device_code, token-exchange)",
        "operationId": "oauthToken",
        "requestBody": _form_body({
            "grant_type": _string("authorization_code | refresh_token | client_credentials | "
                                  "urn:ietf:params:oauth:grant-type:device_code | "
                                  "urn:ietf:params:oauth:grant-type:token-exchange"),
            "device_code": _string("device_code (RFC 8628)"),
            "subject_token": _string("token-exchange (RFC 8693): the user's access token"),
            "subject_token_type": _string("token-exchange: "
                                          "urn:ietf:params:oauth:token-type:access_token"),
            "actor_token": _string("token-exchange, optional"),
            "actor_token_type": _string("token-exchange, with actor_token"),
            "audience": _string("token-exchange: the target (or resource)"),
            "code": _string("authorization_code"), "redirect_uri": _string("authorization_code"),
            "code_verifier": _string("authorization_code with PKCE"),
            "refresh_token": _string("refresh_token"),
            "scope": _string("refresh_token (narrowing) or client_credentials"),
            "resource": _string("RFC 8707 audience"), **_CLIENT_FIELDS}, ["grant_type"]),
        "responses": {
            "200": json_response("Tokens (Cache-Control: no-store).", _TOKEN_RESPONSE),
            "400": _oauth_error(
                "unsupported_grant_type; unauthorized_client (grant_not_allowed); "
                "invalid_grant (invalid_code, code_expired, code_reused, redirect_uri_mismatch, "
                "pkce_downgrade, pkce_verifier_missing, pkce_verifier_malformed, pkce_mismatch, "
                "user_inactive, invalid_refresh_token, refresh_token_expired, "
                "refresh_token_reused, resource_not_authorized); invalid_scope "
                "(scope_not_allowed); invalid_target (invalid_resource); " + _CLIENT_ERRORS),
            "401": _oauth_error("invalid_client (see 400)."),
            "503": error_response("database_busy.")}}}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        _no_store(resp)
        resp.media = token_endpoint.token(self.context, _form(req), **_with_proof(req))
        resp.set_headers(dpop.nonce_headers(self.context))


@falcon.before(_cross_origin)
class PushedRequestResource(_PostResource):
    """POST /oauth2/par (RFC 9126) -> 201 {request_uri, expires_in}."""

    openapi = {"post": {
        "summary": "Push an authorization request (RFC 9126); the browser then carries only "
                   "client_id and the request_uri to /oauth2/authorize",
        "operationId": "oauthPushAuthorizationRequest",
        "requestBody": _form_body({
            **{parameter["name"]: _string(parameter["description"])
               for parameter in _AUTHORIZE_QUERY}, **_CLIENT_FIELDS},
            ["response_type", "client_id", "redirect_uri"]),
        "responses": {
            "201": json_response("The one-time request_uri, usable for expires_in seconds "
                                 "(Cache-Control: no-store).", {
                                     "type": "object", "required": ["request_uri", "expires_in"],
                                     "properties": {"request_uri": _string(
                                         "urn:ietf:params:oauth:request_uri:..."),
                                         "expires_in": {"type": "integer"}}}),
            "400": _oauth_error(
                "The errors /oauth2/authorize would send to the redirect URI, here as the "
                "answer: invalid_request (redirect_uri_missing, redirect_uri_mismatch, "
                "request_uri_not_allowed, pkce_required...), unsupported_response_type, "
                "unauthorized_client, invalid_scope, invalid_target; " + _CLIENT_ERRORS),
            "401": _oauth_error("invalid_client (see 400)."),
            "503": error_response("database_busy.")}}}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        _no_store(resp)
        resp.status = falcon.HTTP_201
        resp.media = pushed_requests.push(self.context, _form(req), **_with_proof(req))
        resp.set_headers(dpop.nonce_headers(self.context))


@falcon.before(_cross_origin)
class DeviceAuthorizationResource(_PostResource):
    """POST /oauth2/device_authorization (RFC 8628 §3.1) -> {device_code, user_code, ...}."""

    openapi = {"post": {
        "summary": "Start a device's sign-in (RFC 8628): the device shows the user code and "
                   "polls the token endpoint with the device code",
        "operationId": "oauthDeviceAuthorization",
        "requestBody": _form_body({
            "scope": _string("Space-separated; default: the client's allowed scopes."),
            "resource": _string("RFC 8707 resource indicator(s)."), **_CLIENT_FIELDS},
            ["client_id"]),
        "responses": {
            "200": json_response("device_code (secret), user_code (two groups of four "
                                 "letters: BCDF-GHJK), "
                                 "verification_uri ({base_url}/device), "
                                 "verification_uri_complete (for a QR code), expires_in, "
                                 "interval.", {"type": "object"}),
            "400": _oauth_error("unauthorized_client (grant_not_allowed: the client lacks "
                                "the device_code grant); invalid_scope; invalid_target; "
                                + _CLIENT_ERRORS),
            "401": _oauth_error("invalid_client (see 400)."),
            "503": error_response("database_busy.")}}}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        _no_store(resp)
        resp.media = device.start(self.context, _form(req), **_client(req))


@falcon.before(_cross_origin)
class UserinfoResource(_OAuthResource):
    openapi = {"get": {
        "summary": "Claims about the signed-in user (OIDC Core §5.3)",
        "operationId": "oauthUserinfo",
        "responses": {
            "200": json_response("sub and the claims the token's scope releases.",
                                 {"type": "object", "required": ["sub"]}),
            "401": _oauth_error("invalid_token (missing_token, invalid_token, user_inactive), "
                                "with WWW-Authenticate: Bearer."),
            "403": _oauth_error("insufficient_scope: the token has no openid scope.")}}}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _no_store(resp)
        resp.media = resource_access.userinfo(
            self.context, presented_token(req, self.context.config.base_url))

    on_post = on_get

    def on_options(self, req: falcon.Request, resp: falcon.Response) -> None:
        _preflight(resp, "GET, POST")


@falcon.before(_cross_origin)
class RevokeResource(_PostResource):
    openapi = {"post": {
        "summary": "Revoke a refresh token (its whole grant) or an access token (RFC 7009)",
        "operationId": "oauthRevoke",
        "requestBody": _form_body({"token": _string("The token."),
                                   "token_type_hint": _string("Ignored."), **_CLIENT_FIELDS},
                                  ["token"]),
        "responses": {"200": {"description": "Revoked, or not a token of this client."},
                      "400": _oauth_error(_CLIENT_ERRORS), "401": _oauth_error(_CLIENT_ERRORS)}}}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        revocation.revoke(self.context, _form(req), **_client(req))
        resp.status = falcon.HTTP_200


class IntrospectResource(_OAuthResource):
    openapi = {"post": {
        "summary": "Is this token active, and whose (RFC 7662; confidential clients)",
        "operationId": "oauthIntrospect",
        "requestBody": _form_body({"token": _string("The token."),
                                   "token_type_hint": _string("Ignored."), **_CLIENT_FIELDS},
                                  ["token"]),
        "responses": {
            "200": json_response("{active: false} or the token's claims.",
                                 {"type": "object", "required": ["active"]}),
            "400": _oauth_error("unauthorized_client (introspection_not_allowed: a public "
                                "or self-registered client); " + _CLIENT_ERRORS),
            "401": _oauth_error(_CLIENT_ERRORS)}}}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        _no_store(resp)
        resp.media = resource_access.introspect(self.context, _form(req), **_client(req))


@falcon.before(_cross_origin)
class JwksResource(_OAuthResource):
    openapi = {"get": {
        "summary": "Public keys that verify the service's tokens (current and previous)",
        "operationId": "oauthJwks",
        "responses": {"200": json_response("JWK Set (RFC 7517).", {
            "type": "object", "required": ["keys"],
            "properties": {"keys": {"type": "array", "items": {"type": "object"}}}})}}}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        # Short caching: a rotated key must reach verifiers well within a token's lifetime.
        resp.set_header("Cache-Control", "public, max-age=300")
        resp.media = provider.jwks()


@falcon.before(_cross_origin)
class MetadataResource(_OAuthResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_header("Cache-Control", "public, max-age=300")
        resp.media = provider.metadata(self.context)


def _metadata_operations(summary: str, operation_id: str) -> dict[str, Any]:
    """MetadataResource's operation at one of the two discovery paths it answers."""
    return {"get": {
        "summary": summary, "operationId": operation_id,
        "responses": {"200": json_response("Provider metadata.", {
            "type": "object", "required": ["issuer", "authorization_endpoint",
                                           "token_endpoint", "jwks_uri"]})}}}


class LogoutResource(_OAuthResource):
    """RP-initiated logout: back to the client's registered URI, or a signed-out page; a
    request no ID token vouches for asks the person first (a form posting back here)."""

    openapi = {"get": {
        "summary": "RP-initiated logout: ends the browser's session and the grant named by "
                   "the ID token's sid; without a valid id_token_hint the person confirms "
                   "first (a form posting back here with its confirmation)",
        "operationId": "oauthLogout",
        "parameters": [{"name": name, "in": "query", "required": False,
                        "schema": {"type": "string"}}
                       for name in ("id_token_hint", "client_id", "post_logout_redirect_uri",
                                    "state", "ui_locales")],
        "responses": {
            "302": {"description": "To post_logout_redirect_uri (a registered redirect URI "
                                   "of the client) with state."},
            "200": _page("The signed-out page (with a way back to the application or the "
                         "account page), or the \"Sign out of …?\" question."),
            "400": _page("An HTML error page: invalid_id_token_hint, client_id_mismatch, "
                         "logout_client_unknown, redirect_uri_mismatch.")}}}

    def _logout(self, req: falcon.Request, resp: falcon.Response,
                parameters: dict[str, Any]) -> None:
        config, language = self.context.config, language_of(req)
        answer = logout.logout(self.context, parameters, origin=req.context.origin,
                               session_cookie=req.cookies.get(sessions.COOKIE),
                               confirmation=parameters.get(logout.CONFIRMATION_FIELD))
        account_url = config.base_url + ACCOUNT_PATH
        if answer.confirmation:
            write_page(resp, gate.logout_question_page(
                config, action=config.base_url + discovery.LOGOUT_PATH,
                confirmation=answer.confirmation, parameters=answer.parameters,
                account_url=account_url, application_id=answer.application_id,
                language=language, here=page_address(req)))
            return
        _set_session_cookie(resp, "", 0)  # the browser forgets it
        if answer.location is None:
            write_page(resp, gate.signed_out_page(config, account_url=account_url,
                                                  application_id=answer.application_id,
                                                  language=language, here=page_address(req)))
        else:
            resp.status = falcon.HTTP_302
            resp.location = answer.location

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._logout(req, resp, req.params)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._logout(req, resp, _form(req))


@falcon.before(_cross_origin)
class RegisterResource(_PostResource):
    """POST /oauth2/register: Dynamic Client Registration (RFC 7591)."""

    json_body = True

    openapi = {"post": {
        "summary": "Register a client (RFC 7591 Dynamic Client Registration): public, or "
                   "with its own keys",
        "operationId": "oauthRegister",
        "description": "Open when oauth.dynamic_registration is \"open\"; with \"token\" it "
                       "needs an initial access token (scope client_registration) as Bearer.",
        "requestBody": json_request_body(_CLIENT_METADATA),
        "responses": {
            "201": json_response("The registered client (client_id, client_id_issued_at, "
                                 "the metadata as registered, and the RFC 7592 "
                                 "registration_access_token and registration_client_uri).",
                                 _REGISTERED),
            "400": _oauth_error("invalid_client_metadata (confidential_registration_unsupported, "
                                "scope_not_allowed), invalid_redirect_uri."),
            "401": error_response("missing_token, invalid_token (\"token\" mode)."),
            "403": error_response("insufficient_scope (\"token\" mode)."),
            "404": error_response("registration_disabled (oauth.dynamic_registration off)."),
            "429": error_response("too_many_attempts (oauth.registrations_per_address).")}}}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        _no_store(resp)
        resp.status = falcon.HTTP_201
        # RFC 7591 §3.2.2: a body that is not an object is invalid_client_metadata.
        resp.media = registration.register(self.context, json_value(req),
                                           access_token=presented_token(
                                               req, self.context.config.base_url),
                                           origin=req.context.origin)


@falcon.before(_cross_origin)
class RegistrationResource(_OAuthResource):
    """GET / DELETE /oauth2/register/{client_id}: a client's own registration (RFC 7592),
    with its registration access token."""

    openapi = {
        "parameters": [{"name": "client_id", "in": "path", "required": True,
                        "schema": {"type": "string"}}],
        "get": {
            "summary": "Read a client's own registration (RFC 7592 §2.1)",
            "operationId": "oauthRegistrationRead",
            "description": "Authorization: Bearer <registration_access_token>.",
            "responses": {
                "200": json_response("The registration, as registered.", _REGISTERED),
                "401": error_response("invalid_token: no token, a wrong one, or an unknown "
                                      "client (not told apart).")}},
        "delete": {
            "summary": "Delete a client's own registration (RFC 7592 §2.3)",
            "operationId": "oauthRegistrationDelete",
            "description": "Authorization: Bearer <registration_access_token>. The client, its "
                           "grants and every token it holds end at once.",
            "responses": {
                "204": {"description": "Deleted."},
                "401": error_response("invalid_token: no token, a wrong one, or an unknown "
                                      "client (not told apart).")}}}

    def on_get(self, req: falcon.Request, resp: falcon.Response, client_id: str) -> None:
        _no_store(resp)
        resp.media = registration.read_registration(self.context, client_id,
                                                    bearer_token(req))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, client_id: str) -> None:
        registration.delete_registration(self.context, client_id, bearer_token(req),
                                         origin=req.context.origin)
        resp.status = falcon.HTTP_204

    def on_options(self, req: falcon.Request, resp: falcon.Response, client_id: str) -> None:
        _preflight(resp, "GET, DELETE")


def add_oauth_routes(app: falcon.App, context: ServiceContext) -> None:
    app.add_route(discovery.AUTHORIZE_PATH, AuthorizeResource(context))
    app.add_route(discovery.CALLBACK_PATH, CallbackResource(context))
    app.add_route(discovery.CONSENT_PATH, ConsentResource(context))
    app.add_route(discovery.TOKEN_PATH, TokenResource(context))
    app.add_route(discovery.PAR_PATH, PushedRequestResource(context))
    app.add_route(discovery.DEVICE_AUTHORIZATION_PATH, DeviceAuthorizationResource(context))
    app.add_route(discovery.USERINFO_PATH, UserinfoResource(context))
    app.add_route(discovery.REVOKE_PATH, RevokeResource(context))
    app.add_route(discovery.INTROSPECT_PATH, IntrospectResource(context))
    app.add_route(discovery.JWKS_PATH, JwksResource(context))
    app.add_route(discovery.LOGOUT_PATH, LogoutResource(context))
    app.add_route(discovery.REGISTER_PATH, RegisterResource(context))
    app.add_route(discovery.REGISTER_PATH + "/{client_id}", RegistrationResource(context))
    metadata = MetadataResource(context)
    app.add_route(discovery.OPENID_CONFIGURATION_PATH, metadata)
    app.add_route(discovery.AUTHORIZATION_SERVER_PATH, metadata)


# --- OpenAPI --------------------------------------------------------------------------------

#: Each route's operations, as add_oauth_routes mounts them (server/openapi.py reads this).
OPENAPI_PATHS = {
    discovery.AUTHORIZE_PATH: AuthorizeResource.openapi,
    discovery.CALLBACK_PATH: CallbackResource.openapi,
    discovery.CONSENT_PATH: ConsentResource.openapi,
    discovery.TOKEN_PATH: TokenResource.openapi,
    discovery.PAR_PATH: PushedRequestResource.openapi,
    discovery.DEVICE_AUTHORIZATION_PATH: DeviceAuthorizationResource.openapi,
    discovery.USERINFO_PATH: UserinfoResource.openapi,
    discovery.REVOKE_PATH: RevokeResource.openapi,
    discovery.INTROSPECT_PATH: IntrospectResource.openapi,
    discovery.JWKS_PATH: JwksResource.openapi,
    discovery.LOGOUT_PATH: LogoutResource.openapi,
    discovery.REGISTER_PATH: RegisterResource.openapi,
    discovery.REGISTER_PATH + "/{client_id}": RegistrationResource.openapi,
    discovery.OPENID_CONFIGURATION_PATH: _metadata_operations("OpenID Connect discovery",
                                                              "oidcDiscovery"),
    discovery.AUTHORIZATION_SERVER_PATH: _metadata_operations(
        "OAuth 2.0 authorization server metadata (RFC 8414)", "oauthMetadata"),
}
