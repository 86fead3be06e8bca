"""Opaque secrets (session tokens, codes, refresh tokens) and how they are stored."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets


def new_token(nbytes: int = 32) -> str:
    """An unguessable URL-safe token (256 bits by default)."""
    return secrets.token_urlsafe(nbytes)


def token_hash(token: str) -> str:
    """What the store keeps instead of the token: a leaked table grants nothing."""
    return hashlib.sha256(token.encode()).hexdigest()


def constant_time_equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
