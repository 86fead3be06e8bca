"""One attempt to prove a credential: a passkey ceremony's finish, a password, a client
secret. The one place where such an attempt is throttled (services.throttle) and audited.

    with CredentialAttempt(ctx, action=..., origin=...) as attempt:
        attempt.check(account)        # 429 while the address is refused (for the account)
        attempt.at_stake(user_id)     # the presented credential is the account's own
        ...                           # a VerificationError or attempt.fail() is a failure
        attempt.succeeded(user_id)    # clears the counts; the caller audits its success

A failure counts against the client address always, and against the account at this
address once the credential was at stake: somebody else's credential guesses nothing about
this account. Every caller-facing refusal leaving the block is audited once (``failure``,
``denied`` for a genuine-looking request refused, ``throttled`` for a 429).
"""

from __future__ import annotations

from identityctl.errors import IdentityError
from identityctl.passkey.verification import VerificationError
from identityctl.services import audit, throttle
from identityctl.services.context import ServiceContext
from identityctl.services.origin import RequestOrigin

#: Failures that are refusals of a genuine-looking request rather than bad input.
_DENIED_CODES = frozenset({"possible_clone", "account_unavailable", "backup_eligibility_changed",
                           "authenticator_not_allowed"})
#: Refusals by the brute-force throttle (429).
_THROTTLED_CODES = frozenset({"too_many_attempts"})


class CredentialAttempt:
    """A throttled, audited credential attempt (see the module's docstring)."""

    def __init__(self, ctx: ServiceContext, *, action: str, origin: RequestOrigin,
                 password: bool = False) -> None:
        self.ctx, self.action, self.origin = ctx, action, origin
        #: Password guesses are also bounded per account from all addresses together.
        self.password = password
        #: Who the audit events name: the actor (a typed username, a client id) and the user.
        self.actor = ""
        self.user_id: str | None = None
        self._account: str | None = None
        self._counted_account: str | None = None
        self._allowed = throttle.NOTHING_COUNTED
        self._audited = False

    def check(self, account: str | None) -> None:
        """Refuse with 429 while the address is refused for ``account`` or at all."""
        self._account = account
        self._allowed = throttle.ensure_allowed(self.ctx, action=self.action, account=account,
                                                origin=self.origin,
                                                password=self.password)

    def at_stake(self, user_id: str | None = None) -> None:
        """The credential presented is the account's own (to anyone outside: a passkey id
        a sign-in by its name offered, real or decoy): a failure counts against it."""
        self._counted_account = self._account
        if user_id is not None:
            self.user_id = user_id

    def fail(self, code: str) -> None:
        """A failure the caller answers without raising (a wrong password is a flow outcome,
        a wrong client secret an OAuth error): counted and audited now."""
        self._count_failure()
        self._audit("failure", {"code": code})

    def succeeded(self, *, final: bool = True) -> None:
        """Clear the counts; a password's success also trusts the address for the account.
        With a second step still to come (``final=False``) nothing changes: that step's
        success does both, so the failures it adds to this count are not wiped by a password
        typed again, and guesses at it stay bounded at every address."""
        if final:
            throttle.record_success(self._allowed)

    def _count_failure(self) -> None:
        throttle.record_failure(self.ctx, action=self.action, account=self._counted_account,
                                origin=self.origin, password=self.password)

    def _audit(self, outcome: str, details: dict[str, object]) -> None:
        self._audited = True
        audit.record(self.action, outcome,
                     origin=self.origin.acting_as(self.actor or self.user_id or ""),
                     user_id=self.user_id, details=details)

    def __enter__(self) -> CredentialAttempt:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: object) -> None:
        if isinstance(error, VerificationError):
            self._count_failure()
        if isinstance(error, IdentityError) and error.status < 500 and not self._audited:
            outcome = ("throttled" if error.code in _THROTTLED_CODES
                       else "denied" if error.code in _DENIED_CODES else "failure")
            self._audit(outcome, {"code": error.code, **getattr(error, "details", {})})
