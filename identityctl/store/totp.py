"""People's authenticator apps (TOTP): one per person, pending until a first code confirms it."""

from __future__ import annotations

from dataclasses import dataclass

from identityctl.store.models import TOTPSecret


@dataclass(slots=True)
class TOTPRecord:
    user_id: str
    sealed_secret: str
    confirmed: bool
    last_step: int | None


def find(user_id: str) -> TOTPRecord | None:
    row = TOTPSecret.get_or_none(TOTPSecret.user == user_id)
    return None if row is None else TOTPRecord(
        user_id=row.user_id, sealed_secret=row.sealed_secret, confirmed=row.confirmed,
        last_step=row.last_step)


def is_active(user_id: str) -> bool:
    return TOTPSecret.select().where((TOTPSecret.user == user_id)
                                     & TOTPSecret.confirmed).exists()


def start(user_id: str, sealed_secret: str) -> None:
    """(In the caller's transaction.) A new pending seed for the person, replacing a pending
    one; an active one is never replaced here (the caller refuses first)."""
    TOTPSecret.delete().where((TOTPSecret.user == user_id) & ~TOTPSecret.confirmed).execute()
    TOTPSecret.insert(user=user_id, sealed_secret=sealed_secret, confirmed=False).execute()


def use_step(user_id: str, step: int, *, confirm: bool) -> bool:
    """Spend time step ``step`` of the person's seed (``confirm``: the pending seed's first
    code, which makes it active). A conditional update: only a step later than the last one
    spent wins, so of two requests with one code, exactly one does."""
    spent = TOTPSecret.update(last_step=step, confirmed=True).where(
        (TOTPSecret.user == user_id) & (TOTPSecret.confirmed == (not confirm))
        & (TOTPSecret.last_step.is_null() | (TOTPSecret.last_step < step))).execute()
    return spent == 1


def remove(user_id: str) -> bool:
    """(In the caller's transaction.) Whether there was an authenticator app to remove."""
    return TOTPSecret.delete().where(TOTPSecret.user == user_id).execute() > 0
