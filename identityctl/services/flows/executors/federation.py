"""OIDCAuthExecutor, GoogleOIDCAuthExecutor, GithubOAuthExecutor and
FederatedAuthResolverExecutor: signing in through an upstream provider within a flow (the
conversation with the provider and its accounts: services/accounts/federation.py).
"""

from __future__ import annotations

import json
from typing import Any

from identityctl.errors import NotFound
from identityctl.federation import (
    GITHUB,
    KINDS,
    check_callback,
    start_authorization,
)
from identityctl.flow.engine import SUCCESS, TaskOutcome
from identityctl.services import audit
from identityctl.services.accounts import federation
from identityctl.services.directory import users as directory_service
from identityctl.services.flows.step import StepRequest
from identityctl.store import db, directory
from identityctl.store import identity_providers as store
from identityctl.store.identity_providers import ProviderRecord


def _start(step: StepRequest, provider: ProviderRecord) -> TaskOutcome:
    started = start_authorization(
        authorization_endpoint=federation.authorization_endpoint(provider),
        client_id=provider.client_id, redirect_uri=federation.callback_uri(step.ctx),
        scopes=provider.scopes, openid=provider.kind != GITHUB)
    step.context["federation"] = {"providerId": provider.id, "state": started.state,
                                  "nonce": started.nonce, "verifier": started.verifier}
    step.redirect_url = started.url
    return TaskOutcome("redirect")


def federated_sign_in(step: StepRequest, properties: dict[str, Any], *,
                      kinds: tuple[str, ...] = KINDS) -> TaskOutcome:
    """OIDCAuthExecutor (any provider, from property or input ``idpId``),
    GoogleOIDCAuthExecutor and GithubOAuthExecutor (``idpId`` of their kind)."""
    pending = step.context.pop("federation", None)
    if pending is not None and any(name in step.inputs for name in ("code", "error",
                                                                   "state")):
        return _finish(step, pending)
    reference = properties.get("idpId") or step.text("idpId")
    if not reference:
        return TaskOutcome("incomplete", "provider_not_found")
    try:
        provider = store.require_provider(reference)
    except NotFound:
        return TaskOutcome("incomplete", "provider_not_found")
    if provider.kind not in kinds:
        return TaskOutcome("failure", "provider_kind_mismatch")
    return _start(step, provider)


def _finish(step: StepRequest, pending: dict[str, Any]) -> TaskOutcome:
    """The provider's answer: a signed-in user, a new one, or an account to link."""
    if step.inputs.get("error") == federation.CANCELLED and "state" not in step.inputs:
        return TaskOutcome("incomplete", "federation_cancelled")  # back without an answer
    code = check_callback(step.inputs, expected_state=pending["state"])
    provider = store.require_provider(pending["providerId"])
    identity = federation.upstream_identity(step.ctx, provider, code, pending)
    details = {"provider": provider.handle, "subject": identity.subject}
    with db.transaction():
        user_id = store.linked_user(provider.id, identity.subject)
        if user_id is None and identity.email and federation.someone_proved(identity.email):
            step.context["federatedLink"] = {
                "providerId": provider.id, "subject": identity.subject,
                "provider": provider.name,
                "upstreamAccount": identity.email or identity.suggested_username()}
            audit.record("federation.link_required", "success",
                         origin=step.origin.acting_as(provider.handle), details=details)
            return TaskOutcome("incomplete", "federated_link_required")
        user = directory.get_user(user_id) if user_id else federation.new_linked_user(
            application=step.application, provider=provider, identity=identity,
            origin=step.origin)
        directory_service.ensure_usable(user)
        audit.record("federation.sign_in", "success", origin=step.origin.acting_as(user.id),
                     user_id=user.id, details=details)
    step.context["username"] = user.username
    step.signed_in(user.id, list(identity.amr))
    return SUCCESS


def link_pending(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """FederatedAuthResolverExecutor: an upstream account that waited for its owner is never
    linked as a side effect of a sign-in. After the person proved they control an account
    (passkey or password), the page names both accounts and asks (``incomplete``,
    ``federated_link_confirm``); only their answer links (:func:`confirm_link`)."""
    waiting = step.context.get("federatedLink")
    if waiting is None or not step.user_id:
        return SUCCESS
    step.additional["federatedLink"] = json.dumps({
        "provider": waiting["provider"], "upstreamAccount": waiting.get("upstreamAccount", ""),
        "account": directory.get_user(step.user_id).username})
    return TaskOutcome("incomplete", "federated_link_confirm")


def confirm_link(step: StepRequest, properties: dict[str, Any]) -> TaskOutcome:
    """FederatedAuthResolverExecutor, mode ``confirm``: the person signed in to this
    execution's account said yes; the upstream account joins it."""
    waiting = step.context.pop("federatedLink", None)
    if waiting is None or not step.user_id:
        return SUCCESS
    with db.transaction():
        store.link(waiting["providerId"], waiting["subject"], step.user_id)
        audit.record("federation.link", "success", origin=step.origin.acting_as(step.user_id),
                     user_id=step.user_id,
                     details={"providerId": waiting["providerId"],
                              "subject": waiting["subject"]})
    return SUCCESS
