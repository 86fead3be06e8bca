"""Consent: when a person is asked to let a client have scopes, and what they are shown.

A client that described itself (RFC 7591 registration, or a client metadata document) is a
third party whoever wrote it: the person approves what it asks before it gets a code
(RFC 6749 §10.2, RFC 9700 §2.1.3 on clients that are not first-party). An approval is
remembered per (person, client) with its scopes; a later request within them is not asked
again, a wider one is. ``prompt=consent`` (OIDC Core §3.1.2.1) always asks. Applications
an administrator created are the team's own and are not asked about.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

#: What a person reads for each scope the service defines; other scopes are shown by name.
SCOPE_DESCRIPTIONS = {
    "openid": "Know who you are (your account id)",
    "profile": "See your name and username",
    "email": "See your e-mail address",
    "offline_access": "Keep access while you are away (until you revoke it)",
    "system": "Administer this identity service: users, applications, flows and settings",
}


def scope_description(scope: str) -> str:
    """What a person reads for ``scope``: its description, else its name."""
    return SCOPE_DESCRIPTIONS.get(scope, scope)


def shown_host(host: str) -> str:
    """A host as a person should read it: an internationalized one in its ASCII form
    (``xn--...``), which no look-alike letter can imitate, with its Unicode form beside it:
    ``xn--pple-43d.com (\u0430pple.com)`` for a Cyrillic "a" (U+0430). A host that is not a valid
    internationalized name shows its non-ASCII characters escaped. (The standard library's
    codec: the one ``socket.getaddrinfo`` resolves a Unicode host with.)"""
    try:
        ascii_host = host.encode("idna").decode("ascii")
        unicode_host = ascii_host.encode("ascii").decode("idna")
    except UnicodeError:
        return host.encode("ascii", "backslashreplace").decode("ascii")
    return ascii_host if unicode_host == ascii_host else f"{ascii_host} ({unicode_host})"


def consent_required(*, described_itself: bool, requested: Iterable[str],
                     granted: Iterable[str], prompts: Iterable[str]) -> bool:
    """Whether the person must approve before the client gets a code."""
    if "consent" in prompts:
        return True
    return described_itself and not set(requested) <= set(granted)


@dataclass(frozen=True, slots=True)
class ConsentRequest:
    """What the consent page shows: who asks, for what, where the tokens will work."""

    client_name: str
    client_id: str
    described_itself: bool
    scopes: tuple[str, ...]
    resources: tuple[str, ...]

    @property
    def client_host(self) -> str | None:
        """The host of a client-id URL (a client metadata document): the one thing about such
        a client its author cannot choose freely, so the person sees it next to the name
        (as :func:`shown_host` writes it)."""
        if not self.client_id.startswith("https://"):
            return None
        host = urlsplit(self.client_id).hostname
        return shown_host(host) if host else None

    def to_api(self) -> dict[str, Any]:
        return {"client": self.client_name, "clientId": self.client_id,
                "clientHost": self.client_host,
                "registeredItself": self.described_itself and self.client_host is None,
                "scopes": [{"scope": scope, "description": scope_description(scope)}
                           for scope in self.scopes],
                "resources": list(self.resources)}
