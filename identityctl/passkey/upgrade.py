"""The automatic upgrade to a passkey: after a sign-in that used no passkey, what the page
is asked to do.

Browsers with Conditional Create (WebAuthn L3 ``mediation: "conditional"`` on
``navigator.credentials.create``) let the password manager that just filled the password
make a passkey with no dialog; elsewhere a person can be shown one "Create a passkey" step
with "Not now". The page says which its browser can (a step input), so a client that
says nothing (an API client, an older page) is never asked. The rule decides which of those
a sign-in is offered, or none.
"""

from __future__ import annotations

from collections.abc import Collection

#: Only the password manager's own, silent creation; nothing is shown where it cannot.
CONDITIONAL = "conditional"
#: The silent creation where the browser has it, else a visible step with "Not now".
OFFER = "offer"
#: What a page says its browser can: Conditional Create, or only the creation dialog.
BROWSER_CAN = (CONDITIONAL, "modal")


def upgrade_offer(*, amr: Collection[str], browser_can: str, has_passkeys: bool,
                  visible_step: bool) -> str | None:
    """What a sign-in by ``amr`` (RFC 8176 methods) on a page whose browser can
    ``browser_can`` (one of :data:`BROWSER_CAN`, else nothing) is offered.

    None after a passkey (the person has one here) or when the browser can do nothing.
    Only the silent creation (:data:`CONDITIONAL`) when the person already has passkeys
    (they chose another way, and a visible question would nag) or the flow wants no
    visible step; None then if the browser has no Conditional Create. Else :data:`OFFER`.
    """
    if "passkey" in amr or browser_can not in BROWSER_CAN:
        return None
    if has_passkeys or not visible_step:
        return CONDITIONAL if browser_can == CONDITIONAL else None
    return OFFER
