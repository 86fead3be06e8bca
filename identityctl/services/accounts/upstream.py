"""HTTP to the identity providers an administrator configured: discovery, JWKS, the token
endpoint, userinfo, GitHub's API.

The addresses come from the configuration of a provider, not from a visitor, so private
ones are allowed (a company's own OpenID provider); still: https with verified TLS (plain
http only to this machine's loopback, for development and the tests), no redirects
followed, at most 1 MB read, and each request over within ``outbound.provider_timeout``
whatever the provider does (services/outbound.py: every socket operation gets only the
time left). A request holds one of the slots of identity providers meanwhile
(``outbound.provider_slot``: their own, never taken by fetches of strangers' URLs; 503
``upstream_busy`` when none is free). Discovery documents and JWKS are cached in the
process for a few minutes (a cache: any instance fetches its own), and a JWKS is fetched
again when a token names a key it does not hold (key rotation); a failed fetch of either is
answered from memory for ``outbound.FAILURE_SECONDS``, so a dead provider is not asked again
by every sign-in.
"""

from __future__ import annotations

import json
import threading
import time
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from identityctl.config import LOCAL_HOSTS
from identityctl.federation import FederationError
from identityctl.services import outbound

if TYPE_CHECKING:
    import urllib3

MAX_BYTES = 1 << 20
#: Seconds a discovery document or JWKS is reused.
CACHE_SECONDS = 300.0

_cache: dict[str, tuple[float, Any]] = {}
#: url -> (when, description, code) of its last failed fetch.
_failed: dict[str, tuple[float, str, str]] = {}
_cache_lock = threading.Lock()


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOCAL_HOSTS):
        return
    raise FederationError(f"{url} is not an https URL.", code="federation_failed")


@cache
def _pool() -> urllib3.PoolManager:
    """PERF: made at the first request to a provider (its TLS context reads the system's
    CAs, ~30 ms of a start otherwise)."""
    return outbound.pool_manager(num_pools=16, maxsize=4)


def request_json(method: str, url: str, *, fields: dict[str, str] | None = None,
                 headers: dict[str, str] | None = None) -> Any:
    """The JSON answer of ``url``; a :class:`FederationError` naming what went wrong."""
    _check_url(url)
    try:
        with outbound.provider_slot():
            answer = outbound.exchange(
                _pool(), method, url, url=url, timeout=outbound.settings().provider_timeout,
                max_bytes=MAX_BYTES, headers={"Accept": "application/json",
                                              "User-Agent": "identityctl", **(headers or {})},
                **({"fields": fields, "encode_multipart": False} if fields is not None else {}))
    except outbound.FetchRefused as refused:
        if refused.code == "too_large":
            raise FederationError(f"{url} answered more than 1 MB.",
                                  code="federation_failed") from None
        raise FederationError(f"The identity provider could not be used: "
                              f"{refused.description}", code="federation_unreachable") from None
    try:
        document = json.loads(answer.body)
    except ValueError:
        document = None
    if answer.status != 200:
        detail = document.get("error") if isinstance(document, dict) else None
        raise FederationError(f"{url} answered HTTP {answer.status}"
                              + (f" ({detail})" if detail else "") + ".",
                              code="federation_failed")
    if document is None:
        raise FederationError(f"{url} did not answer JSON.", code="federation_failed")
    return document


def cached_json(url: str, *, refresh: bool = False) -> Any:
    """``url``'s JSON, reused for CACHE_SECONDS unless ``refresh``; its last failure, for
    outbound.FAILURE_SECONDS."""
    moment = time.monotonic()
    with _cache_lock:
        hit, failed = _cache.get(url), _failed.get(url)
    if failed and moment - failed[0] < outbound.FAILURE_SECONDS:
        raise FederationError(failed[1], code=failed[2])
    if hit and not refresh and moment - hit[0] < CACHE_SECONDS:
        return hit[1]
    try:
        document = request_json("GET", url)
    except FederationError as failure:
        with _cache_lock:
            _failed[url] = (moment, failure.description, failure.code)
        raise
    with _cache_lock:
        _cache[url] = (moment, document)
        _failed.pop(url, None)
    return document
