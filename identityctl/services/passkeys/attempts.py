"""A ceremony finish as an attempt: its failure audit event and its brute-force throttle.

Both wrap the whole finish of a registration or a sign-in (``ceremonies``) as context
managers, so every way it fails is audited once and a failed verification is counted.
"""

from __future__ import annotations

from identityctl.errors import IdentityError
from identityctl.passkey.verification import VerificationError
from identityctl.services import throttle
from identityctl.services.context import ServiceContext
from identityctl.store import audit

#: Failures that are refusals of a genuine-looking request rather than bad input.
_DENIED_CODES = frozenset({"possible_clone", "account_unavailable", "backup_eligibility_changed"})
#: Refusals by the brute-force throttle (429).
_THROTTLED_CODES = frozenset({"too_many_attempts"})


class AuditedAttempt:
    """Records one failure audit event when the block raises a caller-facing error."""

    def __init__(self, event: str, client_address: str) -> None:
        self.event, self.client_address = event, client_address
        self.user_id: str | None = None

    def __enter__(self) -> AuditedAttempt:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: object) -> None:
        if isinstance(error, IdentityError) and error.status < 500:
            outcome = ("throttled" if error.code in _THROTTLED_CODES
                       else "denied" if error.code in _DENIED_CODES else "failure")
            audit.record(self.event, outcome,
                         actor=self.user_id or "", user_id=self.user_id,
                         client_address=self.client_address,
                         details={"code": error.code, **getattr(error, "details", {})})


class ThrottledAttempt:
    """Brute-force throttling of a ceremony finish (services.throttle).

    :meth:`check` refuses with 429 while the client address is refused for the account (the
    session user's username) or at all. A :class:`VerificationError` leaving the block counts
    as a failure against the address and, once :meth:`at_stake` said the presented
    credential is the account's own, against the account at this address: a credential of
    somebody else guesses nothing about this account. :meth:`succeeded` clears the count.
    """

    def __init__(self, ctx: ServiceContext, action: str, client_address: str) -> None:
        self.ctx, self.action, self.client_address = ctx, action, client_address
        self.account: str | None = None
        self.counted_account: str | None = None
        self.allowed = throttle.NOTHING_COUNTED

    def check(self, account: str | None) -> None:
        self.account = account
        self.allowed = throttle.ensure_allowed(self.ctx, action=self.action, account=account,
                                               client_address=self.client_address)

    def at_stake(self) -> None:
        self.counted_account = self.account

    def succeeded(self) -> None:
        throttle.record_success(self.allowed)

    def __enter__(self) -> ThrottledAttempt:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: object) -> None:
        if isinstance(error, VerificationError):
            throttle.record_failure(self.ctx, action=self.action, account=self.counted_account,
                                    client_address=self.client_address)
