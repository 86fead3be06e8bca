"""Token exchange (RFC 8693) for agents acting for a user: an application trades the user's
access token for one addressed to another resource, naming itself in ``act``.

openid-client (npm) makes the exchange. Who may exchange what is the application's
``tokenExchange`` policy; each refusal RFC 8693 §2.2.2 names is checked: a target not
allowed, a client without the grant, another client's token, a revoked token, more scope
than the subject token had, a missing target. A second hop nests the first actor."""

from __future__ import annotations

from typing import Any

import jwt
import pytest

from identityctl.errors import InvalidField
from identityctl.services.clients import resource_servers
from identityctl.services.context import ServiceContext
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from identityctl.store import audit
from tests.conftest import Service
from tests.support.oauth import (
    OAuthDriver,
    RegisteredClient,
    assert_oauth_error,
    register_client,
)
from tests.support.openid_client import needs_openid_client, step
from tests.support.origins import TEST_ORIGIN
from tests.test_oauth_server import allow_only

GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
NOTES = "https://notes.example/mcp"
CALENDAR = "https://calendar.example/api"


@pytest.fixture
def resources(service: Service) -> None:
    ctx = ServiceContext.for_config(service.config)
    resource_servers.register_resource_server(ctx, identifier=NOTES,
                                              scopes=["notes:read",
                                                      "notes:write"], origin=TEST_ORIGIN)
    resource_servers.register_resource_server(ctx, identifier=CALENDAR, scopes=["calendar:read"],
                                              origin=TEST_ORIGIN)


def agent(**policy: Any) -> RegisteredClient:
    """A confidential application (an agent) that may exchange tokens per ``policy``."""
    return register_client("Server", grantTypes=["authorization_code", "refresh_token", GRANT],
                           scopes=["openid", "profile", "notes:read", "calendar:read"],
                           tokenExchange={"targets": [NOTES], **policy})


def users_token(service: Service, client: RegisteredClient,
                scope: str = "openid notes:read") -> tuple[str, str]:
    """A person signs in to ``client``: their id and the access token ``client`` got."""
    driver = OAuthDriver(service)
    authorization = driver.authorization(client, scope=scope)
    return authorization.user.id, driver.tokens(authorization)["access_token"]


def exchange(service: Service, client: RegisteredClient, subject_token: str,
             **form: str) -> Any:
    return OAuthDriver(service).client_post("/oauth2/token", client, {
        "grant_type": GRANT, "subject_token": subject_token,
        "subject_token_type": ACCESS_TOKEN, "resource": NOTES, **form})


def claims_of(token: str) -> dict[str, Any]:
    return jwt.decode(token, options={"verify_signature": False})


@needs_openid_client
def test_an_agent_exchanges_a_users_token_for_the_notes_server(service: Service,
                                                               resources: None) -> None:
    assistant = agent()
    user_id, subject_token = users_token(service, assistant)
    exchanged = step(service.config.issuer, assistant.client_id, "token_exchange",
                     auth={"method": "client_secret_basic", "secret": assistant.secret},
                     parameters={"subject_token": subject_token,
                                 "subject_token_type": ACCESS_TOKEN, "resource": NOTES,
                                 "scope": "notes:read"})
    assert "error" not in exchanged, exchanged
    assert exchanged["issued_token_type"] == ACCESS_TOKEN
    assert exchanged["token_type"] == "bearer"
    claims = OAuthDriver(service).verified(exchanged["access_token"], audience=NOTES)
    subject = claims_of(subject_token)
    assert claims["sub"] == user_id and claims["scope"] == "notes:read"
    assert claims["act"] == {"sub": assistant.client_id, "client_id": assistant.client_id}
    assert claims["sid"] == subject["sid"]  # ending the user's grant ends this one too
    assert claims["exp"] <= subject["exp"]
    [event] = audit.events(event="oauth.token_exchange", user_id=user_id)
    assert event["actor"] == assistant.client_id and event["details"]["audience"] == [NOTES]


def test_each_exchange_the_policy_does_not_allow_is_refused(service: Service,
                                                            resources: None) -> None:
    assistant = agent()
    _, subject_token = users_token(service, assistant)
    assert exchange(service, assistant, subject_token).status_code == 200
    assert_oauth_error(exchange(service, assistant, subject_token, resource=CALENDAR), 400,
                       "invalid_target", "target_not_allowed")
    assert_oauth_error(exchange(service, assistant, subject_token, scope="notes:write"), 400,
                       "invalid_scope", "scope_exceeds_subject")
    assert_oauth_error(exchange(service, assistant, subject_token, resource=None), 400,
                       "invalid_request", "target_required")
    assert_oauth_error(exchange(service, assistant, subject_token,
                                subject_token_type="urn:ietf:params:oauth:token-type:saml2"),
                       400, "invalid_request", "subject_token_type_unsupported")
    stranger = agent()  # may exchange, but not tokens issued to someone else
    assert_oauth_error(exchange(service, stranger, subject_token), 400, "invalid_grant",
                       "subject_token_not_accepted")
    plain = register_client("Server")
    assert_oauth_error(exchange(service, plain, subject_token), 400, "unauthorized_client",
                       "grant_not_allowed")


def test_identityctl_itself_is_no_target_and_a_deleted_person_has_nothing_to_give(
        service: Service, resources: None) -> None:
    assistant = agent(targets=[NOTES, service.config.issuer])
    user_id, subject_token = users_token(service, assistant)
    assert_oauth_error(exchange(service, assistant, subject_token,
                                resource=service.config.issuer), 400, "invalid_target",
                       "target_not_allowed")
    directory.delete_user(user_id, origin=TEST_ORIGIN)
    assert_oauth_error(exchange(service, assistant, subject_token), 400, "invalid_grant",
                       "user_inactive")


def test_a_user_whose_type_the_application_no_longer_allows_has_nothing_to_give(
        service: Service, resources: None) -> None:
    """services.directory.may_use at the exchange too, for the application that exchanges."""
    assistant = agent()
    _, subject_token = users_token(service, assistant)
    directory.create_user_type(name="contractor", origin=RequestOrigin(actor="test"))
    allow_only(assistant, "contractor")
    assert_oauth_error(exchange(service, assistant, subject_token), 400, "invalid_grant",
                       "user_type_not_allowed")


def test_a_revoked_subject_token_is_not_exchanged(service: Service, resources: None) -> None:
    assistant = agent()
    _, subject_token = users_token(service, assistant)
    driver = OAuthDriver(service)
    assert driver.client_post("/oauth2/revoke", assistant,
                              {"token": subject_token}).status_code == 200
    assert_oauth_error(exchange(service, assistant, subject_token), 400, "invalid_grant",
                       "subject_token_invalid")


def test_a_second_hop_names_both_actors(service: Service, resources: None) -> None:
    search = "https://search.example/api"  # reads notes for the notes server
    resource_servers.register_resource_server(ServiceContext.for_config(service.config),
                                              identifier=search, scopes=["notes:read"],
                                              origin=TEST_ORIGIN)
    assistant = agent()
    user_id, subject_token = users_token(service, assistant)
    first = exchange(service, assistant, subject_token, scope="notes:read")
    assert first.status_code == 200, first.text
    notes_backend = register_client(
        "M2M", grantTypes=["client_credentials", GRANT], scopes=["api", "notes:read"],
        tokenExchange={"targets": [search], "subjectAudiences": [NOTES]})
    second = exchange(service, notes_backend, first.json()["access_token"], resource=search)
    assert second.status_code == 200, second.text
    claims = claims_of(second.json()["access_token"])
    assert (claims["sub"], claims["aud"], claims["scope"]) == (user_id, search, "notes:read")
    assert claims["act"] == {"sub": notes_backend.client_id,
                             "client_id": notes_backend.client_id,
                             "act": {"sub": assistant.client_id,
                                     "client_id": assistant.client_id}}
    # The user's own token is addressed to the issuer, not to the notes server.
    assert_oauth_error(exchange(service, notes_backend, subject_token, resource=search), 400,
                       "invalid_grant", "subject_token_not_accepted")


def test_the_exchange_policy_is_checked_when_saved(service: Service) -> None:
    with pytest.raises(InvalidField, match="public client"):
        register_client("SPA", grantTypes=["authorization_code", GRANT],
                        tokenExchange={"targets": [NOTES]})
    with pytest.raises(InvalidField, match="targets"):
        register_client("Server", grantTypes=["authorization_code", GRANT], tokenExchange={})
    with pytest.raises(InvalidField, match="needs the grant type"):
        register_client("Server", tokenExchange={"targets": [NOTES]})
