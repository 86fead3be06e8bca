"""PasskeyAuthExecutor: a passkey's sign-in and registration inside a flow, through
``services.accounts.passkeys`` so a flow proves exactly what the atomic API proves.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from identityctl.errors import (
    NotFound,
    TooManyRequests,
)
from identityctl.flow.engine import SUCCESS, TaskOutcome
from identityctl.passkey import codec
from identityctl.passkey.upgrade import upgrade_offer
from identityctl.services.accounts.passkeys import ceremonies
from identityctl.services.delivery import mail
from identityctl.services.flows.step import CORRECTABLE_BY_THE_USER, StepRequest
from identityctl.store import directory
from identityctl.store import passkeys as passkey_store
from identityctl.store.db import transaction


def challenge(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """PasskeyChallengeExecutor: options for the signed-in user, for the username the
    person gave (decoys when it has no passkey: nothing tells whether it exists), or
    usernameless. Its scope is this execution: no other start cancels it."""
    rp_id, scope = properties.get("relyingPartyId"), "flow:" + step.execution_id
    username = step.context.get("username")
    if step.user_id:
        try:
            started = ceremonies.start_authentication(
                step.ctx, user_id=step.user_id, rp_id=rp_id,
                origin=step.origin, scope=scope)
        except NotFound as error:  # signed in another way, no passkey yet
            return TaskOutcome("failure", error.code)
    elif username:
        started = ceremonies.start_named_authentication(
            step.ctx, username=username, rp_id=rp_id, origin=step.origin,
            scope=scope)
    else:
        started = ceremonies.start_authentication(
            step.ctx, user_id=None, rp_id=rp_id, origin=step.origin,
            scope=scope)
    step.context["passkeySession"] = started.session_token
    step.additional["passkeyChallenge"] = json.dumps(started.options)
    return SUCCESS


T = TypeVar("T")


def _finish_ceremony(step: StepRequest, finish: Callable[..., T], **arguments: Any) -> T:
    """Finish the ceremony this execution started (its session token is in the context)
    with the step's inputs; the token is forgotten once the ceremony consumed it."""
    finished = finish(step.ctx, credential=codec.flow_credential(step.inputs),
                      session_token=step.context.get("passkeySession", ""),
                      origin=step.origin, **arguments)
    del step.context["passkeySession"]
    return finished


def verify(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    signed_in = _finish_ceremony(step, ceremonies.finish_authentication)
    if step.user_id and step.user_id != signed_in.user.id:
        return TaskOutcome("failure", "credential_of_another_user")
    step.context["username"] = signed_in.user.username
    step.signed_in(signed_in.user.id, signed_in.amr)
    return SUCCESS


def register_start(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    if not step.user_id:
        return TaskOutcome("failure", "user_not_identified")
    started = ceremonies.start_registration(
        step.ctx, user_id=step.user_id, rp_id=properties.get("relyingPartyId"),
        scope="flow:" + step.execution_id,
        rp_name=properties.get("relyingPartyName"),
        authenticator_selection=properties.get("authenticatorSelection"),
        attestation=properties.get("attestation"), origin=step.origin)
    step.context["passkeySession"] = started.session_token
    step.additional["passkeyCreationOptions"] = json.dumps(started.options)
    return SUCCESS


def _store_new_passkey(step: StepRequest) -> ceremonies.RegisteredCredential:
    """The passkey the page made, verified and stored; what the step answers about it."""
    registered = _finish_ceremony(step, ceremonies.finish_registration,
                                  credential_name=step.inputs.get("credentialName"),
                                  language=step.language)
    step.additional.update({"passkeyCredentialID": registered.credential_id,
                            "passkeyCredentialName": registered.name,
                            "credentialCreatedAt": ceremonies.rfc3339(registered.created_at)})
    return registered


def register_finish(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    registered = _store_new_passkey(step)
    if step.user_id:  # making it needed the authenticator and its user verification
        step.signed_in(step.user_id, ["passkey"])
        if step.context.get("recovering"):  # the person is told, at their proven address
            mail.notify(step.ctx, directory.get_user(step.user_id), "passkey_added",
                        name=registered.name, how="recovery")
    return SUCCESS


#: The input in which a page says what its browser can (``upgrade.BROWSER_CAN``).
UPGRADE_INPUT = "passkeyUpgrade"


def upgrade(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """The automatic upgrade to a passkey, after a sign-in that used none: creation options
    (``additionalData.passkeyCreationOptions``) and what the page may do with them
    (``passkeyUpgrade``: ``conditional`` or ``offer``, :func:`upgrade_offer`), as the
    incomplete outcome ``passkey_upgrade``; only to a page that said what its browser can
    (input ``passkeyUpgrade``). Nothing to offer, or the start refused (throttled, say):
    success, and the sign-in goes on. An application with ``passkeyUpgrade: false`` is
    never offered one."""
    if not step.user_id or step.application.get("passkeyUpgrade") is False:
        return SUCCESS
    offer = upgrade_offer(amr=step.context.get("amr", []),
                          browser_can=step.text(UPGRADE_INPUT),
                          has_passkeys=bool(passkey_store.credential_descriptors(step.user_id)),
                          visible_step=properties.get("visibleStep", True) is not False)
    if offer is None:
        return SUCCESS
    try:
        started = ceremonies.start_registration(
            step.ctx, user_id=step.user_id, rp_id=properties.get("relyingPartyId"),
            scope="flow:" + step.execution_id, rp_name=properties.get("relyingPartyName"),
            authenticator_selection=properties.get("authenticatorSelection"),
            origin=step.origin, conditional=True)
    except (*CORRECTABLE_BY_THE_USER, TooManyRequests):
        return SUCCESS
    step.context["passkeySession"] = started.session_token
    step.additional["passkeyCreationOptions"] = json.dumps(started.options)
    step.additional["passkeyUpgrade"] = offer
    return TaskOutcome("incomplete", "passkey_upgrade")


def upgrade_finish(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """The upgrade's passkey, stored as any new one (audited ``passkey.register``) and told
    to the person by e-mail. The sign-in's methods stay as they were: a passkey made
    without a gesture proves nothing about this sign-in."""
    registered = _store_new_passkey(step)
    with transaction():
        mail.notify(step.ctx, directory.get_user(step.user_id), "passkey_added",
                    name=registered.name,
                    how="recovery" if step.context.get("recovering") else "sign_in")
    return SUCCESS
