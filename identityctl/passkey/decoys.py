"""Decoy credentials: what a sign-in by username offers when there is no passkey to offer.

WebAuthn L3 §14.6.2 (username enumeration): a relying party that answers "no such user" or
"no passkeys" to an authentication ceremony by username tells a stranger who has an
account. Instead it answers with credential descriptors that look like a real user's and
that no authenticator holds, the same for a username on every try (so a stranger cannot
tell them apart by asking twice), derived from a secret of the deployment (so nobody can
compute them offline and compare).
"""

from __future__ import annotations

import hashlib
import hmac

from identityctl.passkey.options import KnownCredential

#: Credential id lengths real authenticators use (platform, security keys, phones).
_ID_LENGTHS = (16, 20, 32)
#: The transports browsers report for the passkeys people make (``getTransports()``,
#: sorted as the browser sorts them), each as often as it is seen: synced platform passkeys
#: (iCloud Keychain, Google Password Manager: internal and hybrid) most, then device-bound
#: platform ones (Windows Hello). Every real credential stored from a browser carries its
#: transports, so a decoy does too. Never a security key's (usb, nfc): the browser would
#: then wait for a key that a stranger or a password user cannot have, where for a platform
#: passkey it answers at once that this device has none.
_TRANSPORTS: tuple[tuple[str, ...], ...] = (
    ("hybrid", "internal"), ("hybrid", "internal"), ("internal",))


def decoy_credentials(secret: bytes, name_key: str) -> list[KnownCredential]:
    """One or two credential descriptors for ``name_key`` (a username's comparison key),
    stable for a given ``secret``."""
    def derived(label: bytes) -> bytes:
        return hmac.new(secret, label + b"\x00" + name_key.encode(), hashlib.sha256).digest()

    shape = derived(b"decoy-shape")
    return [KnownCredential(derived(b"decoy-%d" % index)[:_ID_LENGTHS[shape[1 + index] % 3]],
                            _TRANSPORTS[shape[3 + index] % len(_TRANSPORTS)])
            for index in range(1 + shape[0] % 2)]
