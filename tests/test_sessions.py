"""The browser session over HTTP: what ends it, who can end it, and back-channel logout that
survives the service being killed while it delivers.

The browser's part is played with the session cookie set by hand (the Secure cookie a real
browser keeps on localhost; tests/test_single_sign_on.py has the same in Chromium).
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from identityctl.config import load_config
from identityctl.oauth.pkce import s256_challenge
from identityctl.services import catalog
from identityctl.services.accounts.account import ACCOUNT_CLIENT_ID
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from tests.conftest import QUICK_DELIVERIES, Service, shared_deployment
from tests.support.logout import (
    confirmation_in,
    confirmed_logout,
    logout_question,
    press_sign_out,
)
from tests.support.oauth import OAuthDriver, RegisteredClient, query_of, register_client
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import assert_error
from tests.support.processes import stop, wait_for_health
from tests.support.relying_party import RelyingParty, relying_party
from tests.test_account import Account
from tests.test_consent import self_registered
from tests.test_scale_out import _serve


@pytest.fixture
def rp(service: Service) -> OAuthDriver:
    return OAuthDriver(service)


def answered_without_a_page(response: requests.Response, client: RegisteredClient) -> dict:
    assert response.status_code == 302, response.text
    assert response.headers["Location"].startswith(client.redirect_uri + "?"), \
        response.headers["Location"]
    return query_of(response.headers["Location"])


def test_a_session_answers_the_next_authorization_until_the_user_is_disabled(
        rp: OAuthDriver) -> None:
    client = register_client("SPA")
    user, session, _ = rp.session_sign_in(client)
    challenge = {"code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                 "code_challenge_method": "S256"}
    assert "code" in answered_without_a_page(rp.authorize(client, session=session, **challenge),
                                             client)
    directory.set_status(user.id, directory.Standing.DISABLED, origin=RequestOrigin(actor="test"))
    again = rp.authorize(client, session=session, **challenge)
    assert again.headers["Location"].startswith(rp.service.config.gate_url)  # sign in again
    refused = rp.authorize(client, session=session, prompt="none", **challenge)
    assert answered_without_a_page(refused, client)["error"] == "login_required"


def test_a_flow_without_a_session_check_signs_the_person_in_every_time(
        rp: OAuthDriver) -> None:
    strict = catalog.flows.create_flow({**catalog.flows.require_flow_by_handle(
        "default-basic-passkey-flow", "AUTHENTICATION"), "id": None,
        "handle": f"fresh-{uuid.uuid4().hex[:6]}", "name": "Always a fresh sign-in"},
                                       origin=TEST_ORIGIN)
    strict["nodes"] = [node for node in strict["nodes"] if node["id"] != "sso_check"]
    start = next(node for node in strict["nodes"] if node["type"] == "START")
    start["onSuccess"] = "prompt_signin"
    catalog.flows.update_flow(strict["id"], name=strict["name"], nodes=strict["nodes"],
                              origin=TEST_ORIGIN)
    relaxed, demanding = register_client("SPA"), register_client("SPA")
    application = catalog.applications.get_application(demanding.application_id)
    catalog.applications.update_application({**application, "authFlowId": strict["id"]},
                                            origin=TEST_ORIGIN)
    _, session, _ = rp.session_sign_in(relaxed)
    challenge = {"code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                 "code_challenge_method": "S256"}
    assert "code" in answered_without_a_page(
        rp.authorize(relaxed, session=session, **challenge), relaxed)
    asked = rp.authorize(demanding, session=session, **challenge)
    assert asked.headers["Location"].startswith(rp.service.config.gate_url)
    assert answered_without_a_page(rp.authorize(demanding, session=session, prompt="none",
                                                **challenge), demanding)["error"] == \
        "login_required"


def test_an_admin_lists_and_ends_a_users_sessions(rp: OAuthDriver, service: Service) -> None:
    client = register_client("SPA")
    user, session, _ = rp.session_sign_in(client)
    runner = CliRunner()

    def cli(*args: str) -> Any:
        answer = runner.invoke(cli_app, ["--config", str(service.config_path), *args, "--json"])
        assert answer.exit_code == 0, answer.output
        return json.loads(answer.output)

    [listed] = cli("user", "sessions", user.username)
    assert listed["userId"] == user.id and "passkey" in listed["amr"]
    assert cli("user", "end-sessions", user.username, "--yes")["ended"] == 1
    assert cli("user", "sessions", user.username) == []
    challenge = {"code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                 "code_challenge_method": "S256", "prompt": "none"}
    assert answered_without_a_page(rp.authorize(client, session=session, **challenge),
                                   client)["error"] == "login_required"


# --- back-channel logout across a crash ------------------------------------------------------


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """One delivery may take 1 s, so a claim runs out after 3 s."""
    yield from shared_deployment(tmp_path, QUICK_DELIVERIES)


def test_a_logout_notice_survives_the_service_being_killed_while_delivering_it(
        deployment: tuple[Path, int], tmp_path: Path) -> None:
    config_path, port = deployment
    service = Service(config=load_config(config_path), config_path=config_path,
                      base_url=f"http://localhost:{port}", http=requests.Session())
    log = tmp_path / "serve.log"
    server = _serve(config_path, port, log)
    with relying_party() as party:
        try:
            wait_for_health(f"http://127.0.0.1:{port}/health", server, log)
            server = _logout_while_the_service_dies(service, party, server, config_path,
                                                    port, tmp_path)
        finally:
            stop(server)


def _logout_while_the_service_dies(service: Service, party: RelyingParty, server: Any,
                                   config_path: Path, port: int, tmp_path: Path) -> Any:
    rp = OAuthDriver(service)
    a = register_client("SPA", redirect_uri=party.url("/a/callback"))
    b = register_client("SPA", redirect_uri=party.url("/b/callback"),
                        backchannelLogoutUri=party.url("/logout/b"))
    user, session, _ = rp.session_sign_in(a)
    verifier = "v" * 43
    back = answered_without_a_page(rp.authorize(
        b, session=session, code_challenge=s256_challenge(verifier),
        code_challenge_method="S256"), b)
    tokens = requests.post(service.url("/oauth2/token"), timeout=30, data={
        "grant_type": "authorization_code", "code": back["code"], "client_id": b.client_id,
        "redirect_uri": b.redirect_uri, "code_verifier": verifier}).json()
    sid = jwt.decode(tokens["id_token"], options={"verify_signature": False})["sid"]

    party.hold("b")
    signed_out = confirmed_logout(service, session)
    assert signed_out.status_code == 200
    party.wait_until_holding("b")
    server.send_signal(signal.SIGKILL)  # mid-delivery: the notice is claimed, not delivered
    server.wait()
    party.release("b")
    restarted = _serve(config_path, port, tmp_path / "restarted.log")
    wait_for_health(f"http://127.0.0.1:{port}/health", restarted, tmp_path / "restarted.log")

    first, second = party.wait_for_logouts("b", 2, timeout=30)
    key = jwt.PyJWKClient(service.url("/oauth2/jwks")).get_signing_key_from_jwt(second).key
    claims = jwt.decode(second, key, algorithms=[service.config.oauth.signing_alg],
                        audience=b.client_id, issuer=service.config.issuer)
    assert (claims["sub"], claims["sid"]) == (user.id, sid)
    # The same notice again (its jti): the client, remembering jtis, logs out once.
    assert {jwt.decode(token, options={"verify_signature": False})["jti"]
            for token in (first, second)} == {claims["jti"]}
    time.sleep(2)
    assert len(party.logout_tokens["b"]) == 2  # delivered, and then no more
    return restarted


def test_a_session_still_asks_consent_of_a_client_that_described_itself(
        open_registration: Service) -> None:
    service = open_registration
    rp = OAuthDriver(service)
    _, session, _ = rp.session_sign_in(register_client("SPA"))
    client = self_registered(service)
    challenge = {"code_challenge": s256_challenge("v" * 43), "code_challenge_method": "S256"}
    refused = rp.authorize(client, session=session, prompt="none", **challenge)
    assert answered_without_a_page(refused, client)["error"] == "consent_required"

    page = rp.authorize(client, session=session, **challenge)
    link = query_of(page.headers["Location"])
    assert page.headers["Location"].startswith(service.config.gate_url)
    assert link["resume"] == "session" and "executionId" not in link
    cookie = {"Cookie": f"__Host-identityctl-session={session}"}
    # Without the session the page cannot go on; with it, the consent question.
    assert service.post("/oauth2/auth/callback", {"authId": link["authId"],
                                                  "resume": "session"}).status_code == 401
    asked = service.post("/oauth2/auth/callback", {"authId": link["authId"],
                                                   "resume": "session"}, headers=cookie)
    assert asked.status_code == 200 and "consent" in asked.json(), asked.text
    allowed = rp.consent(link["authId"], asked.json()["consentToken"])
    assert "code" in query_of(allowed.json()["redirect_uri"])
    # Approved once: the session now answers without a page.
    assert "code" in answered_without_a_page(
        rp.authorize(client, session=session, **challenge), client)


def test_a_logout_no_id_token_vouches_for_asks_the_person_first(rp: OAuthDriver,
                                                                 service: Service) -> None:
    """OpenID Connect RP-Initiated Logout 1.0 §2: another site's link (no id_token_hint)
    cannot sign the person out; the service asks, and only its own page's answer counts."""
    client = register_client("SPA")
    _, session, _ = rp.session_sign_in(client)
    still_signed_in = lambda: "code" in query_of(rp.authorize(  # noqa: E731
        client, session=session, prompt="none", code_challenge=s256_challenge("v" * 43),
        code_challenge_method="S256").headers["Location"])

    question = logout_question(service, session, client_id=client.client_id,
                               post_logout_redirect_uri=client.redirect_uri, state="bye")
    assert question.status_code == 200 and "Sign out of identityctl?" in question.text
    assert still_signed_in()
    _, another_session, _ = rp.session_sign_in(client)  # another browser's answer
    for forged in ("", "0" * 64, confirmation_in(logout_question(service, another_session))):
        refused = press_sign_out(service, session, forged)
        assert refused.status_code == 200 and "Sign out of identityctl?" in refused.text
    assert still_signed_in()

    signed_out = press_sign_out(service, session, confirmation_in(question),
                                client_id=client.client_id,
                                post_logout_redirect_uri=client.redirect_uri, state="bye")
    assert signed_out.status_code == 302
    assert signed_out.headers["Location"] == f"{client.redirect_uri}?state=bye"
    assert not still_signed_in()


def test_the_signed_out_page_leads_back_to_the_application(rp: OAuthDriver,
                                                           service: Service) -> None:
    client = register_client("SPA", redirect_uri="https://shop.example/callback")
    _, session, _ = rp.session_sign_in(client)
    page = confirmed_logout(service, session, client_id=client.client_id)
    assert "You are signed out" in page.text
    assert 'href="https://shop.example/"' in page.text  # the application's home
    unnamed = service.get("/oauth2/logout")  # no application named: the account page
    assert f'href="{service.url("/account")}"' in unnamed.text and "Sign in again" in unnamed.text


PHONE_BROWSER = ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like "
                 "Gecko) Chrome/126.0 Mobile Safari/537.36")


def _signed_in_on(me: Account, client: RegisteredClient, user_agent: str) -> str:
    """The person signs in for ``client`` in another browser: its session cookie's value."""
    link = me.rp.gate_link(client, code_challenge=s256_challenge("v" * 43),
                           code_challenge_method="S256")
    me.authenticator.credentials[0].sign_count += 1
    finished = me.passkeys.sign_in(me.authenticator, me.user.id)
    answered = me.service.post("/oauth2/auth/callback", {
        "authId": link["authId"], "assertion": finished.json()["assertion"]},
        headers={"User-Agent": user_agent})
    assert answered.status_code == 200, answered.text
    return answered.headers["Set-Cookie"].split(";")[0].partition("=")[2]


def test_a_person_sees_every_device_and_signs_out_of_one_of_the_others_or_of_all(
        service: Service) -> None:
    """A lost phone: the account page lists it (in plain words, with its applications) and
    ends it, and its applications hear of it by back-channel logout; then every other device,
    then everywhere (this page's own sign-in too)."""
    me = Account(service)
    with relying_party() as party:
        shop = register_client("SPA", redirect_uri=party.url("/shop/callback"),
                               backchannelLogoutUri=party.url("/logout/shop"))
        phone = _signed_in_on(me, shop, PHONE_BROWSER)
        devices = me.ok("GET", "/browser-sessions")["browserSessions"]
        [here] = [device for device in devices if device["current"]]
        [lost] = [device for device in devices if not device["current"]]
        assert (lost["browser"], lost["system"], lost["address"]) == ("Chrome", "Android",
                                                                      "127.0.0.1")
        assert [app["clientId"] for app in lost["applications"]] == [shop.client_id]
        assert lost["signedInAt"] and lost["lastSeenAt"]
        assert [app["clientId"] for app in here["applications"]] == [ACCOUNT_CLIENT_ID]

        assert me.call("DELETE", f"/browser-sessions/{lost['id']}").status_code == 204
        [notice] = party.wait_for_logouts("shop", 1)
        assert jwt.decode(notice, options={"verify_signature": False})["sub"] == me.user.id
        assert answered_without_a_page(me.rp.authorize(
            shop, session=phone, prompt="none", code_challenge=s256_challenge("v" * 43),
            code_challenge_method="S256"), shop)["error"] == "login_required"
        assert_error(me.call("DELETE", f"/browser-sessions/{lost['id']}"), 404,
                     "device_not_found")

    for browser in ("Firefox on a laptop", PHONE_BROWSER):
        _signed_in_on(me, register_client("SPA"), browser)
    assert me.ok("POST", "/sign-out", {"scope": "others"}) == {"ended": 2}
    [left] = me.ok("GET", "/browser-sessions")["browserSessions"]
    assert left["current"]  # this page stays signed in
    assert_error(me.call("POST", "/sign-out", {"scope": "some"}), 400, "invalid_field")
    assert me.ok("POST", "/sign-out", {"scope": "everywhere"}) == {"ended": 1}
    assert_error(me.call("GET", "/profile"), 401, "invalid_token")
