"""Logs and the request id.

Every request gets an id: the caller's ``X-Request-ID`` when it is a short token (a proxy
or client correlating its own logs), else a new one. It is echoed in the response, written
on the request's log line, and carried into every audit event the request records
(``details.requestId``). ``server.log_format = "json"`` writes each log record as one JSON
object per line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import secrets
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import UTC, datetime

REQUEST_ID_HEADER = "X-Request-ID"
_ACCEPTED = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_request_id: ContextVar[str] = ContextVar("identityctl_request_id", default="")


def request_id_for(offered: str | None) -> str:
    """The id of a request: the caller's if it is a short token, else a new one."""
    return offered if offered and _ACCEPTED.match(offered) else secrets.token_hex(8)


def set_request_id(value: str) -> None:
    """(The request's thread, at its start.) Later records of this request carry it."""
    _request_id.set(value)


@contextlib.contextmanager
def request_id_scope(value: str) -> Iterator[None]:
    """Records made inside (on another thread than the request's: an MCP tool's) carry
    ``value``."""
    reset = _request_id.set(value)
    try:
        yield
    finally:
        _request_id.reset(reset)


def current_request_id() -> str:
    return _request_id.get()


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the request id, and the
    values a record was given as ``extra``."""

    _STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)))

    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": datetime.fromtimestamp(record.created, UTC).isoformat(),
                 "level": record.levelname.lower(), "logger": record.name,
                 "message": record.getMessage()}
        if current_request_id():
            entry["requestId"] = current_request_id()
        entry.update({key: value for key, value in vars(record).items()
                      if key not in self._STANDARD and not key.startswith("_")})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(log_format: str) -> None:
    """Logging for `serve`: INFO and up to standard error, as text or JSON lines."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json"
                         else logging.Formatter("%(asctime)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
