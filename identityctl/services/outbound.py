"""Talking to other servers: fetching a document from a URL someone else chose (a client ID
metadata document, a client's jwks_uri), the identity providers' endpoints
(services/accounts/upstream.py), deliveries (back-channel logout, webhooks) and SMTP
(services/delivery/mail.py). Hardened against server-side request forgery and against servers that
answer slowly (docs/security.md, "Outbound fetches").

One rule for time: inside :func:`deadline`, every operation on an outbound socket of the
thread (connecting, the TLS handshake, each send and each receive, the response's headers
and body alike) gets only the time left of the whole exchange. A server that trickles a
byte at a time cannot stretch it: the sockets are :func:`timed`, and the HTTP pools and the
TLS context here make them so (:func:`pool_manager`, :func:`tls_context`, :class:`SMTP`).

For a document a stranger names (:func:`fetch_json`):

- ``https`` only; TLS verified against the system's CAs, or ``ca_bundle`` for a private
  deployment (and the tests);
- the host name is resolved once, within the deadline, on a thread of its own (one look-up
  never waits behind another), and every address it resolves to must be public
  (:func:`is_public`) unless ``allow_private`` (development); the connection goes to that
  address, with the name for SNI and certificate checks, so a second resolution cannot
  point it elsewhere;
- no redirects; a status other than 200 is refused; at most ``max_bytes`` of body;
- a document is reused for at least SHORTEST_MAX_AGE whatever its caching headers say, so
  one URL cannot be made to be fetched on every request;
- a failed fetch is remembered for FAILURE_SECONDS, so a dead server is not asked again
  by every request; a refusal for want of our own resources (503 ``upstream_busy``) says
  nothing about the URL and is never remembered.

Fetches a request waits for hold one of a few process-wide slots, taken without waiting:
when none is free the request answers 503 ``upstream_busy`` at once, so slow servers can
hold only that many threads. URLs a stranger chose have their slots
(:func:`stranger_slot`, ``outbound.concurrent_fetches``), at most one at a time per client
address; identity providers an administrator configured have theirs
(:func:`provider_slot`, ``outbound.concurrent_provider_fetches``), so strangers' URLs never
make a sign-in wait.
"""

from __future__ import annotations

import ipaddress
import json
import re
import smtplib
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection

from identityctl import waits
from identityctl.config import Config, OutboundConfig
from identityctl.errors import ServiceUnavailable

#: How long a document without cache headers stays fresh, the longest any may, and the
#: least any is (no-store, no-cache, max-age=0 included: else a stranger's document that
#: forbids caching is fetched again by every request naming it).
DEFAULT_MAX_AGE = 300.0
LONGEST_MAX_AGE = 86_400.0
SHORTEST_MAX_AGE = 60.0
#: Seconds a failed fetch of a URL is answered from memory, and how many URLs are kept.
FAILURE_SECONDS = 30.0
MAX_FAILURES_KEPT = 1000
#: The most of a delivery's answer read (its status is what counts).
DELIVERY_ANSWER_BYTES = 65_536


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


# --- the deadline ------------------------------------------------------------------------------


class _Clock(threading.local):
    #: time.monotonic() by which this thread's outbound exchange must be over, if any.
    at: float | None = None


_clock = _Clock()


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Inside, every outbound socket operation of this thread gets only the time left of
    ``seconds``; a nested deadline can shorten the outer one, never extend it."""
    outer = _clock.at
    mine = time.monotonic() + seconds
    _clock.at = mine if outer is None else min(outer, mine)
    try:
        with waits.waiting():  # the request waits on another server: others may run
            yield
    finally:
        _clock.at = outer


def time_left(otherwise: float | None = None) -> float | None:
    """Seconds left of this thread's deadline (``otherwise`` outside one); TimeoutError
    once it has passed."""
    if _clock.at is None:
        return otherwise
    left = _clock.at - time.monotonic()
    if left <= 0:
        raise TimeoutError("the deadline passed")
    return left


def _keep_time(sock: socket.socket) -> None:
    left = time_left()
    if left is not None:
        sock.settimeout(left)


class _TimedSocket(socket.socket):
    """A plain socket whose every send and receive keeps to the thread's deadline."""

    __slots__ = ()

    def recv(self, *args: Any) -> bytes:
        _keep_time(self)
        return super().recv(*args)

    def recv_into(self, *args: Any) -> int:
        _keep_time(self)
        return super().recv_into(*args)

    def send(self, *args: Any) -> int:
        _keep_time(self)
        return super().send(*args)

    def sendall(self, *args: Any) -> None:  # (one timeout bounds a whole sendall)
        _keep_time(self)
        super().sendall(*args)


class _TimedSSLSocket(ssl.SSLSocket):
    """The TLS socket of :func:`tls_context`: the handshake and every record read or
    written keep to the thread's deadline (recv, recv_into and sendall go through these)."""

    def do_handshake(self, *args: Any) -> None:
        _keep_time(self)
        super().do_handshake(*args)

    def read(self, *args: Any) -> Any:
        _keep_time(self)
        return super().read(*args)

    def send(self, *args: Any) -> int:
        _keep_time(self)
        return super().send(*args)


def timed(sock: socket.socket) -> socket.socket:
    """``sock`` (connected, plain) as a socket that keeps to the thread's deadline."""
    kept = _TimedSocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
    kept.settimeout(time_left(otherwise=sock.gettimeout()))
    return kept


@cache
def tls_context(ca_bundle: str = "") -> ssl.SSLContext:
    """Verified TLS (the system's CAs, or ``ca_bundle``) whose sockets keep to the thread's
    deadline. One per bundle: a context is safe to share between threads."""
    context = ssl.create_default_context(cafile=ca_bundle or None)
    context.sslsocket_class = _TimedSSLSocket
    return context


class _TimedConnecting:
    """For urllib3's connections: connecting gets the time left, then the socket keeps to
    the deadline (a TLS one through :func:`tls_context`'s socket class)."""

    timeout: Any

    def _new_conn(self) -> socket.socket:
        self.timeout = time_left(otherwise=self.timeout)
        return timed(super()._new_conn())  # type: ignore[misc]


class _TimedHTTPConnection(_TimedConnecting, HTTPConnection):
    pass


class _TimedHTTPSConnection(_TimedConnecting, HTTPSConnection):
    pass


class _TimedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _TimedHTTPConnection


class _TimedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _TimedHTTPSConnection


def pool_manager(**options: Any) -> urllib3.PoolManager:
    """A urllib3 pool whose connections keep to the thread's deadline; TLS verified with
    the system's CAs, no retries."""
    manager = urllib3.PoolManager(retries=False, ssl_context=tls_context(), **options)
    manager.pool_classes_by_scheme = {"http": _TimedHTTPPool, "https": _TimedHTTPSPool}
    return manager


class SMTP(smtplib.SMTP):
    """smtplib's client on a socket that keeps to the thread's deadline (STARTTLS with
    :func:`tls_context`; implicit TLS is ``smtplib.SMTP_SSL`` with that context)."""

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        return timed(super()._get_socket(host, port, time_left(otherwise=timeout)))


# --- one HTTP exchange -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: Any
    body: bytes


def exchange(pool: urllib3.PoolManager | urllib3.HTTPConnectionPool, method: str,
             target: str, *, url: str, timeout: float, max_bytes: int, whole: bool = True,
             **request: Any) -> Answer:
    """One HTTP request to ``target`` (``url`` names it in messages), over within
    ``timeout`` seconds whatever the server does, its body read up to ``max_bytes`` (a
    larger one: :class:`FetchRefused` if ``whole``, else no body); else
    :class:`FetchRefused`. No redirect is followed."""
    with deadline(timeout):
        try:
            response = pool.request(method, target, redirect=False, preload_content=False,
                                    timeout=urllib3.Timeout(total=timeout), **request)
            try:
                body = _read(response, max_bytes, url, whole=whole)
            except BaseException:
                response.close()  # bytes left unread: the connection is not reused
                raise
            finally:
                response.release_conn()
        except urllib3.exceptions.SSLError as error:
            raise FetchRefused("tls_failed", f"{url}: TLS failed (the certificate is not "
                               "trusted or not for this host).", str(error)) from None
        except (urllib3.exceptions.TimeoutError, TimeoutError):
            raise FetchRefused("too_slow", f"{url} did not answer within {timeout:g} s.") \
                from None
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise FetchRefused("unreachable", f"{url} could not be reached.", str(error)) \
                from None
    return Answer(status=response.status, headers=response.headers, body=body)


def _read(response: Any, max_bytes: int, url: str, *, whole: bool) -> bytes:
    length = response.headers.get("Content-Length")
    announced = int(length) if length and length.isascii() and length.isdigit() else 0
    body = b"" if announced > max_bytes else response.read(max_bytes + 1)
    if announced > max_bytes or len(body) > max_bytes:
        if whole:
            raise FetchRefused("too_large", f"{url} is over {max_bytes} bytes.")
        response.close()  # the rest is not read: the connection is not reused
        return b""
    return body


# --- the share of request threads --------------------------------------------------------------


_settings = OutboundConfig()
_stranger_slots = threading.BoundedSemaphore(_settings.concurrent_fetches)
_provider_slots = threading.BoundedSemaphore(_settings.concurrent_provider_fetches)
#: Client addresses with a fetch of a stranger's URL under way (one each at most).
_fetching_for: set[str] = set()
_fetching_lock = threading.Lock()


def configure(config: Config) -> None:
    """(Once per serving process.) How many fetches requests may wait on at once, and the
    identity providers' deadline."""
    global _settings, _stranger_slots, _provider_slots
    _settings = config.outbound
    _stranger_slots = threading.BoundedSemaphore(_settings.concurrent_fetches)
    _provider_slots = threading.BoundedSemaphore(_settings.concurrent_provider_fetches)


def settings() -> OutboundConfig:
    return _settings


BUSY = "Too many requests are waiting for other servers right now; try again in a moment."


def _busy(description: str = BUSY) -> ServiceUnavailable:
    """The refusal for want of our own room (a slot, a look-up): never held against a URL."""
    return ServiceUnavailable(description, code="upstream_busy", headers={"Retry-After": "1"})


@contextmanager
def _held(slots: threading.BoundedSemaphore) -> Iterator[None]:
    # Never waits: a thread left waiting for a slot is the thread a slow server would hold.
    if not slots.acquire(blocking=False):
        raise _busy()
    try:
        yield
    finally:
        slots.release()


@contextmanager
def provider_slot() -> Iterator[None]:
    """Hold one of the slots of requests to identity providers (addresses an administrator
    configured: never shared with strangers' URLs); none free: 503 ``upstream_busy``."""
    with _held(_provider_slots):
        yield


@contextmanager
def stranger_slot(client_address: str) -> Iterator[None]:
    """Hold one of the slots of fetches of URLs a stranger chose, for a request from
    ``client_address`` ("": none known); none free, or another fetch of that address under
    way: 503 ``upstream_busy`` at once. So one address holds one slot, whatever it sends."""
    if client_address:
        with _fetching_lock:
            if client_address in _fetching_for:
                raise _busy("A request from this address is already waiting for another "
                            "server; try again in a moment.")
            _fetching_for.add(client_address)
    try:
        with _held(_stranger_slots):
            yield
    finally:
        if client_address:
            with _fetching_lock:
                _fetching_for.discard(client_address)


# --- documents a stranger names ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    timeout: float = 5.0
    max_bytes: int = 5120
    allow_private: bool = False
    ca_bundle: str = ""


@dataclass(frozen=True, slots=True)
class Fetched:
    document: Any
    #: Seconds the document may be reused (its Cache-Control, within SHORTEST_MAX_AGE and
    #: LONGEST_MAX_AGE).
    max_age: float


#: url -> (when, code, description, detail) of its last failed fetch.
_failures: OrderedDict[str, tuple[float, str, str, str]] = OrderedDict()
_failures_lock = threading.Lock()


def fetch_json(url: str, policy: FetchPolicy, *, client_address: str = "") -> Fetched:
    """The JSON document at ``url``, fetched under ``policy`` for a request from
    ``client_address`` (:func:`stranger_slot`); else :class:`FetchRefused` (also, for
    FAILURE_SECONDS, when the last fetch of ``url`` failed), or 503 ``upstream_busy`` when
    the process has no room for the fetch now (not remembered: the URL is not at fault)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or 443
    except ValueError:
        raise FetchRefused("not_https", f"{url} is not an https URL with a valid port.") \
            from None
    if parts.scheme != "https" or not host:
        raise FetchRefused("not_https", f"{url} is not an https URL.")
    with _failures_lock:
        failed = _failures.get(url)
    if failed is not None and time.monotonic() - failed[0] < FAILURE_SECONDS:
        raise FetchRefused(*failed[1:])
    try:
        with stranger_slot(client_address), deadline(policy.timeout):
            answer = _fetch(url, parts.path + (f"?{parts.query}" if parts.query else ""),
                            host, port, policy)
        return Fetched(document=_json(answer.body, url),
                       max_age=_max_age(answer.headers.get("Cache-Control", "")))
    except FetchRefused as refused:
        with _failures_lock:
            _failures[url] = (time.monotonic(), refused.code, refused.description,
                              refused.detail)
            _failures.move_to_end(url)
            while len(_failures) > MAX_FAILURES_KEPT:
                _failures.popitem(last=False)
        raise


def _fetch(url: str, path: str, host: str, port: int, policy: FetchPolicy) -> Answer:
    address = _public_address(host, port, policy)
    pool = _TimedHTTPSPool(address, port=port, server_hostname=host, maxsize=1,
                           ssl_context=tls_context(policy.ca_bundle), retries=False)
    try:
        answer = exchange(pool, "GET", path, url=url, timeout=policy.timeout,
                          max_bytes=policy.max_bytes, headers={
                              "Host": urlsplit(url).netloc.rsplit("@", 1)[-1],
                              "Accept": "application/json",
                              "User-Agent": "identityctl (client metadata)"})
    finally:
        pool.close()
    if 300 <= answer.status < 400:
        raise FetchRefused("redirected", f"{url} answered a redirect ({answer.status}); a "
                           "client metadata document is fetched without following redirects.")
    if answer.status != 200:
        raise FetchRefused("http_status", f"{url} answered HTTP {answer.status}.")
    return answer


def _json(body: bytes, url: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        raise FetchRefused("not_json", f"{url} is not a JSON document.") from None


#: Name look-ups under way at most. Each runs on a thread of its own, so that it keeps to
#: the deadline (the system resolver has its own, longer timeouts and cannot be cancelled)
#: and never waits behind another: a name whose DNS never answers holds only its own thread
#: until the resolver gives up. Fetches are bounded by the slots, so this bound is reached
#: only when many look-ups outlive their deadlines; past it, 503 upstream_busy.
MAX_LOOKUPS = 32
_lookups = threading.BoundedSemaphore(MAX_LOOKUPS)


def _resolve(host: str, port: int) -> list[Any]:
    """``socket.getaddrinfo`` of ``host`` within the thread's deadline (else TimeoutError)."""
    if not _lookups.acquire(blocking=False):
        raise _busy()
    found: Future[list[Any]] = Future()

    def look_up() -> None:
        try:
            found.set_result(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except BaseException as error:  # handed to the request that waits for it
            found.set_exception(error)
        finally:
            _lookups.release()

    try:
        threading.Thread(target=look_up, name="identityctl-resolve", daemon=True).start()
    except RuntimeError:  # no thread to be had now: the look-up's place is given back
        _lookups.release()
        raise _busy() from None
    return found.result(timeout=time_left())


def _public_address(host: str, port: int, policy: FetchPolicy) -> str:
    try:
        found = _resolve(host, port)
    except TimeoutError:  # (the future's, or the deadline passed)
        raise FetchRefused("too_slow", f"The host {host} did not resolve within "
                           f"{policy.timeout:g} s.") from None
    except (OSError, UnicodeError):  # UnicodeError: a name IDNA cannot encode
        raise FetchRefused("unresolvable", f"The host {host} does not resolve.") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    if not policy.allow_private:
        for address in addresses:
            if not is_public(address):
                raise FetchRefused("private_address", f"{host} is not a public address.",
                                   f"{host} resolves to {address}; documents on private "
                                   "addresses need oauth.client_documents_allow_private "
                                   "(development)")
    return addresses[0]


#: IPv6 ranges whose addresses carry an IPv4 address that a translator or tunnel may
#: deliver to (RFC 6052 NAT64 and RFC 8215 local NAT64, RFC 3056 6to4, RFC 4380 Teredo,
#: RFC 4291 IPv4-compatible and IPv4-mapped): refused whatever the IPv4 address is.
EMBEDS_IPV4 = tuple(ipaddress.IPv6Network(network) for network in (
    "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001::/32", "::/96", "::ffff:0:0/96"))


def is_public(address: str) -> bool:
    """Whether a fetch for a stranger may connect to ``address``: a global unicast address
    (not private, loopback, link-local, site-local, shared, reserved, multicast or
    unspecified), and no IPv6 form of an IPv4 address."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and (
            ip.is_site_local or any(ip in network for network in EMBEDS_IPV4)):
        return False
    return ip.is_global and not (ip.is_multicast or ip.is_reserved)


def _max_age(cache_control: str) -> float:
    """Seconds a document with this ``Cache-Control`` is reused: as it allows, within
    SHORTEST_MAX_AGE and LONGEST_MAX_AGE."""
    directives = cache_control.lower()
    if "no-store" in directives or "no-cache" in directives:
        allowed = 0.0
    else:
        found = re.search(r"max-age\s*=\s*(\d+)", directives)
        allowed = DEFAULT_MAX_AGE if found is None else float(found.group(1))
    return min(max(allowed, SHORTEST_MAX_AGE), LONGEST_MAX_AGE)


# --- deliveries --------------------------------------------------------------------------------


@cache
def _deliveries() -> urllib3.PoolManager:
    """One pool for deliveries to the team's own services (back-channel logout, webhooks):
    addresses an administrator registered, so private ones are allowed; no redirects
    followed. PERF: made at the first delivery (its TLS context reads the system's CAs,
    ~30 ms of a start otherwise)."""
    return pool_manager(num_pools=16, maxsize=2)


def post_form(url: str, fields: dict[str, str], *, timeout: float) -> int:
    """POST ``fields`` form-encoded to ``url`` within ``timeout`` seconds; the HTTP status.
    Raises FetchRefused when the service cannot be reached in time."""
    return exchange(_deliveries(), "POST", url, url=url, timeout=timeout,
                    max_bytes=DELIVERY_ANSWER_BYTES, whole=False, fields=fields,
                    encode_multipart=False,
                    headers={"User-Agent": "identityctl (deliveries)"}).status


def post_json(url: str, body: bytes, *, headers: dict[str, str], timeout: float) -> int:
    """POST ``body`` (JSON) to ``url`` with ``headers`` within ``timeout`` seconds; the HTTP
    status. Raises FetchRefused when the service cannot be reached in time."""
    return exchange(_deliveries(), "POST", url, url=url, timeout=timeout,
                    max_bytes=DELIVERY_ANSWER_BYTES, whole=False, body=body, headers={
                        "Content-Type": "application/json",
                        "User-Agent": "identityctl (webhooks)", **headers}).status
