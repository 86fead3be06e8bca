"""HTTP to the identity providers an administrator configured: discovery, JWKS, the token
endpoint, userinfo, GitHub's API.

The addresses come from the configuration of a provider, not from a visitor, so private
ones are allowed (a company's own OpenID provider); still: https with verified TLS (plain
http only to this machine's loopback, for development and the tests), no redirects
followed, a timeout per request, at most 1 MB read. Discovery documents and JWKS are
cached in the process for a few minutes (a cache: any instance fetches its own), and a JWKS
is fetched again when a token names a key it does not hold (key rotation).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import urllib3

from identityctl.config import LOCAL_HOSTS
from identityctl.federation import FederationError

TIMEOUT = 10.0
MAX_BYTES = 1 << 20
#: Seconds a discovery document or JWKS is reused.
CACHE_SECONDS = 300.0

_POOL = urllib3.PoolManager(num_pools=16, maxsize=4, retries=False,
                            cert_reqs="CERT_REQUIRED")
_cache: dict[str, tuple[float, Any]] = {}
_cache_lock = threading.Lock()


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOCAL_HOSTS):
        return
    raise FederationError(f"{url} is not an https URL.", code="federation_failed")


def request_json(method: str, url: str, *, fields: dict[str, str] | None = None,
                 headers: dict[str, str] | None = None) -> Any:
    """The JSON answer of ``url``; a :class:`FederationError` naming what went wrong."""
    _check_url(url)
    try:
        response = _POOL.request(
            method, url, redirect=False, preload_content=False,
            timeout=urllib3.Timeout(connect=TIMEOUT, read=TIMEOUT),
            headers={"Accept": "application/json", "User-Agent": "identityctl",
                     **(headers or {})},
            **({"fields": fields, "encode_multipart": False} if fields is not None else {}))
    except urllib3.exceptions.HTTPError as failure:
        raise FederationError(f"The identity provider could not be reached ({url}).",
                              code="federation_unreachable") from failure
    try:
        body = response.read(MAX_BYTES + 1)
    finally:
        response.release_conn()
    if len(body) > MAX_BYTES:
        raise FederationError(f"{url} answered more than 1 MB.", code="federation_failed")
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if response.status != 200:
        detail = document.get("error") if isinstance(document, dict) else None
        raise FederationError(f"{url} answered HTTP {response.status}"
                              + (f" ({detail})" if detail else "") + ".",
                              code="federation_failed")
    if document is None:
        raise FederationError(f"{url} did not answer JSON.", code="federation_failed")
    return document


def cached_json(url: str, *, refresh: bool = False) -> Any:
    """``url``'s JSON, reused for CACHE_SECONDS unless ``refresh``."""
    moment = time.monotonic()
    with _cache_lock:
        hit = _cache.get(url)
    if hit and not refresh and moment - hit[0] < CACHE_SECONDS:
        return hit[1]
    document = request_json("GET", url)
    with _cache_lock:
        _cache[url] = (moment, document)
    return document
