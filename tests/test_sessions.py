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
from identityctl.services import catalog, directory
from tests.conftest import QUICK_DELIVERIES, Service, shared_deployment
from tests.support.processes import stop, wait_for_health
from tests.support.relying_party import RelyingParty, relying_party
from tests.test_consent import self_registered
from tests.test_oauth_helpers import OAuthDriver, RegisteredClient, query_of, register_client
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
    directory.set_status(user.id, directory.Standing.DISABLED, actor="test")
    again = rp.authorize(client, session=session, **challenge)
    assert again.headers["Location"].startswith(rp.service.config.gate_url)  # sign in again
    refused = rp.authorize(client, session=session, prompt="none", **challenge)
    assert answered_without_a_page(refused, client)["error"] == "login_required"


def test_a_flow_without_a_session_check_signs_the_person_in_every_time(
        rp: OAuthDriver) -> None:
    strict = catalog.create_flow({**catalog.require_flow_by_handle(
        "default-basic-passkey-flow", "AUTHENTICATION"), "id": None,
        "handle": f"fresh-{uuid.uuid4().hex[:6]}", "name": "Always a fresh sign-in"})
    strict["nodes"] = [node for node in strict["nodes"] if node["id"] != "sso_check"]
    start = next(node for node in strict["nodes"] if node["type"] == "START")
    start["onSuccess"] = "prompt_signin"
    catalog.update_flow(strict["id"], name=strict["name"], nodes=strict["nodes"])
    relaxed, demanding = register_client("SPA"), register_client("SPA")
    application = catalog.get_application(demanding.application_id)
    catalog.update_application({**application, "authFlowId": strict["id"]})
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
    signed_out = service.http.get(service.url("/oauth2/logout"), timeout=30,
                                  headers={"Cookie": f"__Host-identityctl-session={session}"})
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
