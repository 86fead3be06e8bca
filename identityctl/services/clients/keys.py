"""The public keys of a client that authenticates with private_key_jwt: the JWK Set it
registered, or the one at its ``jwksUri``.

A ``jwksUri`` is fetched with the hardening of client metadata documents (https only, a
public address unless ``oauth.client_documents_allow_private``, the same CA bundle and
timeout, a size bound, one fetch at a time per client address) and reused as its HTTP
caching allows, at least ``outbound.SHORTEST_MAX_AGE`` and at most CACHE_SECONDS. A key the
cached set lacks (the client rotated) makes it fetch again, at most once every
REFETCH_SECONDS, so a stream of made-up key ids cannot turn into a stream of fetches. A
fetch the process had no room for (503 upstream_busy) is not remembered as the URL's
failure.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from identityctl.errors import InvalidField
from identityctl.oauth.client_assertion import check_client_jwks
from identityctl.oauth.errors import InvalidClient
from identityctl.security.jwks import has_key
from identityctl.services import outbound
from identityctl.services.context import ServiceContext
from identityctl.services.origin import RequestOrigin

MAX_BYTES = 64 * 1024
CACHE_SECONDS = 300.0
REFETCH_SECONDS = 2.0

#: URLs kept at most: clients that register themselves bring their own, so the cache is
#: bounded (the least recently fetched goes first).
MAX_CACHED = 1000

#: jwksUri -> (when fetched, seconds it may be reused, the JWK Set, or None when the fetch
#: failed: that is remembered for REFETCH_SECONDS too). A cache, not state.
_fetched: OrderedDict[str, tuple[float, float, dict[str, Any] | None]] = OrderedDict()
_lock = threading.Lock()


def _remember(url: str, entry: tuple[float, float, dict[str, Any] | None]) -> None:
    with _lock:
        _fetched[url] = entry
        _fetched.move_to_end(url)
        while len(_fetched) > MAX_CACHED:
            _fetched.popitem(last=False)


def client_jwks(ctx: ServiceContext, config: dict[str, Any], *, kid: str | None,
                origin: RequestOrigin) -> dict[str, Any]:
    """The JWK Set to check a client's assertion with (``kid``: the key it names), for a
    request from ``client_address``."""
    if config.get("jwks"):
        return config["jwks"]
    url = config.get("jwksUri")
    if not url:
        raise InvalidClient("This client has no keys registered.", code="client_keys_missing")
    moment = time.monotonic()
    with _lock:
        hit = _fetched.get(url)
    if hit is not None:
        age, jwks = moment - hit[0], hit[2]
        if jwks is None and age < REFETCH_SECONDS:
            raise InvalidClient("The client's jwks_uri could not be used a moment ago; try "
                                "again shortly.", code="client_keys_unavailable")
        if jwks is not None and ((age < min(hit[1], CACHE_SECONDS) and has_key(jwks, kid))
                                 or age < REFETCH_SECONDS):
            return jwks
    oauth = ctx.config.oauth
    try:
        fetched = outbound.fetch_json(url, outbound.FetchPolicy(
            timeout=oauth.client_documents_timeout, max_bytes=MAX_BYTES,
            allow_private=oauth.client_documents_allow_private,
            ca_bundle=oauth.client_documents_ca_bundle),
            client_address=origin.address)
        jwks = check_client_jwks(fetched.document, "jwks")
    except (outbound.FetchRefused, InvalidField) as failure:
        # PERF, and a bound: a failing URL is not fetched on every request
        _remember(url, (moment, 0.0, None))
        raise InvalidClient(f"The client's jwks_uri cannot be used: {failure.description}",
                            code="client_keys_unavailable") from None
    _remember(url, (moment, fetched.max_age, jwks))
    return jwks
