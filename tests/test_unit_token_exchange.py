"""The rules of token exchange (identityctl/oauth/grants/token_exchange.py), without HTTP or
a store: what the new token says, and each refusal."""

from __future__ import annotations

from typing import Any

import pytest

from identityctl.oauth.client import Client
from identityctl.oauth.errors import InvalidGrant, InvalidScope, InvalidTarget, OAuthError
from identityctl.oauth.grants.token_exchange import (
    ACCESS_TOKEN_TYPE,
    ExchangePolicy,
    decide_exchange,
    read_exchange_request,
)
from identityctl.oauth.parameters import read_parameters

NOTES = "https://notes.example/mcp"
NOW = 1_800_000_000.0


def client(client_id: str = "agent", public: bool = False) -> Client:
    return Client(application_id="a", client_id=client_id, redirect_uris=(), grant_types=(),
                  auth_method="client_secret_basic", pkce_required=True, public=public,
                  scopes=("openid", "notes:read"), token_settings={},
                  token_exchange={"targets": [NOTES]})


def request(**form: str | list[str]) -> Any:
    return read_exchange_request(read_parameters({
        "subject_token": "t", "subject_token_type": ACCESS_TOKEN_TYPE, "resource": NOTES,
        **form}))


def subject(**claims: Any) -> dict[str, Any]:
    return {"sub": "user-1", "client_id": "agent", "aud": "https://id.example",
            "scope": "openid notes:read", "exp": NOW + 100, "sid": "grant-1", **claims}


def decide(asked: Any = None, **overrides: Any) -> Any:
    arguments = {"client": client(), "subject": subject(), "actor": None,
                 "access_ttl": 3600, "now": NOW, **overrides}
    return decide_exchange(asked or request(), policy=ExchangePolicy.of(arguments["client"]),
                           **arguments)


def test_the_new_token_is_the_subjects_narrowed_and_never_outlives_it() -> None:
    exchange = decide(request(scope="notes:read"))
    assert (exchange.subject, exchange.scope, exchange.audience) == (
        "user-1", ("notes:read",), (NOTES,))
    assert exchange.act == {"sub": "agent", "client_id": "agent"}
    assert (exchange.grant_id, exchange.expires_at) == ("grant-1", NOW + 100)


def test_an_earlier_actor_is_nested() -> None:
    earlier = {"sub": "agent-0", "client_id": "agent-0"}
    exchange = decide(subject=subject(act=earlier, client_id="agent"))
    assert exchange.act == {"sub": "agent", "client_id": "agent", "act": earlier}


@pytest.mark.parametrize(("overrides", "refusal", "code"), [
    ({"client": client(public=True)}, OAuthError, "exchange_not_allowed"),
    ({"asked": request(resource="https://other.example")}, InvalidTarget,
     "target_not_allowed"),
    ({"subject": subject(client_id="someone-else")}, InvalidGrant,
     "subject_token_not_accepted"),
    ({"subject": subject(cnf={"jkt": "x"})}, InvalidGrant, "subject_token_bound"),
    ({"asked": request(scope="notes:write")}, InvalidScope, "scope_exceeds_subject"),
    ({"actor": {"sub": "x", "client_id": "other"}}, InvalidGrant, "actor_token_not_accepted"),
    ({"actor": {"sub": "x", "client_id": "agent", "cnf": {"jkt": "k"}}}, InvalidGrant,
     "actor_token_bound"),
    ({"subject": subject(scope="openid notes:read notes:write"),
      "asked": request(scope="notes:write")}, InvalidScope, "scope_not_allowed"),
])
def test_each_refusal(overrides: dict[str, Any], refusal: type[OAuthError], code: str) -> None:
    with pytest.raises(refusal) as refused:
        decide(**overrides)
    assert refused.value.code == code


def test_the_request_names_a_target_and_access_tokens_only() -> None:
    for form, code in (({"resource": ""}, "target_required"),
                       ({"subject_token_type": "urn:x"}, "subject_token_type_unsupported"),
                       ({"requested_token_type": "urn:x"}, "requested_token_type_unsupported"),
                       ({"actor_token": "a"}, "actor_token_type_missing")):
        with pytest.raises(OAuthError) as refused:
            request(**form)
        assert refused.value.code == code
    assert request(audience=NOTES, resource="").targets == (NOTES,)
    both = "https://calendar.example/api"
    assert request(audience=[NOTES, both], resource="").targets == (NOTES, both)  # repeated
