"""Reading request bodies into plain values, with the one error shape for bad input."""

from __future__ import annotations

from typing import Any

import falcon

from identityctl import i18n
from identityctl.errors import BadRequest, InvalidField, MissingField
from identityctl.oauth.dpop import HEADER, PresentedToken

#: The language a person chose with a page's switcher (server/resources/gate.py).
LANGUAGE_COOKIE = "__Host-identityctl-language"


def language_of(req: falcon.Request) -> str:
    """The page's language: the request's ``ui_locales``, then the person's remembered
    choice, then ``Accept-Language``."""
    return i18n.choose(ui_locales=req.get_param("ui_locales"),
                       remembered=req.cookies.get(LANGUAGE_COOKIE),
                       accept_language=req.get_header("Accept-Language"))


def page_address(req: falcon.Request) -> str:
    """Where a page's language switcher comes back to: the page itself (path and query)
    when it was fetched, else the start page."""
    return req.relative_uri if req.method in ("GET", "HEAD") else "/"


def json_value(req: falcon.Request) -> Any:
    """The request body as JSON, whatever its type (the caller checks it).

    JSON nested deeper than the parser's recursion limit is malformed JSON too (json.loads
    raises RecursionError for it, not ValueError).
    """
    try:
        return req.get_media()
    except RecursionError:
        raise BadRequest("The body nests JSON too deeply.", code="malformed_json") from None


def json_object(req: falcon.Request) -> dict[str, Any]:
    """The request body, which must be a JSON object."""
    body = json_value(req)
    if not isinstance(body, dict):
        raise BadRequest("The body must be a JSON object.", code="malformed_json")
    return body


def string_field(body: dict[str, Any], name: str, *, required: bool = True,
                 blank_ok: bool = False, path: str = "") -> str | None:
    """``body[name]`` as a string; missing, non-string or blank values are named errors."""
    label = f"{path}{name}"
    value = body.get(name)
    if value is None:
        if required:
            raise MissingField(label)
        return None
    if not isinstance(value, str):
        raise InvalidField(label, "must be a string")
    if not value.strip() and not blank_ok:
        if required:
            raise MissingField(label, f"Field '{label}' must not be blank.")
        return None
    return value


def object_field(body: dict[str, Any], name: str, *, required: bool = True,
                 path: str = "") -> dict[str, Any] | None:
    value = body.get(name)
    if value is None:
        if required:
            raise MissingField(f"{path}{name}")
        return None
    if not isinstance(value, dict):
        raise InvalidField(f"{path}{name}", "must be an object")
    return value


def bool_field(body: dict[str, Any], name: str, *, default: bool = False) -> bool:
    value = body.get(name, default)
    if not isinstance(value, bool):
        raise InvalidField(name, "must be true or false")
    return value


def presented_token(req: falcon.Request, base_url: str, *,
                    url: str | None = None) -> PresentedToken | None:
    """The access token of an ``Authorization: Bearer`` or ``DPoP`` header (never from the
    query string), with the request's DPoP proof and its public URL (``base_url`` and the
    path, or ``url``: what the client called, whatever proxy passed it on), for
    services/clients/bearer.py."""
    header = req.get_header("Authorization") or ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() not in ("bearer", "dpop") or not token.strip():
        return None
    return PresentedToken(token=token.strip(), scheme=scheme, proof=req.get_header(HEADER),
                          method=req.method, url=url or base_url + req.path)


def bearer_token(req: falcon.Request) -> str | None:
    """The token of an ``Authorization: Bearer`` header (never from the query string): a
    credential that is not an access token (the metrics token, a registration access
    token)."""
    header = req.get_header("Authorization") or ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()
