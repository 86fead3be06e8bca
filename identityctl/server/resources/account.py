"""The account page (``/account``, ``/account/enrol``, ``/device``) and its REST API
(``/account/api``).

The API takes the account page's access token (scope ``account``) and acts for its own user
(services/accounts/account.py). The two ``/account/api/enrol`` calls are the other device's, which
holds a one-time link instead of a token: they are browser posts with the Origin check.
"""

from __future__ import annotations

from typing import Any

import falcon

from identityctl.errors import InvalidField, MissingField
from identityctl.oauth.discovery import DEVICE_PATH
from identityctl.passkey import codec
from identityctl.server.openapi import error_response, json_body, json_response
from identityctl.server.requests import (
    json_object,
    language_of,
    object_field,
    page_address,
    presented_token,
    string_field,
)
from identityctl.server.resources.gate import write_page
from identityctl.server.resources.passkey import creation_answer
from identityctl.services.accounts import account
from identityctl.services.accounts.passkeys.ceremonies import MAX_CREDENTIAL_NAME
from identityctl.services.context import ServiceContext
from identityctl.services.oauth import device
from identityctl.ui import account_page

API = "/account/api"
ENROL_START, ENROL_FINISH = f"{API}/enrol/start", f"{API}/enrol/finish"
CREDENTIAL = "publicKeyCredential"


class _AccountResource:
    json_body = True

    def __init__(self, context: ServiceContext) -> None:
        self.context = context

    def holder(self, req: falcon.Request, resp: falcon.Response) -> account.AccountHolder:
        resp.set_header("Cache-Control", "no-store")
        return account.account_holder(self.context,
                                      presented_token(req, self.context.config.base_url),
                                      req.context.origin)


class PageResource:
    def __init__(self, context: ServiceContext, *, mode: str = "account") -> None:
        self.context, self.mode = context, mode

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        write_page(resp, account_page.page(self.context.config, mode=self.mode,
                                           language=language_of(req), here=page_address(req)))

    on_head = on_get  # a page: HEAD answers as GET does, without the body


class ProfileResource(_AccountResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = account.profile(self.context, self.holder(req, resp))


class EmailCodeResource(_AccountResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        holder = self.holder(req, resp)
        resp.status = falcon.HTTP_202
        resp.media = account.send_email_code(
            self.context, holder, json_object(req).get("address"), language=language_of(req))


class EmailConfirmResource(_AccountResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        holder = self.holder(req, resp)
        resp.media = account.confirm_email_code(self.context, holder,
                                                string_field(json_object(req), "code"))


class PasskeysResource(_AccountResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        holder = self.holder(req, resp)
        resp.media = {"passkeys": account.passkeys(self.context, holder),
                      "webauthn": account.webauthn_user(self.context, holder)}


class PasskeyResource(_AccountResource):
    def on_patch(self, req: falcon.Request, resp: falcon.Response, credential_id: str) -> None:
        holder = self.holder(req, resp)
        resp.media = account.rename_passkey(holder, credential_id, json_object(req).get("name"))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, credential_id: str) -> None:
        account.delete_passkey(self.context, self.holder(req, resp), credential_id)
        resp.status = falcon.HTTP_204


class PasskeyStartResource(_AccountResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = creation_answer(account.start_passkey(
            self.context, self.holder(req, resp)))


class PasskeyFinishResource(_AccountResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        holder, body = self.holder(req, resp), json_object(req)
        resp.status = falcon.HTTP_201
        resp.media = account.finish_passkey(
            self.context, user_id=holder.user.id,
            credential=codec.json_credential(object_field(body, CREDENTIAL)),
            session_token=string_field(body, "sessionToken"), name=body.get("credentialName"),
            origin=req.context.origin, language=language_of(req))


class EnrolmentLinkResource(_AccountResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = account.enrolment_link(self.context, self.holder(req, resp))


class EnrolStartResource(_AccountResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_header("Cache-Control", "no-store")
        username, started = account.start_linked_passkey(
            self.context, string_field(json_object(req), "link"),
            origin=req.context.origin)
        resp.media = {"username": username, **creation_answer(started)}


class EnrolFinishResource(_AccountResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req)
        resp.status = falcon.HTTP_201
        resp.media = account.finish_linked_passkey(
            self.context, string_field(body, "link"),
            credential=codec.json_credential(object_field(body, CREDENTIAL)),
            session_token=string_field(body, "sessionToken"), name=body.get("credentialName"),
            origin=req.context.origin, language=language_of(req))


class SessionsResource(_AccountResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"sessions": account.signed_in_clients(self.holder(req, resp))}


class SessionResource(_AccountResource):
    def on_delete(self, req: falcon.Request, resp: falcon.Response, family: str) -> None:
        account.sign_out_client(self.context, self.holder(req, resp), family)
        resp.status = falcon.HTTP_204


class BrowserSessionsResource(_AccountResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"browserSessions": account.signed_in_devices(self.context,
                                                                   self.holder(req, resp))}


class BrowserSessionResource(_AccountResource):
    def on_delete(self, req: falcon.Request, resp: falcon.Response, session_id: str) -> None:
        account.sign_out_device(self.context, self.holder(req, resp), session_id)
        resp.status = falcon.HTTP_204


class SignOutResource(_AccountResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        holder = self.holder(req, resp)
        resp.media = {"ended": account.sign_out_devices(
            self.context, holder, string_field(json_object(req), "scope"))}


class PasswordResource(_AccountResource):
    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        holder = self.holder(req, resp)
        account.change_password(self.context, holder,
                                string_field(json_object(req), "password"))
        resp.status = falcon.HTTP_204


class TOTPResource(_AccountResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.status = falcon.HTTP_201
        resp.media = account.start_totp(self.context, self.holder(req, resp))

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        account.remove_totp(self.context, self.holder(req, resp))
        resp.status = falcon.HTTP_204


class TOTPConfirmResource(_AccountResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        holder = self.holder(req, resp)
        account.confirm_totp(self.context, holder, string_field(json_object(req), "code"))
        resp.status = falcon.HTTP_204


class RecoveryCodesResource(_AccountResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        codes = account.new_recovery_codes(self.context, self.holder(req, resp))
        resp.status = falcon.HTTP_201
        resp.media = {"recoveryCodes": codes}


class DeviceResource(_AccountResource):
    """A device's sign-in (RFC 8628) as the person sees it on /device, and their answer."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = device.describe(self.context, self.holder(req, resp),
                                     req.get_param("userCode"))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req)
        decision = string_field(body, "decision")
        if decision not in ("allow", "deny"):
            raise InvalidField("decision", "must be 'allow' or 'deny'")
        resp.media = device.decide(self.context, self.holder(req, resp), body.get("userCode"),
                                   approve=decision == "allow")


class ConsentsResource(_AccountResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"consents": account.consents(self.holder(req, resp))}

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        holder = self.holder(req, resp)
        client_id = req.get_param("clientId")
        if not client_id:
            raise MissingField("clientId")
        account.revoke_consent(self.context, holder, client_id)
        resp.status = falcon.HTTP_204


def add_account_routes(app: falcon.App, context: ServiceContext) -> None:
    app.add_route("/account", PageResource(context))
    app.add_route("/account/enrol", PageResource(context, mode="enrol"))
    app.add_route(DEVICE_PATH, PageResource(context, mode="device"))
    app.add_route(f"{API}/device", DeviceResource(context))
    app.add_route(f"{API}/profile", ProfileResource(context))
    app.add_route(f"{API}/email/code", EmailCodeResource(context))
    app.add_route(f"{API}/email/confirm", EmailConfirmResource(context))
    app.add_route(f"{API}/passkeys", PasskeysResource(context))
    app.add_route(f"{API}/passkeys/start", PasskeyStartResource(context))
    app.add_route(f"{API}/passkeys/finish", PasskeyFinishResource(context))
    app.add_route(f"{API}/passkeys/link", EnrolmentLinkResource(context))
    app.add_route(API + "/passkeys/{credential_id}", PasskeyResource(context))
    app.add_route(ENROL_START, EnrolStartResource(context))
    app.add_route(ENROL_FINISH, EnrolFinishResource(context))
    app.add_route(f"{API}/sessions", SessionsResource(context))
    app.add_route(API + "/sessions/{family}", SessionResource(context))
    app.add_route(f"{API}/browser-sessions", BrowserSessionsResource(context))
    app.add_route(API + "/browser-sessions/{session_id}", BrowserSessionResource(context))
    app.add_route(f"{API}/sign-out", SignOutResource(context))
    app.add_route(f"{API}/password", PasswordResource(context))
    app.add_route(f"{API}/totp", TOTPResource(context))
    app.add_route(f"{API}/totp/confirm", TOTPConfirmResource(context))
    app.add_route(f"{API}/consents", ConsentsResource(context))
    app.add_route(f"{API}/recovery-codes", RecoveryCodesResource(context))


_BEARER = "Authorization: Bearer <the account page's access token, scope account>."
_DENIED = error_response("missing_token, invalid_token (revoked or expired), "
                         "insufficient_scope (no account scope), user_inactive.")
_STEP_UP = error_response("sign_in_too_old: the change needs a sign-in within "
                          "passkey.enrolment_window (WWW-Authenticate: Bearer "
                          "error=\"insufficient_user_authentication\", max_age).")
_CEREMONY = json_response("WebAuthn creation options and the session token to finish with.",
                          {"type": "object", "properties": {
                              "publicKeyCredentialCreationOptions": {"type": "object"},
                              "sessionToken": {"type": "string"}}})
_FINISH_BODY = json_body({"type": "object", "required": ["sessionToken", CREDENTIAL],
                          "properties": {"sessionToken": {"type": "string"},
                                         CREDENTIAL: {"type": "object"},
                                         "credentialName": {"type": "string"}}})
_REGISTERED = json_response("The new passkey.", {"type": "object"})


def _op(summary: str, operation: str, responses: dict[str, Any], **extra: Any) -> dict:
    return {"summary": summary, "operationId": operation, "description": _BEARER,
            "responses": {**responses, "401": _DENIED}, **extra}


_PATH_ID = [{"name": "credential_id", "in": "path", "required": True,
             "schema": {"type": "string"}}]

OPENAPI_PATHS = {
    f"{API}/profile": {"get": _op("The signed-in person's profile and roles",
                                  "accountProfile", {"200": json_response("The profile.",
                                                                          {"type": "object"})})},
    f"{API}/email/code": {"post": _op(
        "E-mail a code to confirm the person's address, or the one they want instead (the "
        "address changes only when the code comes back)", "accountEmailCode",
        {"202": json_response("{address, expiresAt}: the code is on its way.",
                              {"type": "object"}),
         "400": error_response("invalid_email, email_not_configured."),
         "429": error_response("too_many_codes: 5 codes an hour per person (the person's "
                               "own allowance: nobody else's requests spend it).")},
        requestBody=json_body({"type": "object", "required": ["address"],
                               "properties": {"address": {"type": "string"}}}))},
    f"{API}/email/confirm": {"post": _op(
        "Enter the code: its address is the person's, confirmed", "accountEmailConfirm",
        {"200": json_response("{address, emailVerified: true}", {"type": "object"}),
         "400": error_response("email_code_invalid, email_code_expired, email_code_not_sent."),
         "429": error_response("too_many_attempts: too many wrong codes.")},
        requestBody=json_body({"type": "object", "required": ["code"],
                               "properties": {"code": {"type": "string"}}}))},
    f"{API}/passkeys": {"get": _op("The person's passkeys", "accountPasskeys", {
        "200": json_response(
            "{passkeys: [...], webauthn: {rpId, userId, name, displayName}}: the passkeys, and "
            "what the page passes to the browser's Signal API (userId: the user handle, "
            "Base64URL).", {"type": "object", "required": ["passkeys", "webauthn"],
                            "properties": {"passkeys": {"type": "array"},
                                           "webauthn": {"type": "object"}}})})},
    f"{API}/passkeys/start": {"post": _op(
        "Start adding a passkey on this device (needs a recent sign-in)", "accountPasskeyStart",
        {"200": _CEREMONY, "401": _STEP_UP})},
    f"{API}/passkeys/finish": {"post": _op(
        "Finish adding a passkey on this device", "accountPasskeyFinish",
        {"201": _REGISTERED, "400": error_response("the passkey errors of docs/errors.md"),
         "403": error_response("token_for_another_user: another person's ceremony.")},
        requestBody=_FINISH_BODY)},
    f"{API}/passkeys/link": {"post": _op(
        "A one-time link (10 minutes) to add a passkey on another device", "accountPasskeyLink",
        {"200": json_response("{url, expiresAt}", {"type": "object"})})},
    API + "/passkeys/{credential_id}": {
        "parameters": _PATH_ID,
        "patch": _op("Rename a passkey", "accountPasskeyRename",
                     {"200": json_response("The passkey.", {"type": "object"}),
                      "400": error_response("missing_field (blank), invalid_field (more than "
                                            "64 characters)."),
                      "404": error_response("credential_not_found.")},
                     requestBody=json_body({"type": "object", "required": ["name"],
                                            "properties": {"name": {
                                                "type": "string", "minLength": 1,
                                                "maxLength": MAX_CREDENTIAL_NAME}}})),
        "delete": _op("Delete a passkey (needs a recent sign-in; never the last way to sign "
                      "in)", "accountPasskeyDelete",
                      {"204": {"description": "Deleted."},
                       "404": error_response("credential_not_found."),
                       "409": error_response("last_credential.")})},
    ENROL_START: {"post": {
        "summary": "The other device opened an enrolment link: start its passkey",
        "operationId": "accountEnrolStart",
        "requestBody": json_body({"type": "object", "required": ["link"],
                                  "properties": {"link": {"type": "string"}}}),
        "responses": {"200": _CEREMONY, "401": error_response(
            "invalid_token (not a link, expired), link_used, user_inactive.")}}},
    ENROL_FINISH: {"post": {
        "summary": "The other device's passkey (with the link again)",
        "operationId": "accountEnrolFinish",
        "requestBody": json_body({"type": "object", "required": ["link", "sessionToken",
                                                                 CREDENTIAL],
                                  "properties": {"link": {"type": "string"},
                                                 "sessionToken": {"type": "string"},
                                                 CREDENTIAL: {"type": "object"},
                                                 "credentialName": {"type": "string"}}}),
        "responses": {"201": _REGISTERED,
                      "400": error_response("the passkey errors of docs/errors.md")}}},
    f"{API}/sessions": {"get": _op("The clients the person is signed in to (refresh-token "
                                   "grants: client, when, address)", "accountSessions",
                                   {"200": json_response("{sessions: [...]}",
                                                         {"type": "object"})})},
    API + "/sessions/{family}": {
        "parameters": [{"name": "family", "in": "path", "required": True,
                        "schema": {"type": "string"}}],
        "delete": _op("Sign out of one client (its refresh fails from now on)",
                      "accountSessionEnd", {"204": {"description": "Ended."},
                                            "404": error_response("session_not_found.")})},
    f"{API}/browser-sessions": {"get": _op(
        "The devices (browser sessions) the person is signed in on: browser, system, "
        "address, since, last seen, applications, and which is this page's",
        "accountBrowserSessions",
        {"200": json_response("{browserSessions: [...]}", {"type": "object"})})},
    API + "/browser-sessions/{session_id}": {
        "parameters": [{"name": "session_id", "in": "path", "required": True,
                        "schema": {"type": "string"}}],
        "delete": _op("Sign out of one device: its session and the applications signed in "
                      "through it end (back-channel logout)", "accountBrowserSessionEnd",
                      {"204": {"description": "Ended."},
                       "404": error_response("device_not_found.")})},
    f"{API}/sign-out": {"post": _op(
        "Sign out of every other device (scope others) or of every device (everywhere), with "
        "back-channel logout", "accountSignOut",
        {"200": json_response("{ended: number of sessions}", {"type": "object"}),
         "400": error_response("invalid_field (scope).")},
        requestBody=json_body({"type": "object", "required": ["scope"], "properties": {
            "scope": {"enum": list(account.SIGN_OUT_SCOPES)}}}))},
    f"{API}/password": {"put": _op(
        "Set or change the password (needs a recent sign-in)", "accountPassword",
        {"204": {"description": "Set."}, "400": error_response("weak_password."),
         "403": error_response("passwords_not_allowed: passkeys only here.")},
        requestBody=json_body({"type": "object", "required": ["password"],
                               "properties": {"password": {"type": "string"}}}))},
    f"{API}/totp": {
        "post": _op("Set up an authenticator app (needs a recent sign-in): its QR code and "
                    "secret; active once a first code confirms it", "accountTotpStart",
                    {"201": json_response("{secret, uri (otpauth://), qrCode (SVG data URI)}",
                                          {"type": "object", "properties": {
                                              "secret": {"type": "string"},
                                              "uri": {"type": "string"},
                                              "qrCode": {"type": "string"}}}),
                     "401": _STEP_UP,
                     "403": error_response("passwords_not_allowed: passkeys only here."),
                     "409": error_response("totp_needs_password, totp_already_enrolled.")}),
        "delete": _op("Remove the authenticator app (needs a recent sign-in)",
                      "accountTotpRemove",
                      {"204": {"description": "Removed."}, "401": _STEP_UP,
                       "400": error_response("totp_not_enrolled.")})},
    f"{API}/totp/confirm": {"post": _op(
        "Confirm the authenticator app with a first code: from now on a password sign-in "
        "asks for its code", "accountTotpConfirm",
        {"204": {"description": "Active."},
         "400": error_response("invalid_totp_code, totp_not_pending."),
         "429": error_response("too_many_attempts: too many wrong codes.")},
        requestBody=json_body({"type": "object", "required": ["code"],
                               "properties": {"code": {"type": "string"}}}))},
    f"{API}/recovery-codes": {"post": _op(
        "New recovery codes, shown once (needs a recent sign-in; the old ones stop working)",
        "accountRecoveryCodes",
        {"201": json_response("{recoveryCodes: [10 codes]}", {
            "type": "object", "properties": {"recoveryCodes": {
                "type": "array", "items": {"type": "string"}}}}),
         "401": _STEP_UP})},
    f"{API}/consents": {
        "get": _op("The consents (grants) the person gave clients", "accountConsents",
                   {"200": json_response("{consents: [...]}", {"type": "object"})}),
        "delete": _op("Revoke a consent: the client's tokens end now", "accountConsentRevoke",
                      {"204": {"description": "Revoked."},
                       "404": error_response("grant_not_found.")},
                      parameters=[{"name": "clientId", "in": "query", "required": True,
                                   "schema": {"type": "string"}}])},
    f"{API}/device": {
        "get": _op("What a device's sign-in (RFC 8628) asks, by the code it shows",
                   "accountDeviceRequest",
                   {"200": json_response("{userCode, client, clientId, clientHost, "
                                         "registeredItself, scopes, resources}",
                                         {"type": "object"}),
                    "400": error_response("user_code_invalid: unknown, expired or answered."),
                    "429": error_response("too_many_attempts: too many wrong codes.")},
                   parameters=[{"name": "userCode", "in": "query", "required": True,
                                "schema": {"type": "string"}}]),
        "post": _op("Allow or deny a device's sign-in", "accountDeviceDecision",
                    {"200": json_response("{approved, reason?}: a refusal for a missing "
                                          "role or user type is a denial with its reason.",
                                          {"type": "object"}),
                     "400": error_response("user_code_invalid, invalid_field (decision)."),
                     "403": error_response("passwords_not_allowed: an approval by a password "
                                           "sign-in where passkeys only hold (the device's "
                                           "application, the person's unit); sign in with a "
                                           "passkey and approve again."),
                     "429": error_response("too_many_attempts.")},
                    requestBody=json_body({"type": "object", "required": ["userCode",
                                                                          "decision"],
                                           "properties": {"userCode": {"type": "string"},
                                                          "decision": {
                                                              "enum": ["allow", "deny"]}}}))},
}
