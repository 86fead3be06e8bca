"""Sign-in through an upstream identity provider, end to end in Debian Chromium: the upstream
is a second identityctl deployment (its own `serve` process, store, keys and users), where
the person signs in with a passkey of the CDP virtual authenticator.

A first sign-in makes a user; the next finds the same one; an account that already has the
upstream's e-mail address is linked only after its owner signs in to it and says so (a
parked sign-in's link sent to someone else links nothing to them); a tampered state,
a replayed callback, a wrong nonce and an ID token signed by another key each end on the
page in plain words. GitHub's mapping is checked against a local server speaking GitHub's
documented endpoints (GitHub itself cannot be reached from here).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import ec

from identityctl.services import catalog
from identityctl.services.accounts import federation
from identityctl.services.context import ServiceContext
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from identityctl.store import audit as audit_store
from identityctl.store import identity_providers as provider_store
from identityctl.store import recovery as recovery_store
from tests.conftest import Service, free_port, in_process
from tests.support.authenticator import SoftAuthenticator
from tests.support.browser import PasskeyPage, not_now, sign_in_with_password
from tests.support.flows import FlowClient
from tests.support.logout import sign_out_in_the_browser
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient
from tests.support.processes import stop, wait_for_health
from tests.test_cli_process import identityctl
from tests.test_hosted_ui import REDIRECT_URI, Browser

PASSWORD = "correct horse battery"


@dataclass
class Upstream:
    """The other identityctl: where people have their accounts and passkeys."""

    url: str
    config_path: Path
    passkeys: PasskeyClient

    def cli(self, *args: str) -> dict[str, Any]:
        done = identityctl(*args, "--json", config=self.config_path)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def client_for(self, downstream: Service) -> dict[str, Any]:
        """The downstream registered here as a confidential web application."""
        return self.cli("app", "create", "--template", "Server", "--name",
                        f"Downstream {uuid.uuid4().hex[:6]}", "--redirect-uri",
                        downstream.url(federation.CALLBACK_PATH))

    def person(self, email: str) -> tuple[Any, SoftAuthenticator]:
        """A person with a confirmed address and a passkey here."""
        made = self.cli("user", "create", "--username", f"up-{uuid.uuid4().hex[:6]}",
                        "--email", email, "--email-verified")
        user = SimpleNamespace(id=made["id"], username=made["username"])
        authenticator = SoftAuthenticator()
        self.passkeys.enrolled(user, authenticator)  # type: ignore[arg-type]
        return user, authenticator


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    directory_ = tmp_path_factory.mktemp("upstream")
    port = free_port()
    in_process("init", "--dir", str(directory_), "--base-url", f"http://localhost:{port}",
               "--json")
    config_path = directory_ / "config.toml"
    log = directory_ / "serve.log"
    from tests.test_scale_out import _serve

    process = _serve(config_path, port, log)
    try:
        wait_for_health(f"http://127.0.0.1:{port}/health", process, log)
        passkeys = PasskeyClient.of_process(config_path, f"http://localhost:{port}")
        yield Upstream(url=passkeys.service.base_url, config_path=config_path,
                       passkeys=passkeys)
    finally:
        stop(process)


@pytest.fixture
def shop(service: Service) -> dict[str, Any]:
    document = catalog.applications.application_templates()["SPA"]
    document["inboundAuthConfig"][0]["config"]["redirectUris"] = [REDIRECT_URI]
    document.update(name="Shop", themeId=catalog.themes.list_themes()[0]["id"])
    return catalog.applications.create_application(document, origin=TEST_ORIGIN)[0]


def add_upstream(service: Service, upstream: Upstream, **extra: str) -> Any:
    client = upstream.client_for(service)
    return federation.add_provider(
        ServiceContext.for_config(service.config), kind="oidc", issuer=upstream.url,
        client_id=client["inboundAuthConfig"][0]["config"]["clientId"],
        client_secret=client["clientSecret"], handle="corp", name="Example Corp",
        origin=RequestOrigin(actor="test"), **extra)


class Person:
    """A browser whose authenticator holds the person's upstream passkey."""

    def __init__(self, browser: Any, service: Service, shop: dict[str, Any],
                 upstream: Upstream, name: str, *, email: str = "") -> None:
        self.email = email or f"{name}-{uuid.uuid4().hex[:6]}@example.com"
        self.upstream_user, authenticator = upstream.person(self.email)
        self.tab = PasskeyPage(browser)
        # The two deployments share the RP ID localhost: suggestions of the upstream's
        # passkey on the downstream page would be a wrong pick; the person presses buttons.
        self.tab.without_autofill()
        self.tab.add_passkey(authenticator.credentials[0])
        self.ui = Browser(service, shop, self.tab, name)
        self.page = self.tab.page

    def continue_with_provider(self) -> None:
        self.page.get_by_role("button", name="Continue with Example Corp").click()

    def sign_in_upstream(self) -> None:
        """On the upstream's own hosted page: the username, Continue, the passkey."""
        self.page.get_by_label("Username").fill(self.upstream_user.username)
        self.page.get_by_role("button", name="Continue", exact=True).click()

    def shot(self, name: str) -> None:
        self.tab.screenshot("federation", name)


@pytest.fixture
def people(browser: Any, service: Service, shop: dict[str, Any],
           upstream: Upstream) -> Iterator[Any]:
    made: list[Person] = []

    def person(name: str, **kwargs: str) -> Person:
        made.append(Person(browser, service, shop, upstream, name, **kwargs))
        return made[-1]

    yield person
    for each in made:
        each.tab.close()


def test_a_first_sign_in_makes_a_user_and_the_next_finds_the_same_one(
        service: Service, upstream: Upstream, people: Any) -> None:
    provider = add_upstream(service, upstream)
    ada = people("ada")
    ada.ui.authorize()
    ada.shot("continue-with")
    ada.continue_with_provider()
    ada.page.wait_for_url(upstream.url + "/**")
    ada.shot("upstream-sign-in")
    ada.sign_in_upstream()
    first = ada.ui.back_at_the_client()
    user = directory.require_user(first["sub"])
    assert user.attributes.get("email") == ada.email  # the provider confirmed it
    assert provider_store.linked_user(provider.id, ada.upstream_user.id) == user.id

    # Signed out here (both deployments are on localhost, so the upstream's session cookie
    # went too: the person signs in there again).
    sign_out_in_the_browser(ada.page, service)
    ada.ui.authorize()
    ada.continue_with_provider()
    ada.sign_in_upstream()
    again = ada.ui.back_at_the_client()
    assert again["sub"] == user.id


def _account_with_confirmed_address(address: str) -> Any:
    user = directory.create_user(username=f"lena-{uuid.uuid4().hex[:6]}", password=PASSWORD,
                                 attributes={"email": address}, origin=TEST_ORIGIN)
    recovery_store.mark_verified(user.id, address)
    return user


def test_an_existing_account_is_linked_only_after_its_owner_signs_in_and_says_so(
        service: Service, upstream: Upstream, people: Any) -> None:
    provider = add_upstream(service, upstream)
    address = f"lena-{uuid.uuid4().hex[:6]}@example.com"
    lena = _account_with_confirmed_address(address)
    person = people("lena", email=address)
    person.ui.authorize()
    person.continue_with_provider()
    person.sign_in_upstream()
    alert = person.page.get_by_role("alert").filter(has_text="already have an account")
    alert.wait_for()
    person.shot("link-required")
    sign_in_with_password(person.page, lena.username, PASSWORD)
    not_now(person.page)
    # Signed in, not linked yet: the page names both accounts and asks.
    question = person.page.locator("#notice").filter(
        has_text=f"Connect the Example Corp account {address} to your account "
                 f"{lena.username}?")
    question.wait_for()
    person.shot("link-confirm")
    assert provider_store.linked_user(provider.id, person.upstream_user.id) is None
    person.ui.click("Connect the accounts")
    assert person.ui.back_at_the_client()["sub"] == lena.id  # linked now
    assert provider_store.linked_user(provider.id, person.upstream_user.id) == lena.id

    sign_out_in_the_browser(person.page, service)
    person.ui.authorize()
    person.continue_with_provider()
    person.sign_in_upstream()
    assert person.ui.back_at_the_client()["sub"] == lena.id  # straight in


def test_a_parked_federated_sign_in_sent_to_someone_else_links_nothing_to_them(
        service: Service, upstream: Upstream, people: Any, shop: dict[str, Any],
        browser: Any) -> None:
    """The attacker's upstream account waits (federated_link_required) in his execution; he
    sends its sign-in link to the victim, who signs in there with her password."""
    provider = add_upstream(service, upstream)
    address = f"mallory-{uuid.uuid4().hex[:6]}@example.com"
    _account_with_confirmed_address(address)  # the attacker's own local account
    mallory = people("mallory", email=address)
    mallory.ui.authorize()
    mallory.continue_with_provider()
    mallory.sign_in_upstream()
    mallory.page.get_by_role("alert").filter(has_text="already have an account").wait_for()
    parked_link = mallory.page.url
    assert "executionId=" in parked_link

    victim = directory.create_user(username=f"vic-{uuid.uuid4().hex[:6]}", password=PASSWORD,
                                   origin=TEST_ORIGIN)
    tab = PasskeyPage(browser)  # her own browser: none of his cookies
    try:
        Browser(service, shop, tab, "victim")  # the shop's redirect URI answers in the tab
        tab.page.goto(parked_link)
        tab.page.get_by_role("button", name="Continue", exact=True).wait_for()
        # A fresh sign-in, not his execution: no waiting upstream account, no question.
        sign_in_with_password(tab.page, victim.username, PASSWORD)
        not_now(tab.page)
        tab.page.wait_for_url(REDIRECT_URI + "*")
    finally:
        tab.close()
    assert provider_store.linked_user(provider.id, mallory.upstream_user.id) is None
    assert not audit_store.events(event="federation.link", user_id=victim.id)


# --- refusals, each in plain words on the page ---------------------------------------------------


def _refused_on_the_page(person: Person, text: str, shot: str) -> None:
    alert = person.page.get_by_role("alert").filter(has_text=text)
    alert.wait_for()
    assert "federation_" not in alert.inner_text()
    person.shot(shot)
    assert person.page.get_by_role("button", name="Continue with Example Corp").is_visible()


def test_a_tampered_state_is_refused(service: Service, upstream: Upstream,
                                     people: Any) -> None:
    add_upstream(service, upstream)
    person = people("tampered")

    def tamper(route: Any) -> None:
        parts = urlsplit(route.request.url)
        query = {name: values[0] for name, values in parse_qs(parts.query).items()}
        if query.get("state", "").startswith("tampered"):
            route.continue_()
            return
        query["state"] = "tampered" + query.get("state", "")[8:]
        route.fulfill(status=302, headers={
            "Location": f"{parts.scheme}://{parts.netloc}{parts.path}?{urlencode(query)}"})

    person.page.route(service.url(federation.CALLBACK_PATH) + "*", tamper)
    person.ui.authorize()
    person.continue_with_provider()
    person.sign_in_upstream()
    _refused_on_the_page(person, "not for this sign-in", "tampered-state")


def test_a_replayed_callback_signs_nobody_in(service: Service, upstream: Upstream,
                                            people: Any) -> None:
    add_upstream(service, upstream)
    person = people("replay")
    callbacks: list[str] = []
    person.page.on("request", lambda request: callbacks.append(request.url)
                   if request.url.startswith(service.url(federation.CALLBACK_PATH)) else None)
    person.ui.authorize()
    person.continue_with_provider()
    person.sign_in_upstream()
    person.ui.back_at_the_client()
    person.page.goto(callbacks[0])  # the provider's answer, again
    person.page.get_by_role("alert").filter(has_text="Start again").wait_for()
    person.shot("replayed-callback")
    assert not person.page.url.startswith(REDIRECT_URI)


def test_a_wrong_nonce_is_refused(service: Service, upstream: Upstream, people: Any) -> None:
    add_upstream(service, upstream)
    person = people("nonce")

    def other_nonce(route: Any) -> None:
        parts = urlsplit(route.request.url)
        query = {name: values[0] for name, values in parse_qs(parts.query).items()}
        if "nonce" in query and not query["nonce"].startswith("other"):
            query["nonce"] = "other" + query["nonce"]
            route.continue_(url=f"{parts.scheme}://{parts.netloc}{parts.path}?"
                                f"{urlencode(query)}")
            return
        route.continue_()

    person.page.route(upstream.url + "/oauth2/authorize*", other_nonce)
    person.ui.authorize()
    person.continue_with_provider()
    person.sign_in_upstream()
    _refused_on_the_page(person, "could not be trusted", "wrong-nonce")


def send_json(handler: BaseHTTPRequestHandler, status: int, document: Any) -> None:
    """A stand-in's JSON answer."""
    body = json.dumps(document).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class ResigningProxy(BaseHTTPRequestHandler):
    """Between us and the upstream: its discovery document with the token endpoint pointed
    here, and its tokens with the ID token signed again by a key of our own."""

    upstream = ""
    key = ec.generate_private_key(ec.SECP256R1())

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        document = requests.get(self.upstream + "/.well-known/openid-configuration",
                                timeout=30).json()
        document["token_endpoint"] = f"http://127.0.0.1:{self.server.server_address[1]}/token"
        send_json(self, 200, document)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        answer = requests.post(self.upstream + "/oauth2/token", data=body, timeout=30, headers={
            "Content-Type": self.headers["Content-Type"],
            "Authorization": self.headers.get("Authorization", "")})
        tokens = answer.json()
        if "id_token" in tokens:
            header = jwt.get_unverified_header(tokens["id_token"])
            claims = jwt.decode(tokens["id_token"], options={"verify_signature": False})
            tokens["id_token"] = jwt.encode(claims, self.key, algorithm="ES256",
                                            headers={"kid": header["kid"]})
        send_json(self, answer.status_code, tokens)


def test_an_id_token_signed_by_another_key_is_refused(service: Service, upstream: Upstream,
                                                      people: Any) -> None:
    ResigningProxy.upstream = upstream.url
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), ResigningProxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        add_upstream(service, upstream, discovery_url=f"http://127.0.0.1:"
                     f"{proxy.server_address[1]}/.well-known/openid-configuration")
        person = people("other-key")
        person.ui.authorize()
        person.continue_with_provider()
        person.sign_in_upstream()
        _refused_on_the_page(person, "could not be trusted", "another-key")
    finally:
        proxy.shutdown()


# --- GitHub -----------------------------------------------------------------------------------


class GitHubStandIn(BaseHTTPRequestHandler):
    """GitHub's documented OAuth and REST endpoints, answering for one person: the
    authorize page approves at once; the primary address is verified, another is not."""

    issued: dict[str, str] = {}

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        query = {name: values[0] for name, values in parse_qs(parts.query).items()}
        if parts.path == "/login/oauth/authorize":
            code = uuid.uuid4().hex
            GitHubStandIn.issued[code] = query["code_challenge"]
            self.send_response(302)
            self.send_header("Location", f"{query['redirect_uri']}?"
                             f"{urlencode({'code': code, 'state': query['state']})}")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif parts.path == "/api/user":
            assert self.headers["Authorization"] == "Bearer gho_token"
            send_json(self, 200, {"id": 583231, "login": "octocat", "name": "Mona Octocat",
                                  "avatar_url": "https://avatars.example/u/583231"})
        elif parts.path == "/api/user/emails":
            send_json(self, 200, [
                {"email": "octo-old@example.com", "primary": False, "verified": False},
                {"email": "mona@example.com", "primary": True, "verified": True}])
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        assert self.headers["Accept"] == "application/json"
        assert form["client_secret"] == ["gh-secret"] and form["code"][0] in self.issued
        send_json(self, 200, {"access_token": "gho_token", "token_type": "bearer",
                              "scope": "read:user,user:email"})


def test_github_maps_its_numeric_id_and_verified_primary_address(service: Service) -> None:
    stand_in = ThreadingHTTPServer(("127.0.0.1", 0), GitHubStandIn)
    threading.Thread(target=stand_in.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{stand_in.server_address[1]}"
    try:
        provider = federation.add_provider(
            ServiceContext.for_config(service.config), kind="github", client_id="gh-client",
            client_secret="gh-secret", web_url=base, api_url=f"{base}/api",
                                           origin=RequestOrigin(actor="test"))
        flows = FlowClient(service, catalog.applications.create_application({
            **catalog.applications.application_templates()["SPA"], "name": "GitHub shop",
            "themeId": catalog.themes.list_themes()[0]["id"]}, origin=TEST_ORIGIN)[0]["id"])
        step = flows.start()
        assert json.loads(step["data"]["additionalData"]["identityProviders"]) == [
            {"id": provider.id, "name": "GitHub", "kind": "github"}]
        away = flows.act("federated", idpId=provider.id)
        assert away["type"] == "REDIRECTION"
        assert away["data"]["redirectURL"].startswith(f"{base}/login/oauth/authorize?")
        back = requests.get(away["data"]["redirectURL"], allow_redirects=False, timeout=30)
        answer = {name: values[0] for name, values in
                  parse_qs(urlsplit(back.headers["Location"]).query).items()}
        done = flows.act("callback", **answer)
        assert done["flowStatus"] == "COMPLETE", done
        user = directory.require_user(jwt.decode(done["assertion"],
                                                 options={"verify_signature": False})["sub"])
        assert user.username == "octocat"
        assert user.attributes == {"email": "mona@example.com", "given_name": "Mona",
                                   "family_name": "Octocat"}
        assert provider_store.linked_user(provider.id, "583231") == user.id
        # The same answer again: the execution is past it.
        replay = flows.call({"executionId": flows.execution_id, "action": "callback",
                             "inputs": answer})
        assert replay.status_code == 400
    finally:
        stand_in.shutdown()


def test_provider_secrets_are_never_shown(service: Service, upstream: Upstream) -> None:
    add_upstream(service, upstream)
    listed = identityctl("idp", "list", "--json", config=service.config_path)
    assert listed.returncode == 0, listed.stderr
    [shown] = json.loads(listed.stdout)
    assert "clientSecret" not in shown and "client_secret" not in json.dumps(shown)
    secret = provider_store.require_provider("corp").client_secret
    assert secret not in listed.stdout
