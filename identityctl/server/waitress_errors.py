"""waitress's own refusals in the service's JSON error shape, with its security headers.

waitress answers some requests before the app runs: a body past its ``max_request_body_size``
(4x ``server.max_body_bytes``, see runtime.py; smaller oversized bodies reach the app, whose
BodyRules and /mcp dispatcher refuse them), a request line and headers past
``max_request_header_size``, an HTTP message it cannot parse (request line, header line,
Content-Length, chunk framing), a Transfer-Encoding other than chunked, and an exception that
escaped the app. Its own answers are plain text without the security headers.

:func:`use_json_errors` gives the servers a channel whose error task writes these answers
with :func:`identityctl.server.errors.error_answer`, the writer of the /mcp dispatcher's
refusals. Nothing else changes: waitress still refuses an announced Content-Length before
reading the body, stops reading a chunked body at its limit, and closes the connection after
the answer (``Connection: close``).
"""

from __future__ import annotations

from typing import Any

from waitress.server import BaseWSGIServer
from waitress.task import ErrorTask
from waitress.utilities import (
    BadRequest,
    Error,
    InternalServerError,
    RequestEntityTooLarge,
    RequestHeaderFieldsTooLarge,
    ServerNotImplemented,
)

from identityctl.errors import (
    IdentityError,
    MalformedRequest,
    PayloadTooLarge,
    RequestHeaderTooLarge,
    TransferEncodingUnsupported,
)
from identityctl.server.errors import InternalError, error_answer
from identityctl.server.onesend import OneSendChannel, OneSendTask
from identityctl.server.pipelining import BoundedPipelining


def identity_error(error: Error, *, max_body_bytes: int, max_header_bytes: int) -> IdentityError:
    """The service's error for a refusal of waitress (``waitress.utilities.Error``)."""
    # The two "too large" errors are BadRequest subclasses: test them first.
    if isinstance(error, RequestEntityTooLarge):
        return PayloadTooLarge(f"Bodies are limited to {max_body_bytes} bytes.")
    if isinstance(error, RequestHeaderFieldsTooLarge):
        return RequestHeaderTooLarge(
            f"The request line and headers are limited to {max_header_bytes} bytes.")
    if isinstance(error, BadRequest):
        return MalformedRequest(error.body.rstrip(".") + ".")
    if isinstance(error, ServerNotImplemented):
        return TransferEncodingUnsupported("Send the body with Content-Length, or with "
                                           "Transfer-Encoding: chunked.")
    if isinstance(error, InternalServerError):
        return InternalError()  # waitress logged the traceback
    other = IdentityError(error.body, code="http_error", message=error.reason)
    other.status = error.code
    return other


class JsonErrorTask(ErrorTask):
    """waitress's ErrorTask, answering with our JSON error instead of plain text."""

    channel: JsonErrorChannel

    def execute(self) -> None:
        error = identity_error(self.request.error,
                               max_body_bytes=self.channel.max_body_bytes,
                               max_header_bytes=self.channel.adj.max_request_header_size)
        status, headers, body = error_answer(error)
        self.status = status
        self.response_headers.extend(headers)
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class JsonErrorChannel(BoundedPipelining, OneSendChannel):
    """An HTTP channel whose refusals are JSON (:class:`JsonErrorTask`), with its pipelined
    requests bounded (server/pipelining.py) and each answer's header sent with its body
    (server/onesend.py)."""

    task_class = OneSendTask
    error_task_class = JsonErrorTask
    #: ``server.max_body_bytes``, named in the 413's description (set by use_json_errors)
    max_body_bytes = 0

    def send_continue(self) -> None:
        # waitress would answer "100 Continue" to a request it has already refused (a 413 on
        # its announced Content-Length), then read the body it invited up to its limit.
        if self.request.error is not None:
            self.request.expect_continue = False
            return
        super().send_continue()


def use_json_errors(servers: dict[Any, Any], *, max_body_bytes: int) -> None:
    """Make every waitress server in ``servers`` (the socket map given to
    ``waitress.create_server``) answer its refusals with :class:`JsonErrorChannel`.

    Call before the servers run: a server makes its channels as it accepts connections.
    """
    channel = type("JsonErrorChannel", (JsonErrorChannel,), {"max_body_bytes": max_body_bytes})
    for dispatcher in servers.values():
        if isinstance(dispatcher, BaseWSGIServer):
            dispatcher.channel_class = channel
