"""What the OAuth tests share: registering clients and driving the code flow over HTTP.

No tests here; the specifications live in the tests/test_oauth_*.py files. The user's
sign-in is a real passkey ceremony on the atomic API (software authenticator): its assertion
is the same proof the hosted UI hands back after a flow, so these tests do not depend on
any particular flow definition.
"""

from __future__ import annotations

import base64
import secrets
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import requests

from identityctl.oauth.pkce import s256_challenge
from identityctl.services import catalog
from identityctl.services.accounts.sessions import COOKIE as SESSION_COOKIE
from identityctl.services.directory import roles as roles_service
from identityctl.services.origin import RequestOrigin
from identityctl.store.directory import UserRecord
from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient

REDIRECT_URI = "https://app.example/callback"


@dataclass(frozen=True)
class RegisteredClient:
    application_id: str
    client_id: str
    secret: str | None
    redirect_uri: str
    auth_method: str


def register_client(template: str = "SPA", *, redirect_uri: str = REDIRECT_URI,
                    **config: Any) -> RegisteredClient:
    """An application made from ``template`` with ``config`` merged into its oauth2 config."""
    document = catalog.applications.application_templates()[template]
    document["name"] = f"{template} app {uuid.uuid4().hex[:8]}"
    document.pop("themeId", None)
    oauth = document["inboundAuthConfig"][0]["config"]
    if "authorization_code" in oauth["grantTypes"]:
        oauth["redirectUris"] = [redirect_uri]
    oauth.update(config)
    application, secret = catalog.applications.create_application(document, origin=TEST_ORIGIN)
    settings = catalog.applications.oauth_config(application)
    return RegisteredClient(application_id=application["id"], client_id=settings["clientId"],
                            secret=secret, redirect_uri=redirect_uri,
                            auth_method=settings["tokenEndpointAuthMethod"])


def query_of(url: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}


def basic_auth(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


@dataclass
class Authorization:
    """One run of the code flow up to the code: what the client keeps and what it got."""

    client: RegisteredClient
    user: UserRecord
    code: str
    state: str
    nonce: str
    verifier: str | None


@dataclass
class OAuthDriver:
    """A relying party and its user's browser, talking to one running service."""

    service: Service
    passkeys: PasskeyClient = field(init=False)

    def __post_init__(self) -> None:
        self.passkeys = PasskeyClient(self.service)

    # --- front channel --------------------------------------------------------------------

    def authorize(self, client: RegisteredClient, *, session: str | None = None,
                  **params: Any) -> requests.Response:
        """GET /oauth2/authorize (not following the redirect), with the browser's ``session``
        cookie when given; None values are left out."""
        query = {"response_type": "code", "client_id": client.client_id,
                 "redirect_uri": client.redirect_uri, "scope": "openid", **params}
        return self.service.get("/oauth2/authorize", allow_redirects=False,
                                params={k: v for k, v in query.items() if v is not None},
                                headers={"Cookie": f"{SESSION_COOKIE}={session}"}
                                if session else {})

    def session_sign_in(self, client: RegisteredClient, *,
                        roles: tuple[str, ...] = ()) -> tuple[UserRecord, str, dict[str, str]]:
        """A new user signs in for ``client`` in a browser: the user, the session cookie's
        value (the Secure cookie a real browser keeps on localhost; requests would not),
        and what the client's redirect URI got."""
        link = self.gate_link(client, code_challenge=s256_challenge("v" * 43),
                              code_challenge_method="S256")
        user, assertion = self.signed_in_user(roles)
        answered = self.callback(link["authId"], assertion)
        assert answered.status_code == 200, answered.text
        cookie = answered.headers["Set-Cookie"].split(";")[0]
        name, _, value = cookie.partition("=")
        assert name == SESSION_COOKIE
        return user, value, query_of(answered.json()["redirect_uri"])

    def gate_link(self, client: RegisteredClient, **params: Any) -> dict[str, str]:
        """The hosted UI link authorize answers: its query (authId, applicationId, ...)."""
        response = self.authorize(client, **params)
        assert response.status_code == 302, response.text
        location = response.headers["Location"]
        assert location.startswith(self.service.config.gate_url + "/signin?"), location
        return query_of(location)

    def signed_in_user(self, roles: tuple[str, ...] = ()) -> tuple[UserRecord, str]:
        """A new user (holding ``roles``) who just signed in with a passkey, and the sign-in
        assertion."""
        user = self.passkeys.new_user(email=f"ada-{uuid.uuid4().hex[:8]}@example.com",
                                      given_name="Ada", family_name="Lovelace")
        for role in roles:
            roles_service.grant_role(user.id, role, origin=RequestOrigin(actor="test"))
        authenticator = SoftAuthenticator()
        self.passkeys.enrolled(user, authenticator)
        finished = self.passkeys.sign_in(authenticator, user.id)
        assert finished.status_code == 200, finished.text
        return user, finished.json()["assertion"]

    def callback(self, auth_id: str, assertion: str) -> requests.Response:
        return self.service.post("/oauth2/auth/callback",
                                 {"authId": auth_id, "assertion": assertion})

    def handed_back(self, auth_id: str, assertion: str) -> str:
        """The hosted UI hands the signed-in person back (allowing what a client that
        registered or described itself asks for): the URL the redirect URI gets."""
        answered = self.callback(auth_id, assertion)
        assert answered.status_code == 200, answered.text
        if "consent" in answered.json():
            answered = self.consent(auth_id, answered.json()["consentToken"])
            assert answered.status_code == 200, answered.text
        return answered.json()["redirect_uri"]

    def consent(self, auth_id: str, consent_token: str,
                decision: str = "allow") -> requests.Response:
        return self.service.post("/oauth2/auth/consent", {
            "authId": auth_id, "consentToken": consent_token, "decision": decision})

    def authorization(self, client: RegisteredClient, *, pkce: bool = True,
                      roles: tuple[str, ...] = (),
                      person: tuple[UserRecord, SoftAuthenticator] | None = None,
                      **params: Any) -> Authorization:
        """authorize -> sign in -> callback: the code, as the client's redirect URI gets it.
        A new user signs in (holding ``roles``), or ``person`` with their passkey."""
        verifier = secrets.token_urlsafe(48) if pkce else None
        state, nonce = secrets.token_urlsafe(8), secrets.token_urlsafe(8)
        if verifier:
            params = {"code_challenge": s256_challenge(verifier),
                      "code_challenge_method": "S256", **params}
        link = self.gate_link(client, state=state, nonce=nonce, **params)
        if person is None:
            user, assertion = self.signed_in_user(roles)
        else:
            user, authenticator = person
            finished = self.passkeys.sign_in(authenticator, user.id)
            assert finished.status_code == 200, finished.text
            assertion = finished.json()["assertion"]
        redirect = self.handed_back(link["authId"], assertion)
        assert redirect.startswith(client.redirect_uri + "?"), redirect
        back = query_of(redirect)
        assert back["state"] == state
        assert back["iss"] == self.service.config.issuer
        return Authorization(client=client, user=user, code=back["code"], state=state,
                             nonce=nonce, verifier=verifier)

    # --- back channel ---------------------------------------------------------------------

    def client_post(self, path: str, client: RegisteredClient,
                    form: dict[str, Any]) -> requests.Response:
        """A form POST authenticated as ``client`` registered to authenticate."""
        headers = {}
        form = {k: v for k, v in form.items() if v is not None}
        if client.auth_method == "client_secret_basic":
            headers["Authorization"] = basic_auth(client.client_id, client.secret or "")
        elif client.auth_method == "client_secret_post":
            form.update(client_id=client.client_id, client_secret=client.secret)
        else:
            form["client_id"] = client.client_id
        return self.service.http.post(self.service.url(path), data=form, headers=headers,
                                      timeout=30)

    def exchange(self, authorization: Authorization, **overrides: Any) -> requests.Response:
        form = {"grant_type": "authorization_code", "code": authorization.code,
                "redirect_uri": authorization.client.redirect_uri,
                "code_verifier": authorization.verifier, **overrides}
        return self.client_post("/oauth2/token", authorization.client, form)

    def tokens(self, authorization: Authorization) -> dict[str, Any]:
        exchanged = self.exchange(authorization)
        assert exchanged.status_code == 200, exchanged.text
        return exchanged.json()

    def refresh(self, client: RegisteredClient, refresh_token: str,
                **overrides: Any) -> requests.Response:
        return self.client_post("/oauth2/token", client, {
            "grant_type": "refresh_token", "refresh_token": refresh_token, **overrides})

    def userinfo(self, access_token: str) -> requests.Response:
        return self.service.get("/oauth2/userinfo",
                                headers={"Authorization": f"Bearer {access_token}"})

    def verified(self, token: str, *, audience: str) -> dict[str, Any]:
        """The claims of ``token`` checked with the published JWKS, as a relying party would."""
        jwks = jwt.PyJWKSet.from_dict(self.service.get("/oauth2/jwks").json())
        kid = jwt.get_unverified_header(token)["kid"]
        key = next(k for k in jwks.keys if k.key_id == kid)
        return jwt.decode(token, key.key, algorithms=[key.algorithm_name], audience=audience,
                          issuer=self.service.config.issuer)


def assert_oauth_error(response: requests.Response, status: int, error: str,
                       code: str | None = None) -> dict[str, Any]:
    """RFC 6749 §5.2 fields and our error shape, both, with ``status``."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"code", "message", "description", "error", "error_description"}, body
    assert body["error"] == error, body
    assert body["error_description"] == body["description"]
    if code is not None:
        assert body["code"] == code, body
    assert response.headers["Cache-Control"] == "no-store"
    return body
