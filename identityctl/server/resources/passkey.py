"""The passkey atomic API: /register/passkey/{start,finish} and /auth/passkey/{start,finish};
the icons of the authenticators passkeys are listed with (/authenticators/{aaguid}/icon).

Thin adapters over identityctl.services.accounts.passkeys.ceremonies (docs/passkey-api.md describes
the wire format and every error code). Enrolment needs a bearer token: see
``services.accounts.passkeys.enrolment.authorize_enrolment``.
"""

from __future__ import annotations

from typing import Any

import falcon

from identityctl.passkey import codec
from identityctl.passkey.authenticators import DARK, ICON_PATH, ICON_TYPE, LIGHT, authenticator_icon
from identityctl.server.openapi import error_response, json_body, json_response
from identityctl.server.requests import (
    bool_field,
    json_object,
    object_field,
    presented_token,
    string_field,
)
from identityctl.services.accounts import signin
from identityctl.services.accounts.passkeys import ceremonies, enrolment
from identityctl.services.context import ServiceContext

CREDENTIAL = "publicKeyCredential"


def creation_answer(started: ceremonies.CeremonyStart) -> dict[str, Any]:
    """A registration start's answer: the WebAuthn creation options and the session token
    that finishes it (the atomic API and the account page alike)."""
    return {"publicKeyCredentialCreationOptions": started.options,
            "sessionToken": started.session_token}


class _PasskeyResource:
    json_body = True

    def __init__(self, context: ServiceContext) -> None:
        self.context = context


class RegisterStartResource(_PasskeyResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req)
        user_id = string_field(body, "userId")
        enrolment.authorize_enrolment(self.context,
                                      presented=presented_token(req, self.context.config.base_url),
                                      user_id=user_id)
        started = ceremonies.start_registration(
            self.context, user_id=user_id,
            rp_id=string_field(body, "relyingPartyId", required=False),
            rp_name=string_field(body, "relyingPartyName", required=False),
            authenticator_selection=object_field(body, "authenticatorSelection",
                                                 required=False),
            attestation=body.get("attestation"), origin=req.context.origin)
        resp.media = creation_answer(started)


class RegisterFinishResource(_PasskeyResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req)
        credential = object_field(body, CREDENTIAL)
        session_token = string_field(body, "sessionToken")
        enrolment.authorize_registration_finish(
            self.context, presented=presented_token(req, self.context.config.base_url),
                                                session_token=session_token)
        registered = ceremonies.finish_registration(
            self.context, credential=codec.json_credential(credential),
            session_token=session_token,
            credential_name=body.get("credentialName"),
            origin=req.context.origin)
        resp.status = falcon.HTTP_201
        resp.media = registered.to_api()


class AuthStartResource(_PasskeyResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req)
        started = ceremonies.start_authentication(
            self.context, user_id=string_field(body, "userId", required=False, blank_ok=True),
            rp_id=string_field(body, "relyingPartyId", required=False),
            origin=req.context.origin)
        resp.media = {"publicKeyCredentialRequestOptions": started.options,
                      "sessionToken": started.session_token}


class AuthFinishResource(_PasskeyResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req)
        skip_assertion = bool_field(body, "skipAssertion")
        signed_in = ceremonies.finish_authentication(
            self.context, credential=codec.json_credential(object_field(body, CREDENTIAL)),
            session_token=string_field(body, "sessionToken"),
            origin=req.context.origin)
        resp.media = signin.authentication_result(self.context, signed_in.user, signed_in.amr,
                                                  skip_assertion=skip_assertion)


#: The icons are the community list's SVGs: shown with <img>, where an SVG runs nothing;
#: opened on their own, this policy keeps any script in one from running on our origin.
ICON_CSP = "default-src 'none'; style-src 'unsafe-inline'; sandbox"


class AuthenticatorIconResource:
    """GET /authenticators/{aaguid}/icon[?scheme=dark]: an authenticator's icon (SVG)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, aaguid: str) -> None:
        icon = authenticator_icon(aaguid, scheme=DARK if req.get_param("scheme") == DARK
                                  else LIGHT)
        if icon is None:
            raise falcon.HTTPNotFound(description=f"No icon for the authenticator '{aaguid}'.")
        resp.content_type = ICON_TYPE
        resp.data = icon
        resp.set_header("Content-Security-Policy", ICON_CSP)
        resp.set_header("Cache-Control", "public, max-age=86400")

    on_head = on_get


class RelatedOriginsResource:
    """WebAuthn L3 §5.11: the origins of other sites that may use this rp_id's passkeys.
    Browsers fetch it from https://<rp_id>/.well-known/webauthn, without credentials."""

    openapi = {"get": {
        "summary": "Related origins of the relying party (WebAuthn Related Origin Requests)",
        "operationId": "webauthnRelatedOrigins",
        "responses": {"200": json_response(
            "passkey.related_origins (Cache-Control: public, max-age=3600).", {
                "type": "object", "required": ["origins"], "properties": {
                    "origins": {"type": "array", "items": {"type": "string"}}}})}}}

    def __init__(self, context: ServiceContext) -> None:
        self.answer = {"origins": list(context.config.passkey.related_origins)}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        # It changes only with the configuration: browsers and caches may keep it an hour.
        resp.set_header("Cache-Control", "public, max-age=3600")
        resp.media = self.answer


def add_passkey_routes(app: falcon.App, context: ServiceContext) -> None:
    app.add_route("/.well-known/webauthn", RelatedOriginsResource(context))
    app.add_route(ICON_PATH, AuthenticatorIconResource())
    app.add_route("/register/passkey/start", RegisterStartResource(context))
    app.add_route("/register/passkey/finish", RegisterFinishResource(context))
    app.add_route("/auth/passkey/start", AuthStartResource(context))
    app.add_route("/auth/passkey/finish", AuthFinishResource(context))


# --- OpenAPI ----------------------------------------------------------------------------------

_B64URL = {"type": "string", "description": "Base64URL (padded, unpadded or standard Base64 "
                                            "accepted)."}
_ENUM_UV = {"type": "string", "enum": ["required", "preferred", "discouraged"]}
_BODY_ERRORS = ("malformed_json (body is not JSON), missing_body, missing_field, invalid_field "
                "(the description names the field)")
_ATTESTATION_ERRORS = (
    "malformed_base64url, invalid_credential_type, credential_id_mismatch, "
    "invalid_client_data, client_data_type_mismatch, challenge_mismatch, origin_mismatch, "
    "plain_http_origin, cross_origin_refused, rp_id_mismatch, user_presence_missing, "
    "user_verification_missing, invalid_backup_flags")
_SESSION_ERRORS = "unknown_session_token, stale_session_token, expired_session_token"
_COMMON_ERRORS = {
    "413": error_response("payload_too_large: the body exceeds server.max_body_bytes."),
    "415": error_response("unsupported_media_type: send Content-Type: application/json."),
    "503": error_response("database_busy: retry after the Retry-After seconds."),
}
_START_ERRORS = {
    "400": error_response(f"{_BODY_ERRORS}; relying_party_mismatch (relyingPartyId is not "
                          f"passkey.rp_id)."),
    "403": error_response("account_unavailable: the user is disabled or locked."),
    "404": error_response("user_not_found: no user with this userId."),
}
_ENROLMENT_FORBIDDEN = ("token_for_another_user, insufficient_scope (admin token without "
                        "'system'), account_unavailable.")
_AUTHORIZATION = {
    "401": error_response("authentication_required (no bearer token), invalid_token, "
                          "sign_in_too_old (the assertion is older than "
                          "passkey.enrolment_window)."),
    "403": error_response(_ENROLMENT_FORBIDDEN),
}
_CREDENTIAL_JSON = {
    "type": "object", "required": ["id", "type", "response"],
    "description": "PublicKeyCredential.toJSON() of the browser.",
    "properties": {"id": _B64URL, "rawId": _B64URL,
                   "type": {"type": "string", "enum": ["public-key"]},
                   "authenticatorAttachment": {"type": ["string", "null"]},
                   "clientExtensionResults": {"type": "object"}},
}
_OPTIONS = {"type": "object", "description": "WebAuthn JSON options (Base64URL strings): pass "
                                             "to PublicKeyCredential.parse*OptionsFromJSON."}


def _response_schema(required: list[str], optional: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": required,
            "properties": {**{name: _B64URL for name in required}, **optional}}


_ENROLMENT_AUTH = ("Needs `Authorization: Bearer <token>`: the assertion of a sign-in of the "
                   "same user within passkey.enrolment_window, or an admin access token "
                   "(`identityctl token --scope system`).")


def _operation(operation_id: str, summary: str, request: dict[str, Any],
               success: dict[str, Any], errors: dict[str, Any],
               description: str = "") -> dict[str, Any]:
    return {"post": {"summary": summary, "description": description,
                     "operationId": operation_id, "requestBody": json_body(request),
                     "responses": {**success, **_COMMON_ERRORS, **errors}}}


OPENAPI_PATHS: dict[str, dict] = {
    ICON_PATH: {"get": {
        "summary": "The icon of an authenticator that lists of passkeys name (SVG)",
        "operationId": "authenticatorIcon",
        "parameters": [{"name": "aaguid", "in": "path", "required": True,
                        "schema": {"type": "string", "format": "uuid"}},
                       {"name": "scheme", "in": "query", "required": False,
                        "description": "dark: the icon for dark backgrounds.",
                        "schema": {"type": "string", "enum": [LIGHT, DARK]}}],
        "responses": {"200": {"description": ICON_TYPE, "content": {ICON_TYPE: {}}},
                      "404": error_response("not_found: the list has no icon for it.")}}},
    "/register/passkey/start": _operation(
        "passkeyRegisterStart", "Creation options for a new passkey of an existing user",
        {"type": "object", "required": ["userId", "relyingPartyId"], "properties": {
            "userId": {"type": "string"}, "relyingPartyId": {"type": "string"},
            "relyingPartyName": {"type": "string"},
            "authenticatorSelection": {"type": "object", "properties": {
                "userVerification": _ENUM_UV,
                "authenticatorAttachment": {"type": "string",
                                            "enum": ["platform", "cross-platform"]},
                "residentKey": _ENUM_UV}},
            "attestation": {"type": "string",
                            "enum": ["none", "indirect", "direct", "enterprise"]}}},
        {"200": json_response("Options and the session token for the finish call.", {
            "type": "object", "required": ["publicKeyCredentialCreationOptions", "sessionToken"],
            "properties": {"publicKeyCredentialCreationOptions": _OPTIONS,
                           "sessionToken": {"type": "string"}}})},
        {**_START_ERRORS, **_AUTHORIZATION}, _ENROLMENT_AUTH),
    "/register/passkey/finish": _operation(
        "passkeyRegisterFinish", "Verify the attestation and store the passkey",
        {"type": "object", "required": ["publicKeyCredential", "sessionToken"], "properties": {
            "publicKeyCredential": {**_CREDENTIAL_JSON, "properties": {
                **_CREDENTIAL_JSON["properties"],
                "response": _response_schema(["clientDataJSON", "attestationObject"], {
                    "transports": {"type": "array", "items": {"type": "string"}}})}},
            "sessionToken": {"type": "string"},
            "credentialName": {"type": "string", "maxLength": 64}}},
        {"201": json_response("The stored credential.", {
            "type": "object", "required": ["CredentialID", "CredentialName", "CreatedAt"],
            "properties": {"CredentialID": _B64URL, "CredentialName": {"type": "string"},
                           "CreatedAt": {"type": "string", "format": "date-time"}}})},
        {"400": error_response(f"{_BODY_ERRORS}; {_SESSION_ERRORS}; {_ATTESTATION_ERRORS}, "
                               f"credential_id_too_long, unsupported_public_key, "
                               f"algorithm_not_offered, authenticator_attachment_mismatch, "
                               f"invalid_attestation."),
         "409": error_response("credential_already_registered."),
         **_AUTHORIZATION,
         "403": error_response(f"{_ENROLMENT_FORBIDDEN} authenticator_not_allowed: the "
                               "deployment's policy (passkey.aaguid_allow, aaguid_deny, "
                               "metadata) refuses this authenticator."),
         "503": error_response("attestation_metadata_missing, attestation_metadata_expired: "
                               "passkey.metadata is on and no current FIDO metadata is "
                               "loaded; database_busy.")}, _ENROLMENT_AUTH),
    "/auth/passkey/start": _operation(
        "passkeyAuthStart", "Request options for a sign-in (usernameless without userId)",
        {"type": "object", "required": ["relyingPartyId"], "properties": {
            "userId": {"type": "string", "description": "Omit or blank: usernameless."},
            "relyingPartyId": {"type": "string"}}},
        {"200": json_response("Options and the session token for the finish call.", {
            "type": "object", "required": ["publicKeyCredentialRequestOptions", "sessionToken"],
            "properties": {"publicKeyCredentialRequestOptions": _OPTIONS,
                           "sessionToken": {"type": "string"}}})},
        {**_START_ERRORS, "404": error_response("user_not_found; no_passkeys (the user has "
                                                "no passkey).")}),
    "/auth/passkey/finish": _operation(
        "passkeyAuthFinish", "Verify the assertion; the authentication result",
        {"type": "object", "required": ["publicKeyCredential", "sessionToken"], "properties": {
            "publicKeyCredential": {**_CREDENTIAL_JSON, "properties": {
                **_CREDENTIAL_JSON["properties"],
                "response": _response_schema(
                    ["clientDataJSON", "authenticatorData", "signature"],
                    {"userHandle": {"type": ["string", "null"]}})}},
            "sessionToken": {"type": "string"},
            "skipAssertion": {"type": "boolean", "default": False}}},
        {"200": json_response("Who signed in; `assertion` unless skipAssertion.", {
            "type": "object", "required": ["id", "type", "ouId"], "properties": {
                "id": {"type": "string"}, "type": {"type": "string"},
                "ouId": {"type": "string"},
                "assertion": {"type": "string", "description": "JWT (typ assertion+jwt)."}}})},
        {"400": error_response(f"{_BODY_ERRORS}; {_SESSION_ERRORS}; {_ATTESTATION_ERRORS}, "
                               f"invalid_authenticator_data, unknown_credential (usernameless: "
                               f"this credential id and user handle are not registered), "
                               f"credential_not_allowed, user_handle_missing, "
                               f"user_handle_mismatch, invalid_signature, "
                               f"backup_eligibility_changed, possible_clone."),
         "403": error_response("account_unavailable: the user is disabled or locked.")}),
    "/.well-known/webauthn": RelatedOriginsResource.openapi,
}
