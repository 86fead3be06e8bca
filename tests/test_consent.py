"""Consent: a client that described itself gets a code only after the person allows it.

Played over HTTP as the hosted page plays it (its pages are in test_mcp_sign_in.py): the
callback answers a consent question and a token only that page learns; the page posts the
person's decision with it. Approvals are remembered per (person, client) with their scopes.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from identityctl.oauth.consent import ConsentRequest, consent_required
from identityctl.services import catalog
from identityctl.services.directory import roles
from identityctl.services.origin import RequestOrigin
from identityctl.store import audit
from identityctl.store import grants as grant_store
from tests.conftest import Service, start_service
from tests.support.authenticator import SoftAuthenticator
from tests.support.oauth import OAuthDriver, RegisteredClient, query_of, register_client
from tests.support.passkeys import PasskeyClient, assert_error

LOOPBACK = "http://127.0.0.1:33418/callback"


def self_registered(service: Service) -> RegisteredClient:
    answer = service.http.post(service.url("/oauth2/register"), timeout=30, json={
        "client_name": "Notes assistant", "redirect_uris": [LOOPBACK],
        "grant_types": ["authorization_code", "refresh_token"]})
    assert answer.status_code == 201, answer.text
    client_id = answer.json()["client_id"]
    application = catalog.applications.require_application_by_client_id(client_id)
    return RegisteredClient(application_id=application["id"], client_id=client_id,
                            secret=None, redirect_uri=LOOPBACK, auth_method="none")


class Person:
    """One person with a passkey, signing in again and again for authorization requests."""

    def __init__(self, service: Service) -> None:
        self.rp, self.passkeys = OAuthDriver(service), PasskeyClient(service)
        self.user = self.passkeys.new_user(email=f"ada-{uuid.uuid4().hex[:8]}@example.com")
        self.authenticator = SoftAuthenticator()
        self.passkeys.enrolled(self.user, self.authenticator)

    def signs_in_for(self, client: RegisteredClient, **params: Any) -> tuple[str, dict]:
        """authorize, then the sign-in's hand-off: the request id and the callback answer."""
        link = self.rp.gate_link(client, code_challenge="E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJ"
                                 "Sstw-cM", code_challenge_method="S256", **params)
        finished = self.passkeys.sign_in(self.authenticator, self.user.id)
        assert finished.status_code == 200, finished.text
        answer = self.rp.callback(link["authId"], finished.json()["assertion"])
        assert answer.status_code == 200, answer.text
        return link["authId"], answer.json()

    def decides(self, auth_id: str, token: str, decision: str) -> requests.Response:
        return self.rp.consent(auth_id, token, decision)


def test_a_self_registered_client_is_asked_about_once_for_the_same_scopes(
        open_registration: Service) -> None:
    client, person = self_registered(open_registration), Person(open_registration)
    auth_id, answer = person.signs_in_for(client, scope="openid profile")
    assert answer["redirect_uri"] is None
    assert answer["signedInAs"] == person.user.username  # the page says who answers
    consent = answer["consent"]
    assert consent["clientId"] == client.client_id and consent["registeredItself"] is True
    assert consent["clientHost"] is None
    assert [s["scope"] for s in consent["scopes"]] == ["openid", "profile"]
    assert consent["scopes"][1]["description"] == "See your name and username"
    allowed = person.decides(auth_id, answer["consentToken"], "allow")
    assert allowed.status_code == 200, allowed.text
    assert "code" in query_of(allowed.json()["redirect_uri"])
    assert grant_store.granted_scopes(person.user.id, client.application_id) == [
        "openid", "profile"]

    # Within what was allowed: straight back to the client.
    _, again = person.signs_in_for(client, scope="openid")
    assert "consent" not in again and "code" in query_of(again["redirect_uri"])
    # Wider, or prompt=consent: asked again.
    assert "consent" in person.signs_in_for(client, scope="openid email")[1]
    assert "consent" in person.signs_in_for(client, scope="openid", prompt="consent")[1]
    [event] = audit.events(event="oauth.consent")
    assert event["outcome"] == "success" and event["userId"] == person.user.id


def test_the_teams_own_applications_are_not_asked_about(service: Service) -> None:
    client, person = register_client("SPA", redirect_uri=LOOPBACK), Person(service)
    _, answer = person.signs_in_for(client, scope="openid")
    assert "consent" not in answer and "code" in query_of(answer["redirect_uri"])
    # ... unless the client asks for the question itself.
    assert "consent" in person.signs_in_for(client, scope="openid", prompt="consent")[1]


def test_denying_sends_access_denied_and_grants_nothing(open_registration: Service) -> None:
    client, person = self_registered(open_registration), Person(open_registration)
    auth_id, answer = person.signs_in_for(client, scope="openid", state="s-1")
    denied = person.decides(auth_id, answer["consentToken"], "deny")
    assert denied.status_code == 200, denied.text
    back = query_of(denied.json()["redirect_uri"])
    assert back["error"] == "access_denied" and back["state"] == "s-1"
    assert back["iss"] == open_registration.config.issuer
    assert grant_store.granted_scopes(person.user.id, client.application_id) == []
    [event] = audit.events(event="oauth.consent")
    assert event["outcome"] == "denied"


def test_only_the_page_that_signed_in_can_answer_and_only_once(
        open_registration: Service) -> None:
    client, person = self_registered(open_registration), Person(open_registration)
    auth_id, answer = person.signs_in_for(client, scope="openid")
    # Someone who learnt the request id (it is in the page's address) decides nothing, and
    # cancels nothing: the person's own answer still counts.
    for guess in ("", "not-the-token", answer["consentToken"][:-1] + "x"):
        for decision in ("allow", "deny"):
            refused = person.decides(auth_id, guess, decision)
            assert refused.status_code == 400, refused.text
    assert_error(person.decides(auth_id, "x" * 43, "deny"), 400, "consent_invalid")
    allowed = person.decides(auth_id, answer["consentToken"], "allow")
    assert allowed.status_code == 200 and "code" in query_of(allowed.json()["redirect_uri"])
    assert_error(person.decides(auth_id, answer["consentToken"], "allow"), 400,
                 "consent_invalid")
    assert_error(person.decides(auth_id, answer["consentToken"], "maybe"), 400,
                 "invalid_field")


def test_a_role_taken_away_while_the_question_is_open_still_refuses(
        tmp_path: Path) -> None:
    service, stop = start_service(tmp_path, settings={
        'dynamic_registration = "off"': 'dynamic_registration = "open"',
        'registration_scopes = ["openid", "profile", "email"]':
        'registration_scopes = ["openid", "system"]'})
    try:
        client, person, successor = self_registered(service), Person(service), Person(service)
        for holder in (person, successor):  # never the last administrator
            roles.grant_role(holder.user.id, "admin", origin=RequestOrigin(actor="test"))
        auth_id, answer = person.signs_in_for(client, scope="openid system")
        roles.revoke_role(person.user.id, "admin", origin=RequestOrigin(actor="test"))
        decided = person.decides(auth_id, answer["consentToken"], "allow")
        back = query_of(decided.json()["redirect_uri"])
        assert back["error"] == "access_denied" and "no role" in decided.json()["refused"]
    finally:
        stop()


# --- the rule itself ------------------------------------------------------------------------


@pytest.mark.parametrize(("described_itself", "requested", "granted", "prompts", "asked"), [
    (True, ["openid"], [], [], True),
    (True, ["openid"], ["openid", "profile"], [], False),
    (True, ["openid", "email"], ["openid"], [], True),
    (False, ["openid", "system"], [], [], False),
    (False, ["openid"], ["openid"], ["consent"], True),
    (True, ["openid"], ["openid"], ["login", "consent"], True),
])
def test_consent_is_required_for_third_parties_beyond_what_they_were_given(
        described_itself: bool, requested: list[str], granted: list[str], prompts: list[str],
        asked: bool) -> None:
    assert consent_required(described_itself=described_itself, requested=requested,
                            granted=granted, prompts=prompts) is asked


def test_a_client_id_url_shows_its_host_and_unknown_scopes_show_their_name() -> None:
    shown = ConsentRequest(client_name="Editor", client_id="https://editor.example/client.json",
                           described_itself=True, scopes=("openid", "notes:read"),
                           resources=("https://notes.example/mcp",)).to_api()
    assert shown["clientHost"] == "editor.example" and shown["registeredItself"] is False
    assert shown["scopes"][1] == {"scope": "notes:read", "description": "notes:read"}
    assert shown["resources"] == ["https://notes.example/mcp"]
