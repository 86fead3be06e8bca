"""The people an admin looks after (the admin API's ``/users``): found by a prefix of their
username or address or by id, a page at a time; one person's whole picture; and what an
admin does to them. Every change goes through the service the CLI and MCP call
(directory/users, accounts/recovery, accounts/sessions, accounts/passkeys/admin), audited
with the admin's actor.
"""

from __future__ import annotations

from typing import Any

from identityctl.errors import Forbidden, InvalidField, NotFound
from identityctl.passkey.authenticators import authenticator_fields
from identityctl.security.usernames import username_key
from identityctl.services.accounts import recovery, sessions
from identityctl.services.accounts.passkeys.admin import delete_credential, list_credentials
from identityctl.services.admin.console import (
    AdminHolder,
    checked_position,
    encode_cursor,
)
from identityctl.services.clients.grants import list_grants
from identityctl.services.context import ServiceContext
from identityctl.services.directory import roles, users
from identityctl.store import audit as audit_store
from identityctl.store import directory
from identityctl.store.db import transaction

#: The states an admin sets (a locked account is unlocked by enabling it).
STATES = ("active", "disabled")
#: How many keys a page's position holds, in each order of the search.
_CURSOR_KEYS = {directory.BY_USERNAME: 1, directory.BY_EMAIL: 2}
#: How many of a person's audit events their page shows.
RECENT_EVENTS = 20


def search(q: str | None, *, limit: int, after: list[Any] | None) -> dict[str, Any]:
    """A page of people: everyone by username, or those whose username or address starts
    with ``q`` (usernames first, then addresses), or the one whose id ``q`` is.
    ``{items, next}``; ``next`` continues where this page ended."""
    text = (q or "").strip()
    if text and after is None:
        exact = directory.users_page(by=directory.BY_ID, prefix=text, after=None, limit=1)
        if exact:
            return {"items": [exact[0].api], "next": None}
    phase, position = directory.BY_USERNAME, None
    if after is not None:
        # [phase, its keys...]: every part a text, as many keys as the phase has.
        keys = _CURSOR_KEYS.get(after[0]) if isinstance(after[0], str) else None
        # (An unknown phase: no types, which no cursor matches.)
        checked_position(after, *([str] * (1 + keys) if keys is not None else []))
        phase, position = after[0], after[1:]
    items = directory.users_page(by=phase, prefix=_key(text) if phase == directory.BY_USERNAME
                                 else text.lower(), after=position, limit=limit + 1)
    if phase == directory.BY_USERNAME and text and len(items) <= limit:
        # The usernames are done: the addresses follow on the same page.
        items += directory.users_page(by=directory.BY_EMAIL, prefix=text.lower(), after=None,
                                      limit=limit + 1 - len(items))
    page = items[:limit]
    return {"items": [listed.api for listed in page],
            "next": encode_cursor(page[-1].position) if len(items) > limit else None}


def _key(text: str) -> str:
    """A username prefix as usernames are compared (RFC 8265); text that is no username's
    start (a space, an address) by its lower case."""
    try:
        return username_key(text) if text else ""
    except ValueError:
        return text.lower()


def user(ctx: ServiceContext, user_id: str) -> dict[str, Any]:
    """One person as the console shows them: the list's fields with their attributes, roles,
    passkeys (by authenticator), live browser sessions, consents and recent audit events."""
    found = directory.users_page(by=directory.BY_ID, prefix=user_id, after=None, limit=1)
    if not found:
        raise NotFound(f"No user with id '{user_id}'.", code="user_not_found")
    record = users.require_user(user_id)
    live = sessions.list_user_sessions(ctx, user_id)
    return {**found[0].api, "attributes": record.attributes,
            "roles": [role.name for role in roles.roles_of(user_id)],
            "passkeys": [{"id": key.credential_id, "name": key.name,
                          **authenticator_fields(key.aaguid, base_url=ctx.config.base_url),
                          "createdAt": key.created_at, "lastUsedAt": key.last_used_at}
                         for key in list_credentials(user_id)],
            "sessions": [{"id": session.public_id,
                          "browser": sessions.describe_browser(session.user_agent),
                          "address": session.client_address, "since": session.created_at,
                          "lastSeen": session.last_seen_at} for session in live],
            "consents": [{"clientId": grant.client_id, "applicationName": grant.application_name,
                          "scopes": grant.scopes} for grant in list_grants(user=user_id)],
            "recentEvents": audit_store.events(user_id=user_id, limit=RECENT_EVENTS)}


def create(ctx: ServiceContext, holder: AdminHolder, *, username: str, email: str | None,
           attributes: dict[str, Any] | None, user_type: str | None) -> dict[str, Any]:
    """A new person, of ``user_type`` (the default's when None), ``email`` among their
    attributes."""
    with_email = {**(attributes or {}), **({"email": email} if email is not None else {})}
    made = users.create_user(username=username, attributes=with_email,
                             user_type=user_type or users.DEFAULT_USER_TYPE,
                             origin=holder.origin)
    return user(ctx, made.id)


def change(ctx: ServiceContext, holder: AdminHolder, user_id: str, *, state: str | None,
           attributes: dict[str, Any] | None, user_type: str | None = None,
           ou: str | None = None) -> dict[str, Any]:
    """Disable or enable a person (``state``), replace their ``attributes``, give them
    another ``user_type`` (their attributes, the given ones or else their own, must suit
    its schema) and/or move them to the organization unit ``ou``. Disabling signs them out
    of every browser too, at once."""
    if state is not None and state not in STATES:
        raise InvalidField("state", "must be 'active' or 'disabled'")
    record = users.require_user(user_id)
    with transaction():
        if attributes is not None or ou is not None or user_type is not None:
            users.update_user(record.id, attributes=attributes, ou=ou, user_type=user_type,
                              origin=holder.origin)
        if state is not None and state != record.status:
            users.set_status(record.id, state, origin=holder.origin)
            if state == "disabled":
                sessions.end_user_sessions(ctx, record.id, origin=holder.origin,
                                           reason="account disabled by an administrator")
    return user(ctx, record.id)


def grant_role(holder: AdminHolder, user_id: str, role: str) -> None:
    """Give the person ``role`` (nothing changes when they hold it)."""
    roles.grant_role(users.require_user(user_id).id, role, origin=holder.origin)


def revoke_role(holder: AdminHolder, user_id: str, role: str) -> None:
    """Take ``role`` from the person (409 ``role_not_held`` when they do not hold it)."""
    roles.revoke_role(users.require_user(user_id).id, role, origin=holder.origin)


def choices() -> dict[str, list[Any]]:
    """What a person's page offers to choose from: the user types (with the attribute
    schema each asks for), organization units (handles) and roles, by name."""
    return {"userTypes": sorted(({"name": kind["name"], "schema": kind["schema"]}
                                 for kind in users.list_user_types()),
                                key=lambda kind: kind["name"]),
            "organizationUnits": sorted(unit["handle"] for unit in users.list_ous()),
            "roles": sorted(role.name for role in roles.list_roles())}


def delete(holder: AdminHolder, user_id: str) -> None:
    users.delete_user(users.require_user(user_id).id, origin=holder.origin)


def invite(ctx: ServiceContext, holder: AdminHolder, user_id: str, *,
           send_email: bool) -> dict[str, Any]:
    """A one-time link (and its QR code) with which the person enrols a passkey, e-mailed to
    them when ``send_email``. A step-up change (the link adds a passkey to their account);
    an administrator's link goes only to their own proven address, never to the caller: a
    link shown here would let one admin token become another admin."""
    record = users.require_user(user_id)
    if any(ctx.config.admin.required_scope in role.scopes for role in roles.roles_of(record.id)):
        proven = users.recovery_of(record, mail=ctx.config.email.enabled).email_verified
        if not send_email or not proven:
            raise Forbidden("An administrator's invitation is only e-mailed to their own "
                            "confirmed address: send it by e-mail, to an address they "
                            "confirmed.", code="admin_invite_by_email")
        made = recovery.invite(ctx, record.id, send_email=True, origin=holder.origin)
        return {"link": None, "qrSvg": None, "expiresAt": made["expiresAt"],
                "emailedTo": made["emailedTo"]}
    made = recovery.invite(ctx, record.id, send_email=send_email, origin=holder.origin)
    return {"link": made["url"], "qrSvg": made["qrCode"], "expiresAt": made["expiresAt"],
            "emailedTo": made["emailedTo"]}


def end_sessions(ctx: ServiceContext, holder: AdminHolder, user_id: str) -> int:
    """Sign the person out everywhere (back-channel logout); how many sessions ended."""
    return sessions.end_user_sessions(ctx, users.require_user(user_id).id, origin=holder.origin)


def end_session(ctx: ServiceContext, holder: AdminHolder, user_id: str,
                session_id: str) -> None:
    """End one of the person's browser sessions (the ``id`` their page shows)."""
    live = sessions.list_user_sessions(ctx, users.require_user(user_id).id)
    ending = [session.id for session in live if session.public_id == session_id]
    if not ending:
        raise NotFound("The person has no live session with this id.",
                       code="session_not_found")
    sessions.end_sessions(ctx, ending, origin=holder.origin, reason="ended by an administrator")


def reset_passkeys(ctx: ServiceContext, holder: AdminHolder, user_id: str) -> int:
    """Delete every passkey of the person (a lost device) and sign them out; they come back
    with an invitation or recovery. How many passkeys went."""
    record = users.require_user(user_id)
    keys = list_credentials(record.id)
    with transaction():
        for key in keys:
            delete_credential(record.id, key.credential_id, origin=holder.origin)
        sessions.end_user_sessions(ctx, record.id, origin=holder.origin,
                                   reason="passkeys reset by an administrator")
    return len(keys)
