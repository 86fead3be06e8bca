"""Pushed Authorization Requests (RFC 9126): the rules of the request_uri and of what may be
pushed. Pure; the service stores the request and consumes its request_uri once."""

from __future__ import annotations

from typing import Any

from identityctl.oauth.errors import InvalidRequest
from identityctl.oauth.parameters import Parameters

#: RFC 9126 §2.2: the request_uri is a URN with this prefix and a random reference.
REQUEST_URI_PREFIX = "urn:ietf:params:oauth:request_uri:"
#: Seconds a pushed request may wait for the browser (§2.2: short, since the client
#: redirects at once).
LIFETIME = 60
#: Client authentication travels with the push, never into the stored request.
_CLIENT_AUTHENTICATION = ("client_secret", "client_assertion", "client_assertion_type")


def pushed_parameters(parameters: Parameters) -> dict[str, Any]:
    """What to keep of a push: the authorization request's parameters (the resource
    indicators as a list), without the client's credentials. §2.1: a push may not carry
    request_uri itself."""
    if parameters.get("request_uri") is not None:
        raise InvalidRequest("A pushed request cannot carry request_uri.",
                             code="request_uri_not_allowed")
    kept: dict[str, Any] = {name: value for name, value in parameters.values.items()
                            if name not in _CLIENT_AUTHENTICATION}
    if parameters.resources:
        kept["resource"] = list(parameters.resources)
    return kept


def request_reference(request_uri: str) -> str | None:
    """The random reference of one of our request_uris, or None for anything else."""
    if not request_uri.startswith(REQUEST_URI_PREFIX):
        return None
    reference = request_uri[len(REQUEST_URI_PREFIX):]
    return reference or None
