"""Fetching a document from a URL someone else chose (a client ID metadata document), hardened
against server-side request forgery (docs/security.md, "Fetching client metadata").

- ``https`` only; TLS verified against the system's CAs, or ``ca_bundle`` for a private
  deployment (and the tests);
- the host name is resolved once and every address it resolves to must be public (not
  private, loopback, link-local, multicast, reserved or unspecified) unless
  ``allow_private`` (development); the connection goes to that address, with the name for
  SNI and certificate checks, so a second resolution cannot point it elsewhere;
- no redirects; a status other than 200 is refused;
- a connect and read timeout per step and a deadline for the whole fetch (a server that
  trickles bytes is cut off); at most ``max_bytes`` of body.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import urllib3

#: How long a document without cache headers stays fresh, and the longest any may.
DEFAULT_MAX_AGE = 300.0
LONGEST_MAX_AGE = 86_400.0


class FetchRefused(Exception):
    """The document could not be fetched safely; ``code`` says why, ``description`` in
    words a person may read (a sign-in page shows it), ``detail`` what the operator needs
    (the audit event keeps it)."""

    def __init__(self, code: str, description: str, detail: str = "") -> None:
        super().__init__(description)
        self.code, self.description, self.detail = code, description, detail


class DeliveryFailed(Exception):
    """Something sent outside (a logout notice, a mail, a webhook) was not taken;
    ``permanent``: trying again will not change that (an SMTP 5xx)."""

    def __init__(self, reason: str, *, permanent: bool = False) -> None:
        super().__init__(reason)
        self.permanent = permanent


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    timeout: float = 5.0
    max_bytes: int = 5120
    allow_private: bool = False
    ca_bundle: str = ""


@dataclass(frozen=True, slots=True)
class Fetched:
    document: Any
    #: Seconds the document may be reused (HTTP caching: Cache-Control max-age / no-store).
    max_age: float


def fetch_json(url: str, policy: FetchPolicy) -> Fetched:
    """The JSON document at ``url``, fetched under ``policy``; else :class:`FetchRefused`."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or 443
    except ValueError:
        raise FetchRefused("not_https", f"{url} is not an https URL with a valid port.") \
            from None
    if parts.scheme != "https" or not host:
        raise FetchRefused("not_https", f"{url} is not an https URL.")
    address = _public_address(host, port, allow_private=policy.allow_private)
    deadline = time.monotonic() + policy.timeout
    pool = urllib3.HTTPSConnectionPool(
        address, port=port, server_hostname=host, assert_hostname=host,
        cert_reqs="CERT_REQUIRED", ca_certs=policy.ca_bundle or None,
        timeout=urllib3.Timeout(connect=policy.timeout, read=policy.timeout), retries=False,
        maxsize=1)
    try:
        response = pool.urlopen(
            "GET", parts.path + (f"?{parts.query}" if parts.query else ""), redirect=False,
            preload_content=False, headers={
                "Host": parts.netloc.rsplit("@", 1)[-1], "Accept": "application/json",
                "User-Agent": "identityctl (client metadata)"})
        try:
            if 300 <= response.status < 400:
                raise FetchRefused("redirected", f"{url} answered a redirect ({response.status});"
                                   " a client metadata document is fetched without following "
                                   "redirects.")
            if response.status != 200:
                raise FetchRefused("http_status", f"{url} answered HTTP {response.status}.")
            body = _read(response, policy.max_bytes, deadline, url)
            max_age = _max_age(response.headers.get("Cache-Control", ""))
        finally:
            response.release_conn()
    except urllib3.exceptions.SSLError as error:
        raise FetchRefused("tls_failed", f"{url}: TLS failed (the certificate is not "
                           "trusted or not for this host).", str(error)) from None
    except (urllib3.exceptions.TimeoutError, TimeoutError):
        raise FetchRefused("too_slow", f"{url} did not answer within {policy.timeout:g} s.") \
            from None
    except urllib3.exceptions.HTTPError as error:
        raise FetchRefused("unreachable", f"{url} could not be reached.", str(error)) \
            from None
    finally:
        pool.close()
    try:
        return Fetched(document=json.loads(body), max_age=max_age)
    except ValueError:
        raise FetchRefused("not_json", f"{url} is not a JSON document.") from None


def _public_address(host: str, port: int, *, allow_private: bool) -> str:
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):  # UnicodeError: a name IDNA cannot encode
        raise FetchRefused("unresolvable", f"The host {host} does not resolve.") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    if not allow_private:
        for text in addresses:
            ip = ipaddress.ip_address(text.split("%")[0])
            if not ip.is_global or ip.is_multicast:
                raise FetchRefused("private_address", f"{host} is not a public address.",
                                   f"{host} resolves to {ip}; documents on private addresses "
                                   "need oauth.client_documents_allow_private (development)")
    return addresses[0]


def _read(response: Any, max_bytes: int, deadline: float, url: str) -> bytes:
    length = response.headers.get("Content-Length")
    if length and length.isdigit() and int(length) > max_bytes:
        raise FetchRefused("too_large", f"{url} is over {max_bytes} bytes.")
    body = bytearray()
    for chunk in response.stream(1024):
        body += chunk
        if len(body) > max_bytes:
            raise FetchRefused("too_large", f"{url} is over {max_bytes} bytes.")
        if time.monotonic() > deadline:
            raise TimeoutError
    if time.monotonic() > deadline:
        raise TimeoutError
    return bytes(body)


def _max_age(cache_control: str) -> float:
    directives = cache_control.lower()
    if "no-store" in directives or "no-cache" in directives:
        return 0.0
    found = re.search(r"max-age\s*=\s*(\d+)", directives)
    if found is None:
        return DEFAULT_MAX_AGE
    return min(float(found.group(1)), LONGEST_MAX_AGE)


#: One pool for deliveries to the team's own services (back-channel logout; later webhooks):
#: addresses an administrator registered, so private ones are allowed; no redirects followed.
_DELIVERIES = urllib3.PoolManager(num_pools=16, maxsize=2, retries=False)


def post_form(url: str, fields: dict[str, str], *, timeout: float) -> int:
    """POST ``fields`` form-encoded to ``url``; the HTTP status. Raises FetchRefused when
    the service cannot be reached in time."""
    try:
        response = _DELIVERIES.request(
            "POST", url, fields=fields, encode_multipart=False, redirect=False,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            headers={"User-Agent": "identityctl (deliveries)"})
    except urllib3.exceptions.HTTPError as error:
        raise FetchRefused("unreachable", f"{url} could not be reached.", str(error)) \
            from None
    return response.status


def post_json(url: str, body: bytes, *, headers: dict[str, str], timeout: float) -> int:
    """POST ``body`` (JSON) to ``url`` with ``headers``; the HTTP status. Raises FetchRefused
    when the service cannot be reached in time."""
    try:
        response = _DELIVERIES.request(
            "POST", url, body=body, redirect=False,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            headers={"Content-Type": "application/json", "User-Agent": "identityctl (webhooks)",
                     **headers})
    except urllib3.exceptions.HTTPError as error:
        raise FetchRefused("unreachable", f"{url} could not be reached.", str(error)) \
            from None
    return response.status
