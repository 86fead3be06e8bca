"""Memoized MCP answers: the SDK answers a `tools/list` once per request shape, then we replay it.

The tool registry is fixed for the life of the process, so the SDK's answer to a
`tools/list` request is a pure function of the request: its headers (protocol version,
Accept, Host and Origin, which the SDK validates) and its body without the JSON-RPC `id`.
Producing it costs the SDK several milliseconds per request (the result is dumped and
validated three times over pydantic models, about 5x the work of the answer itself), for
an answer that never changes. `AnswerMemo` sits in front of the bridge, after
authentication: the first request of a given shape goes to the SDK, and a successful
answer is stored; later requests of the same shape get the stored answer with their own `id`.
Anything else (other methods, errors, odd ids, unparsable bodies) always goes to the SDK.
"""

from __future__ import annotations

import io
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

#: Methods whose answer depends on nothing but the request (the registry is static).
MEMOIZED_METHODS: Final = frozenset({"tools/list"})
#: Request headers that do not shape the answer: credentials (checked before the memo,
#: per request) and transport details.
_IGNORED_HEADERS: Final = frozenset({"HTTP_AUTHORIZATION", "HTTP_CONNECTION",
                                     "HTTP_CONTENT_LENGTH", "HTTP_ACCEPT_ENCODING",
                                     "HTTP_X_FORWARDED_FOR", "HTTP_USER_AGENT"})
_COMPACT: Final = {"separators": (",", ":")}


@dataclass(frozen=True, slots=True)
class _Answer:
    status: str
    headers: list[tuple[str, str]]
    result: bytes  # the JSON of the answer's "result", as the SDK wrote it

    def body_for(self, request_id: int | str) -> bytes:
        return b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (
            json.dumps(request_id).encode(), self.result)


class AnswerMemo:
    """WSGI: replay the SDK's earlier answer to an identical `tools/list` request; otherwise
    forward to ``app`` (the bridge), remembering a successful `tools/list` answer.

    At most ``capacity`` request shapes are kept (least recently used go first): a client
    sends the same headers every time, so a handful of shapes covers the clients in use.
    """

    def __init__(self, app: WSGIApplication, *, capacity: int = 64) -> None:
        self._app = app
        self._capacity = capacity
        self._answers: OrderedDict[tuple[Any, ...], _Answer] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            return self._app(environ, start_response)
        body = _read_body(environ)
        environ["wsgi.input"] = io.BytesIO(body)  # the SDK reads it again
        request = _memoizable_request(body)
        if request is None:
            return self._app(environ, start_response)
        request_id, shape = request
        key = (shape, *sorted((name, value) for name, value in environ.items()
                              if name.startswith("HTTP_") and name not in _IGNORED_HEADERS),
               environ.get("CONTENT_TYPE", ""), environ.get("wsgi.url_scheme"))
        with self._lock:
            answer = self._answers.get(key)
            if answer is not None:
                self._answers.move_to_end(key)
        if answer is not None:
            payload = answer.body_for(request_id)
            start_response(answer.status, [*answer.headers,
                                           ("Content-Length", str(len(payload)))])
            return [payload]
        return self._forward_and_remember(environ, start_response, key, request_id)

    def _forward_and_remember(self, environ: WSGIEnvironment, start_response: StartResponse,
                              key: tuple[Any, ...], request_id: int | str) -> Iterable[bytes]:
        answered: list[tuple[str, list[tuple[str, str]]]] = []

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answered.append((status, headers))
            return start_response(status, headers, exc_info)

        chunks = self._app(environ, capture)
        try:
            payload = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        answer = _answer_of(answered[-1] if answered else None, payload, request_id)
        if answer is not None:
            with self._lock:
                self._answers[key] = answer
                while len(self._answers) > self._capacity:
                    self._answers.popitem(last=False)
        return [payload]


def _read_body(environ: WSGIEnvironment) -> bytes:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    return environ["wsgi.input"].read(length) if length > 0 else b""


def _memoizable_request(body: bytes) -> tuple[int | str, str] | None:
    """(id, the request without its id) of a `tools/list` request, or None."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") not in MEMOIZED_METHODS:
        return None
    request_id = message.pop("id", None)
    # bool is an int, and floats do not round-trip reliably: only plain ints and strings.
    if type(request_id) not in (int, str):
        return None
    return request_id, json.dumps(message, sort_keys=True, **_COMPACT)


def _answer_of(response: tuple[str, list[tuple[str, str]]] | None, payload: bytes,
               request_id: int | str) -> _Answer | None:
    """The SDK's answer as an `_Answer`, when it is a plain JSON success for ``request_id``."""
    if response is None or not response[0].startswith("200 "):
        return None
    status, headers = response
    if not any(name.lower() == "content-type" and value.startswith("application/json")
               for name, value in headers):
        return None
    try:
        message = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(message, dict) or set(message) != {"jsonrpc", "id", "result"} \
            or message["id"] != request_id or type(message["id"]) is not type(request_id):
        return None
    kept = [(name, value) for name, value in headers if name.lower() != "content-length"]
    return _Answer(status=status, headers=kept,
                   result=json.dumps(message["result"], **_COMPACT).encode())
