"""The outcome of a completed sign-in: the assertion JWT and the authentication result.

Passkey finish and flow completion both end here, so the OAuth layer accepts one kind of
proof however the user signed in. The assertion is short-lived (``oauth.assertion_ttl``),
typed ``assertion+jwt`` (it cannot pass for an access or ID token) and addressed to the
issuer itself.
"""

from __future__ import annotations

import time
from typing import Any

from identityctl.security.tokens import ASSERTION_TYP
from identityctl.services.context import ServiceContext
from identityctl.store.directory import UserRecord


def issue_assertion(ctx: ServiceContext, user: UserRecord, amr: list[str], *,
                    application_id: str | None = None) -> str:
    """A signed statement that ``user`` just authenticated with the methods in ``amr``;
    ``application_id``: the application whose flow signed them in (its ``app`` claim), so
    the assertion completes that application's requests only and no other's flow stands in
    for its rules (passkeys only, a second step)."""
    claims = {"sub": user.id, "aud": ctx.config.issuer, "amr": list(amr),
              "user_type": user.user_type, "ou_id": user.ou_id, "auth_time": int(time.time())}
    if application_id is not None:
        claims["app"] = application_id
    return ctx.tokens.sign(claims, typ=ASSERTION_TYP, ttl=ctx.config.oauth.assertion_ttl)


def authentication_result(ctx: ServiceContext, user: UserRecord, amr: list[str], *,
                          skip_assertion: bool = False) -> dict[str, Any]:
    """``{id, type, ouId, assertion}``; ``skip_assertion`` leaves the assertion out (the
    caller only wanted to know who signed in, e.g. to chain another step itself)."""
    result: dict[str, Any] = {"id": user.id, "type": user.user_type, "ouId": user.ou_id}
    if not skip_assertion:
        result["assertion"] = issue_assertion(ctx, user, amr)
    return result
