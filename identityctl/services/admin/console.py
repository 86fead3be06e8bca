"""Who may call the admin API (``/admin/api/v1``), and the step-up every change asks.

A call carries an access token for the admin API's own audience (``admin_audience``: a token
for /mcp, the account API or a resource server is refused) with the admin scope
(``admin.required_scope``). It acts for one of two:

- a person (the console, signed in through the hosted sign-in as ``identityctl-admin``) who
  still holds a role carrying the scope, is usable, and signed in with a passkey (``amr``);
  every change (any method but a read; admin_holder's ``changing``) needs that sign-in
  within ``admin.step_up_seconds`` (RFC 9470);
- an application acting for itself (client_credentials: automation), granted the scope by
  its registration. It has no sign-in to renew, so step-up does not apply to it.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from typing import Any

from identityctl.errors import Forbidden, InvalidField, Unauthorized
from identityctl.oauth.dpop import PresentedToken
from identityctl.security.tokens import require_scope
from identityctl.services.accounts.account import bearer_claims, require_sign_in_within
from identityctl.services.context import ServiceContext
from identityctl.services.directory.roles import roles_of
from identityctl.services.directory.users import is_usable
from identityctl.services.origin import RequestOrigin
from identityctl.store import directory
from identityctl.store.directory import UserRecord

ADMIN_CLIENT_ID = "identityctl-admin"
#: A list's page size: ``?limit=`` within these, this when not given.
PAGE_LIMITS, DEFAULT_PAGE_LIMIT = (1, 200), 50
#: The ``amr`` value only our own passkey sign-ins put in a token (``hwk`` beside it for a
#: device-bound one). An upstream provider's ``hwk``/``swk`` (an authenticator app's push
#: counts as ``swk``) is not ours to vouch for, and its silent single sign-on would make a
#: step-up without anyone present: only ``passkey`` counts.
PASSKEY_METHODS = frozenset({"passkey"})


@dataclass(frozen=True, slots=True)
class AdminHolder:
    """Who an admin API call acts for: a person (``user``) or an application (``user`` is
    None); ``origin`` is the request acting as them (``admin:<userId>`` or
    ``client:<clientId>`` in the audit log)."""

    origin: RequestOrigin
    client_id: str
    user: UserRecord | None = None
    #: When the person signed in (None for an application), and how (RFC 8176).
    auth_time: float | None = None
    amr: tuple[str, ...] = ()


def admin_holder(ctx: ServiceContext, presented: PresentedToken | None,
                 origin: RequestOrigin, *, changing: bool = False) -> AdminHolder:
    """Who the presented token (of a request from ``origin``) lets act on the admin API;
    else 401 (no token, not a live token for the admin API; a person ``changing`` something
    without the step-up) or 403 (no admin scope or role, no passkey sign-in)."""
    scope = ctx.config.admin.required_scope
    if presented is None:
        raise Unauthorized("The admin API needs 'Authorization: Bearer <token>' with scope "
                           f"'{scope}' (sign in on the admin console).", code="missing_token",
                           headers={"WWW-Authenticate": 'Bearer realm="identityctl"'})
    claims = bearer_claims(ctx, presented, audience=ctx.config.admin_audience)
    try:
        require_scope(claims, scope)
    except Forbidden as refusal:
        refusal.headers["WWW-Authenticate"] = f'Bearer error="insufficient_scope", scope="{scope}"'
        raise
    client_id, subject = str(claims.get("client_id") or ""), str(claims["sub"])
    if subject == client_id and "auth_time" not in claims:
        return AdminHolder(origin=origin.acting_as(f"client:{client_id}"), client_id=client_id)
    user = directory.find_user_by_id(subject)
    if user is None or not is_usable(user):
        raise Unauthorized("The account is disabled or no longer exists.",
                           code="user_inactive")
    # The scope was granted for a role; a role taken away since ends the access now, not
    # when the token expires.
    if not any(scope in role.scopes for role in roles_of(user.id)):
        raise Forbidden("You do not hold the admin role; ask an administrator for it.",
                        code="not_an_admin")
    amr = tuple(claims.get("amr") or ())
    if not PASSKEY_METHODS.intersection(amr):
        raise Forbidden("The admin console needs a sign-in with a passkey; sign in again "
                        "with yours.", code="passkey_required")
    holder = AdminHolder(origin=origin.acting_as(f"admin:{user.id}"), client_id=client_id,
                         user=user, auth_time=float(claims.get("auth_time") or 0), amr=amr)
    if changing:
        require_step_up(ctx, holder)
    return holder


def step_up_until(ctx: ServiceContext, holder: AdminHolder) -> float | None:
    """Until when the person's sign-in allows changes (None: an application, which step-up
    does not apply to)."""
    if holder.auth_time is None:
        return None
    return holder.auth_time + ctx.config.admin.step_up_seconds


def require_step_up(ctx: ServiceContext, holder: AdminHolder) -> None:
    """Every change by a person needs a sign-in within ``admin.step_up_seconds`` (RFC 9470,
    the account API's rule): a token left open on a desk, or stolen, reads but changes
    nothing (no credential minted, no role widened, nothing deleted) once that window has
    passed; else 401 ``sign_in_too_old`` and the console signs in again with ``max_age``."""
    if holder.auth_time is not None:
        require_sign_in_within(holder.auth_time, ctx.config.admin.step_up_seconds)


def me(ctx: ServiceContext, holder: AdminHolder) -> dict[str, object]:
    """The caller as the console shows it."""
    user = holder.user
    return {"id": user.id if user else holder.client_id,
            "username": user.username if user else holder.client_id,
            "displayName": _display_name(user) if user else holder.client_id,
            "actor": holder.origin.actor, "authTime": holder.auth_time, "amr": list(holder.amr),
            "stepUpUntil": step_up_until(ctx, holder)}


def _display_name(user: UserRecord) -> str:
    attributes = user.attributes
    full = " ".join(str(attributes[part]) for part in ("given_name", "family_name")
                    if attributes.get(part))
    return str(attributes.get("name") or full or user.username)


# --- paging: every list of the admin API -----------------------------------------------------


def page_limit(raw: str | None) -> int:
    """``?limit=``: 1..200, 50 when not given."""
    if raw is None or raw == "":
        return DEFAULT_PAGE_LIMIT
    low, high = PAGE_LIMITS
    # isascii: str.isdigit() also takes '²' (which int() refuses) and other scripts' digits.
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        raise InvalidField("limit", f"must be a whole number from {low} to {high}")
    return int(raw)


def encode_cursor(position: list[Any]) -> str:
    """The opaque ``next`` of a page: where the following page starts (a keyset position,
    never an offset)."""
    text = json.dumps(position, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> list[Any] | None:
    """The position a ``?cursor=`` names (None: the first page); anything this service did
    not make is 400 ``invalid_field``."""
    if not cursor:
        return None
    try:
        position = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        position = None
    if not isinstance(position, list) or not position:
        raise InvalidField("cursor", "must be the 'next' of a page this API answered")
    return position


def checked_position(after: list[Any] | None, *types: type) -> list[Any] | None:
    """A cursor's position (:func:`decode_cursor`) checked to be of ``types`` (finite
    numbers): one of another list's cursors, or one made by hand, is refused, not read."""
    if after is not None and (len(after) != len(types) or not all(
            isinstance(item, kind) and not isinstance(item, bool)
            and (not isinstance(item, float) or math.isfinite(item))
            for item, kind in zip(after, types, strict=True))):
        raise InvalidField("cursor", "must be the 'next' of a page this API answered")
    return after
