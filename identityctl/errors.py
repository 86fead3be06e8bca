"""One error hierarchy for the whole service.

Every failure a caller can cause is an :class:`IdentityError` with a stable ``code``
(documented in docs/errors.md), an HTTP ``status`` and a human ``message``. The server maps
them to the JSON error body in exactly one place (``identityctl.server.errors``); the CLI and
the MCP tools print the same message.
"""

from __future__ import annotations


class IdentityError(Exception):
    """Base of every error the service reports to a caller."""

    status: int = 400
    code: str = "bad_request"
    message: str = "The request is not valid."

    def __init__(
        self,
        description: str = "",
        *,
        code: str | None = None,
        message: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.description = description
        if code is not None:
            self.code = code
        if message is not None:
            self.message = message
        self.headers = dict(headers or {})
        super().__init__(description or self.message)

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "description": self.description}


class BadRequest(IdentityError):
    status = 400
    code = "bad_request"
    message = "The request is not valid."


class MissingField(BadRequest):
    code = "missing_field"
    message = "A required field is missing."

    def __init__(self, field: str, description: str = "") -> None:
        super().__init__(description or f"Field '{field}' is required.")
        self.field = field


class InvalidField(BadRequest):
    code = "invalid_field"
    message = "A field has an invalid value."

    def __init__(self, field: str, description: str, *, code: str | None = None) -> None:
        super().__init__(f"Field '{field}': {description}", code=code)
        self.field = field


class Unauthorized(IdentityError):
    status = 401
    code = "unauthorized"
    message = "Authentication is required."


class Forbidden(IdentityError):
    status = 403
    code = "forbidden"
    message = "You are not allowed to do this."


class NotFound(IdentityError):
    status = 404
    code = "not_found"
    message = "The resource does not exist."


class Conflict(IdentityError):
    status = 409
    code = "conflict"
    message = "The request conflicts with the current state."


class PayloadTooLarge(IdentityError):
    status = 413
    code = "payload_too_large"
    message = "The request body is too large."


class RequestHeaderTooLarge(IdentityError):
    status = 431
    code = "request_header_too_large"
    message = "The request header is too large."


class MalformedRequest(IdentityError):
    status = 400
    code = "malformed_request"
    message = "The HTTP request is malformed."


class TransferEncodingUnsupported(IdentityError):
    status = 501
    code = "transfer_encoding_unsupported"
    message = "The Transfer-Encoding is not supported."


class UnsupportedMediaType(IdentityError):
    status = 415
    code = "unsupported_media_type"
    message = "The request body must be application/json."


class TooManyRequests(IdentityError):
    status = 429
    code = "too_many_requests"
    message = "Too many attempts; try again later."

    def __init__(self, description: str = "", *, retry_after: int, code: str | None = None):
        super().__init__(description, code=code, headers={"Retry-After": str(retry_after)})
        self.retry_after = retry_after


class BadGateway(IdentityError):
    """A server this one relies on (an SMTP server) did not do its part."""

    status = 502
    code = "bad_gateway"
    message = "A server this service relies on did not answer as expected."


class ServiceUnavailable(IdentityError):
    status = 503
    code = "service_unavailable"
    message = "The service is temporarily unavailable."


class ConfigError(Exception):
    """The configuration file is unusable; names the file, the key and what is wrong."""

    def __init__(self, path: str, key: str, problem: str) -> None:
        self.path, self.key, self.problem = path, key, problem
        super().__init__(f"{path}: {key}: {problem}")
