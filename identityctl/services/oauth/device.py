"""The device authorization grant (RFC 8628): a device that cannot show a sign-in page (a TV,
a command-line tool) gets a device code and a user code; the person opens ``/device`` on
their phone (typing the code, or scanning the QR code of ``verification_uri_complete``),
signs in there with a passkey and approves; the device, polling the token endpoint, then
gets its tokens (services/oauth/token_endpoint.py).

The page is the account page's client (it signs in like ``/account``); what it asks here
needs the person's account token. A user code is looked up only for a signed-in person, and
wrong codes are throttled per person and per address (services/attempts.py), so guessing
one of the 2.6e10 codes within its ten minutes is hopeless.
"""

from __future__ import annotations

import time
from typing import Any

from identityctl.errors import BadRequest
from identityctl.oauth.consent import ConsentRequest
from identityctl.oauth.discovery import DEVICE_AUTHORIZATION_PATH, DEVICE_PATH
from identityctl.oauth.errors import ServerError
from identityctl.oauth.grants.device_code import (
    new_user_code,
    normalized_user_code,
    readable_user_code,
)
from identityctl.oauth.parameters import RawParameters, parse_scope, read_parameters
from identityctl.security.secrets import new_token, token_hash
from identityctl.services import audit, catalog
from identityctl.services.accounts.account import AccountHolder
from identityctl.services.attempts import CredentialAttempt
from identityctl.services.catalog.applications import oauth_config
from identityctl.services.clients.client import authenticate_client, client_of
from identityctl.services.context import ServiceContext
from identityctl.services.directory.users import ensure_sign_in_counts
from identityctl.services.oauth.authorization import user_refusal
from identityctl.services.oauth.request_checks import EndpointRequest, run_checks
from identityctl.services.origin import RequestOrigin
from identityctl.store import device as device_store
from identityctl.store import grants
from identityctl.store.db import transaction
from identityctl.store.device import StoredDeviceAuthorization

#: Throttle action (and audit event) of a person typing a user code.
USER_CODE_ACTION = "oauth.device_user_code"
#: Draws of a user code before giving up (a collision with a live one is a 1 in 1e6 event).
_DRAWS = 5


def start(ctx: ServiceContext, raw: RawParameters, *, authorization: str | None,
          origin: RequestOrigin) -> dict[str, Any]:
    """``POST /oauth2/device_authorization`` (§3.1-3.2): the device code and user code."""
    parameters = read_parameters(raw)
    client = authenticate_client(ctx, parameters, authorization, origin=origin,
                                 endpoint=DEVICE_AUTHORIZATION_PATH)
    request = EndpointRequest(ctx=ctx, client=client, parameters=parameters)
    run_checks(DEVICE_AUTHORIZATION_PATH, request)
    scope = request.scope
    oauth, device_code = ctx.config.oauth, new_token(32)
    for _ in range(_DRAWS):
        user_code = new_user_code()
        if device_store.create(device_code_hash=token_hash(device_code), user_code=user_code,
                               application_id=client.application_id, scope=" ".join(scope),
                               extra={"resources": list(parameters.resources)},
                               interval=oauth.device_poll_interval,
                               expires_at=time.time() + oauth.device_code_ttl):
            break
    else:
        raise ServerError("No free user code could be drawn; try again.",
                          code="user_code_unavailable")
    audit.record("oauth.device_authorization", "success",
                 origin=origin.acting_as(client.client_id), details={"scope": " ".join(scope)})
    page = ctx.config.base_url + DEVICE_PATH
    readable = readable_user_code(user_code)
    return {"device_code": device_code, "user_code": readable, "verification_uri": page,
            "verification_uri_complete": f"{page}?user_code={readable}",
            "expires_in": oauth.device_code_ttl, "interval": oauth.device_poll_interval}


def describe(ctx: ServiceContext, holder: AccountHolder, user_code: object
             ) -> dict[str, Any]:
    """What the page asks the person about the device's request (as the consent page)."""
    found = _typed(ctx, holder, user_code)
    application = catalog.applications.get_application(found.application_id)
    client = client_of(application)
    return {"userCode": readable_user_code(found.user_code),
            "signedInAs": holder.user.username, **ConsentRequest(
        client_name=application["name"], client_id=client.client_id,
        described_itself=client.described_itself, scopes=parse_scope(found.scope),
        resources=tuple(found.extra.get("resources") or ())).to_api()}


def decide(ctx: ServiceContext, holder: AccountHolder, user_code: object, *, approve: bool
           ) -> dict[str, Any]:
    """The person's answer. An approval by someone who may not have what is asked (a role,
    the user type) becomes a denial, with the reason to show. An approval by a sign-in that
    rests on a password where passkeys only hold (the device's application, the person's
    unit) is refused (403 ``passwords_not_allowed``) and answers nothing: the person signs
    in with a passkey and approves again."""
    found = _typed(ctx, holder, user_code)
    application = catalog.applications.get_application(found.application_id)
    if approve:
        ensure_sign_in_counts(holder.amr, application=application, user_id=holder.user.id)
    refusal = user_refusal(holder.user, application, parse_scope(found.scope)) \
        if approve else None
    approved = approve and refusal is None
    with transaction():
        if not device_store.answer(found.user_code, approved=approved, user_id=holder.user.id,
                                   auth_time=holder.auth_time, amr=list(holder.amr)):
            raise _code_refused()
        if approved:
            grants.remember(holder.user.id, found.application_id,
                            list(parse_scope(found.scope)))
        audit.record("oauth.device_authorization", "success" if approved else "denied",
                     origin=holder.origin.acting_as(oauth_config(application)["clientId"]),
                     user_id=holder.user.id,
                     details={"reason": refusal} if refusal else {})
    return {"approved": approved, **({"reason": refusal} if refusal else {})}


def _typed(ctx: ServiceContext, holder: AccountHolder, user_code: object
           ) -> StoredDeviceAuthorization:
    """The unanswered authorization of the code the person typed; a wrong code counts
    against the person and the address (429 after too many)."""
    with CredentialAttempt(ctx, action=USER_CODE_ACTION, origin=holder.origin) as attempt:
        attempt.check("device-user:" + holder.user.id)
        attempt.at_stake(holder.user.id)
        code = normalized_user_code(user_code)
        found = device_store.unanswered_by_user_code(code) if code else None
        if found is None:
            attempt.fail("user_code_invalid")
            raise _code_refused()
        attempt.succeeded()
    return found


def _code_refused() -> BadRequest:
    return BadRequest("That code is not valid, or has expired or been answered. Check the "
                      "code your device shows.", code="user_code_invalid")
