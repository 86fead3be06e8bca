"""Who may enrol a passkey: the bearer token a registration start and finish need.

A recent sign-in assertion of the user enrols for that user only; an admin access token
(scope ``system``) for any user.
"""

from __future__ import annotations

import time
from typing import Any

from identityctl.errors import Forbidden, Unauthorized
from identityctl.oauth.dpop import PresentedToken
from identityctl.security.secrets import token_hash
from identityctl.security.tokens import ACCESS_TOKEN_TYP, require_scope, token_type
from identityctl.services.clients.bearer import verify_presented
from identityctl.services.context import ServiceContext
from identityctl.store import passkeys as store

ADMIN_SCOPE = "system"


def _enrolment_subject(ctx: ServiceContext, presented: PresentedToken | None) -> str | None:
    """The user a bearer token lets enrol passkeys for, or None for an admin (any user).

    A sign-in assertion counts only while it is younger than passkey.enrolment_window; an
    access token needs the admin scope. Anything else is 401 (or 403 for a valid token
    without the scope).
    """
    if presented is None:
        raise Unauthorized("Registering a passkey needs 'Authorization: Bearer <token>': the "
                           "assertion of a recent sign-in of that user, or an admin token "
                           "(identityctl token --scope system).", code="authentication_required",
                           headers={"WWW-Authenticate": 'Bearer realm="identityctl"'})
    if token_type(presented.token) == ACCESS_TOKEN_TYP:
        claims = verify_presented(ctx, presented, audience=ctx.config.issuer)
        require_scope(claims, ADMIN_SCOPE)
        return None
    # Anything else must be an assertion; its check names what is wrong with it.
    claims = ctx.tokens.verify_assertion(presented.token)
    signed_in_at = claims.get("auth_time", claims["iat"])
    if time.time() - signed_in_at > ctx.config.passkey.enrolment_window:
        raise Unauthorized("The sign-in is too old to enrol a passkey; sign in again.",
                           code="sign_in_too_old",
                           headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    return str(claims["sub"])


def _refuse_other_user() -> Forbidden:
    return Forbidden("The token proves a sign-in of another user; a passkey can only be "
                     "enrolled by its own user or an admin.", code="token_for_another_user")


def authorize_enrolment(ctx: ServiceContext, *, presented: PresentedToken | None,
                        user_id: str) -> None:
    """401 without a usable token, 403 when it belongs to another user than ``user_id``."""
    subject = _enrolment_subject(ctx, presented)
    if subject is not None and subject != user_id:
        raise _refuse_other_user()


def authorize_registration_finish(ctx: ServiceContext, *, presented: PresentedToken | None,
                                  session_token: Any) -> None:
    """:func:`authorize_enrolment` for the user whose registration ``session_token`` started.

    An unknown token is left to :func:`ceremonies.finish_registration` to report.
    """
    subject = _enrolment_subject(ctx, presented)
    if subject is None or not isinstance(session_token, str) or not session_token:
        return
    session = store.find_session(token_hash(session_token))
    if session is not None and session.ceremony == store.REGISTRATION \
            and session.user_id != subject:
        raise _refuse_other_user()
