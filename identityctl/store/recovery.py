"""Verified e-mail addresses and recovery codes: what lets a person back in without an admin."""

from __future__ import annotations

from identityctl.security.email_address import EMAIL
from identityctl.store import directory
from identityctl.store.models import RecoveryCode, VerifiedEmail, now


def verified_address(user_id: str) -> str | None:
    row = VerifiedEmail.get_or_none(VerifiedEmail.user == user_id)
    return row.address if row else None


def mark_verified(user_id: str, address: str) -> list[str]:
    """(In the caller's transaction.) ``address`` is the user's, proven; an address is
    verified for one person only (the last to prove it), and no other account keeps it in
    its ``email`` attribute, proven once or never. The ids of the accounts it left."""
    address = address.strip().lower()
    VerifiedEmail.delete().where((VerifiedEmail.user == user_id)
                                 | (VerifiedEmail.address == address)).execute()
    VerifiedEmail.create(user=user_id, address=address)
    return directory.drop_attribute_copies(EMAIL, address, keep=user_id)


def user_with_verified_address(address: str) -> str | None:
    row = VerifiedEmail.get_or_none(VerifiedEmail.address == address.strip().lower())
    return row.user_id if row else None


def replace_codes(user_id: str, code_hashes: list[str]) -> None:
    """(In the caller's transaction.) The user's recovery codes become these: new codes
    make the old ones useless."""
    RecoveryCode.delete().where(RecoveryCode.user == user_id).execute()
    RecoveryCode.insert_many([{"user": user_id, "code_hash": code_hash}
                              for code_hash in code_hashes]).execute()


def use_code(code_hash: str, user_id: str) -> str | None:
    """Spend ``user_id``'s recovery code with this hash; the user's id, or None (not theirs,
    unknown or spent). A conditional update: of two requests with the same code at once,
    exactly one wins."""
    spent = RecoveryCode.update(used_at=now()).where(
        (RecoveryCode.code_hash == code_hash) & (RecoveryCode.user == user_id)
        & RecoveryCode.used_at.is_null()).execute()
    return user_id if spent else None


def codes_left(user_id: str) -> int:
    return RecoveryCode.select().where((RecoveryCode.user == user_id)
                                       & RecoveryCode.used_at.is_null()).count()
