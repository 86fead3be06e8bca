"""Scale-out: two `identityctl serve` processes on one PostgreSQL database act as one service.

Each test run gets its own database (created on the server of IDENTITYCTL_TEST_PG_URL, dropped
afterwards). Both instances read the same config file (the same public address, as behind one
load balancer) and listen on different ports. Ceremonies started on one finish on the other,
a session token sent to both at once is accepted exactly once, and an OAuth authorization-code
flow whose every step goes to the other instance than the step before works end to end.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from identityctl.config import load_config
from identityctl.oauth.pkce import s256_challenge
from identityctl.services.catalog.applications import oauth_config
from tests.conftest import Service, free_port, in_process, pg_server_url
from tests.support.authenticator import SoftAuthenticator
from tests.support.flows import FlowClient
from tests.support.logout import confirmed_logout
from tests.support.oauth import OAuthDriver, RegisteredClient, query_of
from tests.support.passkeys import PasskeyClient
from tests.support.postgres import empty_database
from tests.support.processes import stop, wait_for_health

pytestmark = pytest.mark.postgres

#: Concurrent finishes sent to each instance with the same session token.
PER_INSTANCE = 5


@pytest.fixture(scope="module")
def database_url() -> Iterator[str]:
    """A new, empty PostgreSQL database on the test server; dropped after the module."""
    server_url = pg_server_url()
    with empty_database(server_url, prefix="identityctl_scale") as url:
        yield url


@dataclass
class Cluster:
    """Two instances of one deployment and the admin token to enrol passkeys with."""

    a: PasskeyClient
    b: PasskeyClient
    config_path: Path
    admin_token: str

    def new_user_id(self) -> str:
        made = in_process("user", "create", "--username", f"u-{uuid.uuid4().hex[:10]}",
                          "--json", config=self.config_path)
        return json.loads(made.stdout)["id"]


def _serve(config_path: Path, port: int, log_path: Path) -> subprocess.Popen[str]:
    with log_path.open("w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "identityctl", "--config", str(config_path), "serve",
             "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=log, text=True)


@pytest.fixture(scope="module")
def cluster(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("scale-out")
    port_a, port_b = free_port(), free_port()
    in_process("init", "--dir", str(directory), "--base-url", f"http://localhost:{port_a}",
               "--json")
    config_path = directory / "config.toml"
    text = config_path.read_text()
    assert 'url = "sqlite:///identityctl.db"' in text
    config_path.write_text(text.replace('url = "sqlite:///identityctl.db"',
                                        f'url = "{database_url}"'))

    processes: list[subprocess.Popen[str]] = []
    clients = []
    try:
        # A migrates and seeds the empty database, then B starts on what A made.
        for port in (port_a, port_b):
            process = _serve(config_path, port, directory / f"serve-{port}.log")
            processes.append(process)
            wait_for_health(f"http://127.0.0.1:{port}/health", process)
            service = Service(config=load_config(config_path), config_path=config_path,
                              base_url=f"http://localhost:{port}", http=requests.Session())
            clients.append(PasskeyClient(service))
        token = in_process("token", "--scope", "system", config=config_path)
        yield Cluster(a=clients[0], b=clients[1], config_path=config_path,
                      admin_token=token.stdout.strip())
    finally:
        for client in clients:
            client.service.http.close()
        stop(*processes)
    for port, process in zip((port_a, port_b), processes, strict=True):
        log = (directory / f"serve-{port}.log").read_text()
        assert process.returncode == 0 and "Traceback" not in log, log


@pytest.fixture
def on(cluster: Cluster) -> Cluster:
    for client in (cluster.a, cluster.b):
        client._admin_token = cluster.admin_token
    return cluster


def test_both_instances_are_up_on_one_database(on: Cluster) -> None:
    for client in (on.a, on.b):
        health = client.service.get("/health")
        assert health.status_code == 200 and health.json()["database"] == "ok"


def test_register_on_a_finish_on_b_then_sign_in_on_b_finish_on_a(on: Cluster) -> None:
    user_id, authenticator = on.new_user_id(), SoftAuthenticator()

    started = on.a.register_start(user_id)
    assert started.status_code == 200, started.text
    body = started.json()
    credential = authenticator.create(body["publicKeyCredentialCreationOptions"],
                                      origin=on.a.origin)
    finished = on.b.register_finish(credential, body["sessionToken"], name="Across")
    assert finished.status_code == 201, finished.text

    options, session_token = on.b.begin_sign_in(user_id)
    signed_in = on.a.auth_finish(authenticator.get(options, origin=on.b.origin), session_token)
    assert signed_in.status_code == 200, signed_in.text
    assert signed_in.json()["id"] == user_id

    # And usernameless, the other way round.
    options, session_token = on.a.begin_sign_in()
    signed_in = on.b.auth_finish(authenticator.get(options, origin=on.a.origin), session_token)
    assert signed_in.status_code == 200, signed_in.text
    assert signed_in.json()["id"] == user_id


def _on_both_at_once(on: Cluster, path: str, body: dict,
                     headers: dict[str, str] | None = None) -> list[requests.Response]:
    urls = [client.service.url(path) for client in (on.a, on.b)] * PER_INSTANCE
    with ThreadPoolExecutor(len(urls)) as pool:
        return list(pool.map(
            lambda url: requests.post(url, json=body, headers=headers or {}, timeout=30), urls))


def _accepted_once(responses: list[requests.Response], success: int,
                   losing_codes: tuple[str, ...]) -> None:
    statuses = [response.status_code for response in responses]
    assert statuses.count(success) == 1, [(r.status_code, r.text) for r in responses]
    for response in responses:
        if response.status_code != success:
            assert response.json()["code"] in losing_codes, response.text


def test_a_sign_in_token_finished_on_both_instances_at_once_is_accepted_once(
        on: Cluster) -> None:
    user_id, authenticator = on.new_user_id(), SoftAuthenticator()
    started = on.a.register_start(user_id)
    assert started.status_code == 200, started.text
    credential = authenticator.create(started.json()["publicKeyCredentialCreationOptions"],
                                      origin=on.a.origin)
    finished = on.b.register_finish(credential, started.json()["sessionToken"])
    assert finished.status_code == 201, finished.text

    options, session_token = on.a.begin_sign_in(user_id)
    body = {"publicKeyCredential": authenticator.get(options, origin=on.a.origin),
            "sessionToken": session_token}

    responses = _on_both_at_once(on, "/auth/passkey/finish", body)

    _accepted_once(responses, 200, ("unknown_session_token",))


def test_a_registration_token_finished_on_both_instances_at_once_stores_one_passkey(
        on: Cluster) -> None:
    user_id = on.new_user_id()
    started = on.b.register_start(user_id)
    assert started.status_code == 200, started.text
    body = {"publicKeyCredential": SoftAuthenticator().create(
        started.json()["publicKeyCredentialCreationOptions"], origin=on.b.origin),
        "sessionToken": started.json()["sessionToken"]}

    responses = _on_both_at_once(on, "/register/passkey/finish", body,
                                 {"Authorization": f"Bearer {on.admin_token}"})

    _accepted_once(responses, 201, ("unknown_session_token", "credential_already_registered"))
    listed = in_process("passkey", "list", user_id, "--json", config=on.config_path)
    assert len(json.loads(listed.stdout)) == 1


def _server_app(on: Cluster, redirect_uri: str) -> RegisteredClient:
    made = in_process("app", "create", "--template", "Server", "--name",
                      f"across {uuid.uuid4().hex[:8]}", "--redirect-uri", redirect_uri,
                      "--sign-in-flow", "default-basic-flow", "--json", config=on.config_path)
    created = json.loads(made.stdout)
    settings = oauth_config(created)
    return RegisteredClient(application_id=created["id"], client_id=settings["clientId"],
                            secret=created["clientSecret"], redirect_uri=redirect_uri,
                            auth_method=settings["tokenEndpointAuthMethod"])


def _password_user(on: Cluster) -> tuple[str, str, str]:
    """A new user with a password: username, password, id."""
    username, password = f"across-{uuid.uuid4().hex[:8]}", "across instances 9c41 pw"
    user = in_process("user", "create", "--username", username, "--password-stdin", "--json",
                      input=password + "\n", config=on.config_path)
    return username, password, json.loads(user.stdout)["id"]


def test_an_oauth_code_flow_alternating_between_the_instances(on: Cluster) -> None:
    """authorize on A -> password flow on B -> callback on A -> token on B -> refresh on A."""
    redirect_uri = "https://app.example/callback"
    client = _server_app(on, redirect_uri)
    username, password, user_id = _password_user(on)
    a, b = OAuthDriver(on.a.service), OAuthDriver(on.b.service)

    # A: the client sends the browser to authorize; A hands it to the hosted sign-in page.
    verifier, state, nonce = secrets.token_urlsafe(48), secrets.token_urlsafe(8), "n-across"
    link = a.gate_link(client, state=state, nonce=nonce, code_challenge=s256_challenge(verifier),
                       code_challenge_method="S256")
    assert link["applicationId"] == client.application_id

    # B: the hosted page runs the application's sign-in flow (password).
    flow = FlowClient(b.service, link["applicationId"])
    flow.start()
    done = flow.act("password", username=username, password=password)
    assert done["flowStatus"] == "COMPLETE" and done.get("assertion"), done

    # A: the hosted page hands the assertion back; the browser goes to the client with a code.
    answered = a.callback(link["authId"], done["assertion"])
    assert answered.status_code == 200, answered.text
    back = query_of(answered.json()["redirect_uri"])
    assert back["state"] == state and back["iss"] == on.a.service.config.issuer

    # B: the client exchanges the code (secret checked on B, code stored by A).
    exchanged = b.client_post("/oauth2/token", client, {
        "grant_type": "authorization_code", "code": back["code"], "redirect_uri": redirect_uri,
        "code_verifier": verifier})
    assert exchanged.status_code == 200, exchanged.text
    tokens = exchanged.json()
    id_claims = b.verified(tokens["id_token"], audience=client.client_id)
    assert id_claims["sub"] == user_id and id_claims["nonce"] == nonce

    # A: the refresh token B issued works on A, and the new access token on B.
    refreshed = a.refresh(client, tokens["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["refresh_token"] != tokens["refresh_token"]
    userinfo = b.userinfo(refreshed.json()["access_token"])
    assert userinfo.status_code == 200, userinfo.text
    assert userinfo.json()["sub"] == user_id

    # The code was single use across instances: replaying it on A is refused.
    replayed = a.client_post("/oauth2/token", client, {
        "grant_type": "authorization_code", "code": back["code"], "redirect_uri": redirect_uri,
        "code_verifier": verifier})
    assert replayed.status_code == 400, replayed.text


def test_signed_in_through_one_instance_signed_in_through_the_other(on: Cluster) -> None:
    """Sign in to app 1 through A; app 2 through B gets a code with no sign-in (the browser
    session lives in the shared store); B's logout ends it for A too."""
    first, second = (_server_app(on, f"https://app{n}.example/callback") for n in (1, 2))
    username, password, user_id = _password_user(on)
    a, b = OAuthDriver(on.a.service), OAuthDriver(on.b.service)
    link = a.gate_link(first, code_challenge=s256_challenge("v" * 43),
                       code_challenge_method="S256")
    flow = FlowClient(a.service, link["applicationId"])
    flow.start()
    done = flow.act("password", username=username, password=password)
    answered = a.callback(link["authId"], done["assertion"])
    assert answered.status_code == 200, answered.text
    session = answered.headers["Set-Cookie"].split(";")[0].partition("=")[2]

    verifier = secrets.token_urlsafe(48)
    through_b = b.authorize(second, session=session, code_challenge=s256_challenge(verifier),
                            code_challenge_method="S256")
    assert through_b.status_code == 302
    back = query_of(through_b.headers["Location"])
    assert through_b.headers["Location"].startswith(second.redirect_uri) and back["code"]
    exchanged = a.client_post("/oauth2/token", second, {
        "grant_type": "authorization_code", "code": back["code"],
        "redirect_uri": second.redirect_uri, "code_verifier": verifier})
    assert exchanged.status_code == 200, exchanged.text
    assert a.verified(exchanged.json()["id_token"], audience=second.client_id)["sub"] == user_id

    signed_out = confirmed_logout(b.service, session)  # the person presses "Sign out"
    assert signed_out.status_code == 200
    after = a.authorize(first, session=session, prompt="none",
                        code_challenge=s256_challenge(verifier), code_challenge_method="S256")
    assert query_of(after.headers["Location"])["error"] == "login_required"
