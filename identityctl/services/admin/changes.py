"""Changes an AI assistant proposed over MCP, applied only when a person approves them.

With ``admin.approve_mcp_changes`` a mutating MCP tool does not make its change: its call
runs in a transaction that is rolled back, and what it would have changed in the
configuration is kept as a configuration-as-code fragment (``set``: entries as
``identityctl export`` shows them; ``remove``: keys) with the diff that fragment makes,
computed by the engine of ``identityctl apply --dry-run`` (services/admin/configuration.py).

An admin approves with a passkey assertion whose challenge is SHA-256(digest || nonce):
the digest covers the fragment and its diff, the nonce (fresh per approval) makes every
challenge new. The signature therefore covers the change shown, not just "yes". The
approval applies the fragment in one transaction and compares the diff it makes now with
the one approved: a deployment that moved in between gets a refusal (``change_conflict``),
never a merge. ``identityctl change approve`` is the host admin's approval (no passkey: they
hold the host).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable
from typing import Any

from identityctl.errors import BadRequest, Conflict, Forbidden, IdentityError
from identityctl.passkey import codec
from identityctl.passkey.codec import CredentialReader
from identityctl.security.secrets import token_hash
from identityctl.services import audit
from identityctl.services.accounts.passkeys import ceremonies
from identityctl.services.admin import configuration
from identityctl.services.admin.console import AdminHolder, checked_position, encode_cursor
from identityctl.services.context import ServiceContext
from identityctl.services.origin import RequestOrigin
from identityctl.store import changes as store
from identityctl.store import db
from identityctl.store import passkeys as passkey_store
from identityctl.store.changes import ChangeRecord
from identityctl.store.directory import UserRecord

PROPOSE_EVENT, APPROVE_EVENT, REJECT_EVENT = "change.propose", "change.approve", "change.reject"
NONCE_BYTES = 32


class _Proposed(Exception):
    """Raised to roll back the tool's call once its effect is read."""


class _Moved(Exception):
    """Raised to roll back an approval whose diff is no longer the approved one."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --- the digest and the challenge ---------------------------------------------------------


def _canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


def change_digest(document: dict[str, Any], diff: list[dict[str, Any]]) -> str:
    """SHA-256 (hex) of the fragment and its diff in canonical JSON (sorted keys, no blanks)."""
    return hashlib.sha256(_canonical({"document": document, "diff": diff})).hexdigest()


def approval_challenge(digest: str, nonce: bytes) -> bytes:
    """The WebAuthn challenge of an approval: SHA-256(digest bytes || nonce)."""
    return hashlib.sha256(bytes.fromhex(digest) + nonce).digest()


def console_url(ctx: ServiceContext, change_id: str) -> str:
    return f"{ctx.config.base_url}/admin#/changes/{change_id}"


# --- proposing ------------------------------------------------------------------------------


#: Changes one client may have waiting for a decision at a time.
PENDING_PER_CLIENT = 20


def propose(ctx: ServiceContext, *, summary: str, make: Callable[[], object], client_id: str,
            origin: RequestOrigin) -> ChangeRecord:
    """Record what ``make`` (a mutating tool's call) would change, without changing it. One
    client has at most ``PENDING_PER_CLIENT`` changes waiting: an assistant in a loop cannot
    bury a person's queue (nor spend the server on its diffs)."""
    if store.pending_of(client_id, now=time.time()) >= PENDING_PER_CLIENT:
        raise Conflict(f"{PENDING_PER_CLIENT} changes of this client already wait for "
                              "a decision; ask an administrator to decide them first.",
                              code="too_many_pending_changes")
    document = _effect(ctx, make)
    if not document["set"] and not document["remove"]:
        raise BadRequest(f"{summary}: this would change nothing in the configuration.",
                         code="nothing_to_change")
    diff = _diff(ctx, document, dry_run=True, origin=origin)
    now = time.time()
    digest = change_digest(document, diff)
    with db.transaction():
        made = store.create(summary=summary, document=document, diff=diff, digest=digest,
                            client_id=client_id, author=origin.actor, now=now,
                            expires_at=now + ctx.config.admin.change_ttl)
        audit.record(PROPOSE_EVENT, "success", origin=origin,
                     details={"changeId": made.id, "summary": summary, "digest": digest,
                              "clientId": client_id})
    return made


def _effect(ctx: ServiceContext, make: Callable[[], object]) -> dict[str, Any]:
    """What ``make`` changes in the configuration, as a fragment; its writes rolled back."""
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    try:
        with db.transaction():
            before = configuration.export(ctx)
            make()
            after = configuration.export(ctx)
            raise _Proposed
    except _Proposed:
        pass
    keys = {section.name: section.key for section in configuration.sections(ctx)}
    changed: dict[str, list[dict[str, Any]]] = {}
    removed: dict[str, list[str]] = {}
    for name in configuration.SECTIONS:
        was = {keys[name](entry): entry for entry in before.get(name, [])}
        now = {keys[name](entry): entry for entry in after.get(name, [])}
        entries = [entry for key, entry in now.items() if was.get(key) != entry]
        gone = [key for key in was if key not in now]
        if entries:
            changed[name] = entries
        if gone:
            removed[name] = gone
    return {"set": changed, "remove": removed}


def _document(ctx: ServiceContext, fragment: dict[str, Any]) -> dict[str, Any]:
    """The configuration document of the sections the fragment touches, as they are now with
    the fragment's entries set and removed (``apply`` manages whole sections)."""
    touched = [name for name in configuration.SECTIONS
               if name in fragment["set"] or name in fragment["remove"]]
    current = configuration.export(ctx, only=touched)
    keys = {section.name: section.key for section in configuration.sections(ctx)}
    for name in touched:
        entries = {keys[name](entry): entry for entry in current[name]}
        for key in fragment["remove"].get(name, []):
            entries.pop(key, None)
        for entry in fragment["set"].get(name, []):
            entries[keys[name](entry)] = entry
        current[name] = list(entries.values())
    return current


def _diff(ctx: ServiceContext, fragment: dict[str, Any], *, dry_run: bool,
          origin: RequestOrigin) -> list[dict[str, Any]]:
    changes = configuration.apply(ctx, _document(ctx, fragment), dry_run=dry_run, origin=origin,
                                  from_host=False)
    # As stored: through JSON, so a comparison with a stored diff compares like with like.
    return json.loads(_canonical([change.to_api() for change in changes]))


# --- reading --------------------------------------------------------------------------------


def shown(change: ChangeRecord, *, now: float | None = None) -> dict[str, Any]:
    """A change as the API answers it: a pending one past its expiry reads as expired."""
    answer = change.to_api()
    if change.state == store.PENDING and change.expires_at <= (now or time.time()):
        answer["state"] = store.EXPIRED
    return {**answer, "intact": change_digest(change.document, change.diff) == change.digest}


def list_changes(*, limit: int, position: list[Any] | None = None,
                 state: str | None = None) -> dict[str, Any]:
    """A page of changes, newest first: ``{items, next}``."""
    if state is not None and state not in store.STATES:
        raise BadRequest(f"state must be one of {', '.join(store.STATES)}",
                         code="invalid_field")
    checked = checked_position(position, float, str)
    after = (checked[0], checked[1]) if checked else None
    page = store.page(limit=limit, after=after, state=state)
    now = time.time()
    last = page[-1] if len(page) == limit else None
    return {"items": [shown(change, now=now) for change in page],
            "next": encode_cursor([last.created_at, last.id]) if last else None}


def require_change(change_id: str) -> ChangeRecord:
    return store.require(change_id)


# --- deciding -------------------------------------------------------------------------------


def _open(change_id: str, *, now: float, by: RequestOrigin) -> ChangeRecord:
    """The change, if it may still be approved: pending, unexpired, its digest intact."""
    change = store.require(change_id)
    if change.state == store.PENDING and change.expires_at <= now:
        store.decide(change.id, state=store.EXPIRED, by="", at=now)
        change.state = store.EXPIRED
    if change.state != store.PENDING:
        raise Conflict(f"The change is {change.state}; only a pending change can be decided.",
                       code="change_not_pending")
    if change_digest(change.document, change.diff) != change.digest:
        _fail(change, by=by, now=now, reason="its document or diff no longer matches its "
              "digest")
        raise Conflict("The change was altered after it was proposed (its digest no longer "
                       "matches); it cannot be approved.", code="change_tampered")
    return change


def _person(holder: AdminHolder) -> UserRecord:
    if holder.user is None:
        raise Forbidden("A proposed change is approved by a person with their passkey, not "
                        "by an application.", code="person_required")
    return holder.user


def approval_options(ctx: ServiceContext, holder: AdminHolder, change_id: str
                     ) -> dict[str, Any]:
    """The passkey assertion request that approves this change: request options for the
    admin's passkeys whose challenge is derived from the change's digest."""
    user = _person(holder)
    change = _open(change_id, now=time.time(), by=holder.origin)
    nonce = secrets.token_bytes(NONCE_BYTES)
    started = ceremonies.start_authentication(
        ctx, user_id=user.id, rp_id=ctx.config.passkey.rp_id, origin=holder.origin,
        scope=f"change:{change.id}", challenge=approval_challenge(change.digest, nonce))
    return {"publicKeyCredentialRequestOptions": started.options,
            "sessionToken": started.session_token, "nonce": codec.encode(nonce),
            "digest": change.digest}


def approve(ctx: ServiceContext, holder: AdminHolder, change_id: str, *,
            credential: CredentialReader, session_token: str, nonce: str) -> dict[str, Any]:
    """Verify the admin's assertion over this change's digest, then apply the change."""
    user = _person(holder)
    change = _open(change_id, now=time.time(), by=holder.origin)
    session = passkey_store.find_session(token_hash(session_token))
    expected = approval_challenge(change.digest, codec.decode(nonce, field="nonce"))
    if session is not None and session.challenge != codec.encode(expected):
        raise BadRequest("This assertion was not requested for this change's digest; ask "
                         "for the change's approval options again.", code="approval_mismatch")
    signed_in = ceremonies.finish_authentication(ctx, credential=credential,
                                                 session_token=session_token,
                                                 origin=holder.origin)
    if signed_in.user.id != user.id:
        raise Forbidden("The passkey is another person's than the signed-in admin's.",
                        code="approval_by_another")
    return _apply(ctx, change, by=holder.origin, via="passkey")


def approve_on_host(ctx: ServiceContext, change_id: str, *, origin: RequestOrigin
                    ) -> dict[str, Any]:
    """The host admin's approval (``identityctl change approve``): no passkey, they hold the
    host; audited as ``origin``'s actor."""
    return _apply(ctx, _open(change_id, now=time.time(), by=origin), by=origin,
                  via=origin.actor)


def _apply(ctx: ServiceContext, change: ChangeRecord, *, by: RequestOrigin, via: str
           ) -> dict[str, Any]:
    now = time.time()
    details = {"changeId": change.id, "summary": change.summary, "digest": change.digest,
               "author": change.author, "via": via}
    try:
        with db.transaction():
            if not store.decide(change.id, state=store.APPROVED, by=by.actor, at=now,
                                open_until=now):
                raise Conflict("The change was decided meanwhile (approved, rejected or "
                               "expired).", code="change_not_pending")
            diff = _diff(ctx, change.document, dry_run=False, origin=by)
            if diff != change.diff:
                raise _Moved("the configuration changed since it was proposed: applying it "
                             "now would make another diff than the one approved")
            audit.record(APPROVE_EVENT, "success", origin=by, details=details)
    except _Moved as moved:
        _refuse(change, by=by, now=now, reason=moved.reason)
    except IdentityError as error:
        if error.status >= 500 or error.code == "change_not_pending":
            raise
        _refuse(change, by=by, now=now, reason=error.description or error.message)
    return shown(store.require(change.id))


def _fail(change: ChangeRecord, *, by: RequestOrigin, now: float, reason: str) -> None:
    with db.transaction():
        store.decide(change.id, state=store.FAILED, by=by.actor, at=now, reason=reason)
        audit.record(APPROVE_EVENT, "failure", origin=by,
                     details={"changeId": change.id, "digest": change.digest,
                              "reason": reason})


def _refuse(change: ChangeRecord, *, by: RequestOrigin, now: float, reason: str) -> None:
    _fail(change, by=by, now=now, reason=reason)
    raise Conflict(f"The change no longer applies cleanly: {reason}. Nothing was changed; "
                   "propose it again.", code="change_conflict")


def reject(change_id: str, *, origin: RequestOrigin, reason: str = "") -> dict[str, Any]:
    """Turn a pending change down."""
    now = time.time()
    change = store.require(change_id)
    with db.transaction():
        if not store.decide(change.id, state=store.REJECTED, by=origin.actor, at=now,
                            reason=reason):
            raise Conflict(f"The change is {change.state}; only a pending change can be "
                           "rejected.", code="change_not_pending")
        audit.record(REJECT_EVENT, "success", origin=origin,
                     details={"changeId": change.id, "digest": change.digest,
                              "reason": reason})
    return shown(store.require(change.id))
