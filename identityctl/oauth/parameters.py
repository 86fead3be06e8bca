"""Reading OAuth request parameters: repetition, blanks, scopes and resource indicators."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from identityctl.oauth.errors import InvalidRequest, InvalidScope, InvalidTarget

#: RFC 8707 §2: `resource` may be sent several times, and RFC 8693 §2.1 `audience`; every
#: other parameter at most once.
REPEATABLE = ("resource", "audience")
#: The longest URI a client may register (a redirect URI, its jwks_uri, its client_uri).
MAX_URI_LENGTH = 2000


@dataclass(slots=True)
class Parameters:
    """A request's parameters: single values by name, and the resource indicators."""

    values: dict[str, str]
    resources: tuple[str, ...]
    #: RFC 8693 token exchange's logical targets.
    audiences: tuple[str, ...] = ()

    def get(self, name: str) -> str | None:
        return self.values.get(name)


#: Request parameters as the HTTP layer read them (a repeated name gives a list).
RawParameters = Mapping[str, str | list[str]]


def read_parameters(raw: RawParameters) -> Parameters:
    """Parameters of a query string or form, refusing repeated ones (RFC 6749 §3.1, §3.2).

    A parameter sent without a value counts as omitted (RFC 6749 §3.1).
    """
    values: dict[str, str] = {}
    resources: list[str] = []
    audiences: list[str] = []
    for name, value in raw.items():
        items = [v for v in (value if isinstance(value, list) else [value]) if v != ""]
        if name in REPEATABLE:
            (resources if name == "resource" else audiences).extend(items)
        elif len(items) > 1:
            raise InvalidRequest(f"Parameter '{name}' was sent more than once.",
                                 code="repeated_parameter")
        elif items:
            values[name] = items[0]
    return Parameters(values=values, resources=tuple(check_resources(resources)),
                      audiences=tuple(audiences))


def require(parameters: Parameters, name: str) -> str:
    value = parameters.get(name)
    if value is None:
        raise InvalidRequest(f"Parameter '{name}' is required.", code="missing_parameter")
    return value


def parse_scope(text: str | None) -> tuple[str, ...]:
    """The scope tokens of a space-separated ``scope`` value, in order, without repeats."""
    return tuple(dict.fromkeys((text or "").split()))


def granted_scope(requested: tuple[str, ...], *, allowed: Iterable[str],
                  default: tuple[str, ...]) -> tuple[str, ...]:
    """The scope to grant: what was asked (``default`` when nothing was), all of it allowed."""
    allowed = set(allowed)
    asked = requested or default
    refused = [scope for scope in asked if scope not in allowed]
    if refused:
        raise InvalidScope(f"Scope {' '.join(refused)!r} is not allowed for this client "
                           f"(allowed: {' '.join(sorted(allowed)) or 'none'}).",
                           code="scope_not_allowed")
    return asked


def check_resources(resources: Iterable[str]) -> list[str]:
    """RFC 8707 §2: each resource indicator is an absolute URI without a fragment."""
    checked = []
    for resource in resources:
        parts = urlsplit(resource)
        if not parts.scheme or not (parts.netloc or parts.path) or parts.fragment \
                or "#" in resource:
            raise InvalidTarget(f"resource {resource!r} must be an absolute URI without a "
                                "fragment.", code="invalid_resource")
        checked.append(resource)
    return list(dict.fromkeys(checked))
