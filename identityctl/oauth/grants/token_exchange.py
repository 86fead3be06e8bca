"""Token exchange: RFC 8693 (an application, often an agent, trades a user's access token for
one addressed to another resource, naming itself as the actor).

What may be exchanged is the application's policy (``tokenExchange`` in its oauth
configuration): the resources it may get tokens for (``targets``), and the resources whose
tokens it may present besides its own (``subjectAudiences``: it is that resource server).
The new token never carries more than the subject token did nor than the application may
have, never lives longer, and names
every actor in a nested ``act`` claim (§4.1), the newest outermost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from identityctl.oauth.client import Client
from identityctl.oauth.errors import (
    InvalidGrant,
    InvalidRequest,
    InvalidScope,
    InvalidTarget,
    UnauthorizedClient,
)
from identityctl.oauth.parameters import Parameters, parse_scope, require

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
#: Our access tokens are JWTs, so a client may name them either way (§3).
SUBJECT_TOKEN_TYPES = (ACCESS_TOKEN_TYPE, "urn:ietf:params:oauth:token-type:jwt")


@dataclass(frozen=True, slots=True)
class ExchangePolicy:
    """What an application may exchange (its ``tokenExchange`` configuration)."""

    targets: tuple[str, ...] = ()
    subject_audiences: tuple[str, ...] = ()

    @classmethod
    def of(cls, client: Client) -> ExchangePolicy:
        policy = client.token_exchange
        return cls(targets=tuple(policy.get("targets") or ()),
                   subject_audiences=tuple(policy.get("subjectAudiences") or ()))


@dataclass(frozen=True, slots=True)
class ExchangeRequest:
    subject_token: str
    actor_token: str | None
    targets: tuple[str, ...]
    scope: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Exchange:
    """What the new token says."""

    subject: str
    scope: tuple[str, ...]
    audience: tuple[str, ...]
    act: dict[str, Any]
    #: The subject token's grant: ending it (sign-out, revocation) ends this token too.
    grant_id: str | None
    expires_at: float


def read_exchange_request(parameters: Parameters) -> ExchangeRequest:
    """§2.1: the subject token and its type, an optional actor token and its type, the
    target (``resource`` and/or ``audience``), and only access tokens asked for."""
    subject_token = require(parameters, "subject_token")
    if require(parameters, "subject_token_type") not in SUBJECT_TOKEN_TYPES:
        raise InvalidRequest("subject_token_type must be "
                             f"{' or '.join(SUBJECT_TOKEN_TYPES)}: only our access tokens "
                             "are exchanged.", code="subject_token_type_unsupported")
    requested = parameters.get("requested_token_type")
    if requested not in (None, ACCESS_TOKEN_TYPE):
        raise InvalidRequest(f"requested_token_type must be {ACCESS_TOKEN_TYPE}.",
                             code="requested_token_type_unsupported")
    actor_token = parameters.get("actor_token")
    if (actor_token is None) != (parameters.get("actor_token_type") is None):
        raise InvalidRequest("actor_token and actor_token_type go together.",
                             code="actor_token_type_missing")
    if actor_token is not None and parameters.get("actor_token_type") not in SUBJECT_TOKEN_TYPES:
        raise InvalidRequest("actor_token_type must name an access token.",
                             code="actor_token_type_unsupported")
    targets = tuple(dict.fromkeys([*parameters.resources, *parameters.audiences]))
    if not targets:
        raise InvalidRequest("Name the resource the new token is for (resource or audience).",
                             code="target_required")
    return ExchangeRequest(subject_token=subject_token, actor_token=actor_token,
                           targets=targets, scope=parse_scope(parameters.get("scope")))


def decide_exchange(request: ExchangeRequest, *, client: Client, policy: ExchangePolicy,
                    subject: dict[str, Any], actor: dict[str, Any] | None,
                    access_ttl: int, now: float) -> Exchange:
    """The token to issue for a checked (signed, live, unrevoked) subject token's claims
    ``subject`` and actor token's ``actor``, or the refusal §2.2.2 names."""
    if client.public:
        raise UnauthorizedClient("A public client cannot exchange tokens.",
                                 code="exchange_not_allowed")
    if not policy.targets:
        raise UnauthorizedClient("This application has no tokenExchange targets: an "
                                 "administrator allows it per application.",
                                 code="exchange_not_allowed")
    outside = [target for target in request.targets if target not in policy.targets]
    if outside:
        raise InvalidTarget(f"This application may not get tokens for {outside[0]!r} "
                            f"(its targets: {', '.join(policy.targets)}).",
                            code="target_not_allowed")
    if subject.get("cnf") is not None:
        raise InvalidGrant("The subject token is bound to its client's key (DPoP): it is not "
                           "exchanged.", code="subject_token_bound")
    audiences = _list(subject.get("aud"))
    if subject.get("client_id") != client.client_id and not set(audiences) & set(
            policy.subject_audiences):
        raise InvalidGrant("The subject token was neither issued to this application nor "
                           "addressed to a resource it serves (tokenExchange.subjectAudiences).",
                           code="subject_token_not_accepted")
    held = parse_scope(subject.get("scope"))
    scope = request.scope or tuple(item for item in held if item in client.scopes)
    beyond = [item for item in scope if item not in held]
    if beyond:
        raise InvalidScope(f"Scope {beyond[0]!r} is more than the subject token carries.",
                           code="scope_exceeds_subject")
    not_its_own = [item for item in scope if item not in client.scopes]
    if not_its_own:
        raise InvalidScope(f"Scope {not_its_own[0]!r} is not one this application may have.",
                           code="scope_not_allowed")
    if actor is not None and actor.get("client_id") != client.client_id:
        raise InvalidGrant("The actor token was not issued to this application.",
                           code="actor_token_not_accepted")
    if actor is not None and actor.get("cnf") is not None:
        raise InvalidGrant("The actor token is bound to a DPoP key: it is not presented as "
                           "a parameter.", code="actor_token_bound")
    act: dict[str, Any] = {"sub": str(actor["sub"]) if actor else client.client_id,
                           "client_id": client.client_id}
    if isinstance(subject.get("act"), dict):
        act["act"] = subject["act"]  # who acted before, innermost first
    return Exchange(subject=str(subject["sub"]), scope=scope, audience=request.targets,
                    act=act, grant_id=subject.get("sid"),
                    expires_at=min(now + access_ttl, float(subject["exp"])))


def _list(value: object) -> Sequence[str]:
    if isinstance(value, str):
        return [value]
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []
