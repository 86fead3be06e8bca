"""Codes the account page e-mailed to confirm an address: one pending per person."""

from __future__ import annotations

from dataclasses import dataclass

from identityctl.store.models import EmailCode


@dataclass(slots=True)
class PendingCode:
    user_id: str
    address: str
    code_hash: str
    expires_at: float
    tries: int
    sends: int
    sends_since: float


def pending(user_id: str) -> PendingCode | None:
    row = EmailCode.get_or_none(EmailCode.user == user_id)
    return None if row is None else PendingCode(
        user_id=row.user_id, address=row.address, code_hash=row.code_hash,
        expires_at=row.expires_at, tries=row.tries, sends=row.sends,
        sends_since=row.sends_since)


def replace(code: PendingCode) -> None:
    """(In the caller's transaction.) ``code`` is the person's pending one: any earlier
    code stops working."""
    EmailCode.delete().where(EmailCode.user == code.user_id).execute()
    EmailCode.create(user=code.user_id, address=code.address, code_hash=code.code_hash,
                     expires_at=code.expires_at, tries=code.tries, sends=code.sends,
                     sends_since=code.sends_since)


def count_try(user_id: str, code_hash: str) -> None:
    """A wrong code for the pending ``code_hash`` (a conditional update: never a newer one's)."""
    EmailCode.update(tries=EmailCode.tries + 1).where(
        (EmailCode.user == user_id) & (EmailCode.code_hash == code_hash)).execute()


def use(user_id: str, code_hash: str) -> bool:
    """Spend the pending code with ``code_hash``: True for the one caller that did (two
    requests with the same code at once, one wins)."""
    return bool(EmailCode.delete().where((EmailCode.user == user_id)
                                         & (EmailCode.code_hash == code_hash)).execute())
