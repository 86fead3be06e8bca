"""The "passkeys only" rule (an application's ``passkeysOnly``, or a person's organization
unit) where a password sign-in could stand in for a passkey, over HTTP: a device's approval,
a recovery started for a passkeys-only application, and what password sign-ins made before
the rule was switched on (refresh tokens, the browser's session). A passkey's sign-in is
never touched by the rule.

The rule itself (the password step refused, the account page's password and authenticator
app) is specified in tests/test_totp.py."""

from __future__ import annotations

import dataclasses
import secrets
import uuid
from typing import Any

import pytest

from identityctl.oauth.pkce import s256_challenge
from identityctl.services import catalog
from identityctl.services.accounts import signin
from identityctl.services.accounts.account import ACCOUNT_CLIENT_ID
from identityctl.services.accounts.sessions import COOKIE as SESSION_COOKIE
from identityctl.services.context import ServiceContext
from identityctl.services.directory import users as directory
from identityctl.store import directory as directory_store
from identityctl.store.directory import UserRecord
from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator
from tests.support.flows import FlowClient
from tests.support.oauth import (
    Authorization,
    OAuthDriver,
    RegisteredClient,
    assert_oauth_error,
    query_of,
    register_client,
)
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient, assert_error
from tests.support.smtp import SmtpServer
from tests.test_consent import self_registered
from tests.test_device_grant import GRANT, poll, start_device
from tests.test_flow_execution import PASSWORD, make_application
from tests.test_recovery import mailed_code, new_person
from tests.test_token_exchange import NOTES, agent, exchange, resources  # noqa: F401

ACCOUNT_SCOPE = "openid profile email account"


def client_of(application: dict[str, Any]) -> RegisteredClient:
    """The OAuth client of an application made by ``make_application`` (a public SPA)."""
    return RegisteredClient(
        application_id=application["id"], redirect_uri="https://app.example/cb", secret=None,
        client_id=catalog.applications.oauth_config(application)["clientId"],
        auth_method="none")


def account_client(service: Service) -> RegisteredClient:
    return RegisteredClient(application_id=catalog.applications.require_application(
        ACCOUNT_CLIENT_ID)["id"], client_id=ACCOUNT_CLIENT_ID, secret=None,
        redirect_uri=service.url("/account"), auth_method="none")


def passkeys_only_from_now_on(application_id: str) -> None:
    """What ``identityctl app update --passkeys-only`` does."""
    application = catalog.applications.get_application(application_id)
    catalog.applications.update_application({**application, "passkeysOnly": True},
                                            origin=TEST_ORIGIN)


def into_a_passkeys_only_unit(person: UserRecord) -> None:
    """What ``identityctl user update --ou`` does, to a unit that allows passkeys only."""
    unit = directory.create_ou(handle=f"strict-{uuid.uuid4().hex[:6]}", name="Strict",
                               passkeys_only=True, origin=TEST_ORIGIN)
    directory.update_user(person.id, ou=unit["handle"], origin=TEST_ORIGIN)


@dataclasses.dataclass
class SignedIn:
    """What a sign-in through an application's own flow left: its tokens, and the browser's
    session cookie."""

    tokens: dict[str, Any]
    session: str


def password_sign_in(service: Service, client: RegisteredClient, person: UserRecord, *,
                     scope: str = "openid") -> SignedIn:
    """``person`` signs in with their password on the application's own sign-in page, for
    an authorization request of ``client``; the client redeems the code."""
    oauth, verifier = OAuthDriver(service), secrets.token_urlsafe(48)
    link = oauth.gate_link(client, scope=scope, code_challenge=s256_challenge(verifier),
                           code_challenge_method="S256")
    flows = FlowClient(service, client.application_id)
    flows.start()
    done = flows.act("password", username=person.username, password=PASSWORD)
    assert done["flowStatus"] == "COMPLETE", done
    answered = oauth.callback(link["authId"], done["assertion"])
    assert answered.status_code == 200, answered.text
    cookie = answered.headers["Set-Cookie"].split(";")[0].partition("=")[2]
    code = query_of(answered.json()["redirect_uri"])["code"]
    tokens = oauth.tokens(Authorization(client=client, user=person, code=code, state="",
                                        nonce="", verifier=verifier))
    return SignedIn(tokens=tokens, session=cookie)


def recovering_by_e_mail_for(service: Service, smtp: SmtpServer, application: dict[str, Any],
                             person: UserRecord) -> tuple[str, FlowClient, dict[str, Any]]:
    """An authorization request of ``application``, and ``person`` recovering for it by the
    e-mail code (the step after the code): the request's id, the flow and that step."""
    pending = OAuthDriver(service).gate_link(
        client_of(application), code_challenge=s256_challenge("v" * 43),
        code_challenge_method="S256")["authId"]
    flows = FlowClient(service, application["id"])
    flows.start("RECOVERY")
    flows.act("email_code", username=person.username)
    return pending, flows, flows.act("check_code",
                                     otp=mailed_code(smtp, person.attributes["email"]))


def with_a_passkey(service: Service, person: UserRecord) -> SoftAuthenticator:
    authenticator = SoftAuthenticator()
    PasskeyClient(service).enrolled(person, authenticator)
    return authenticator


def account_call(service: Service, token: str, method: str, path: str,
                 body: Any = None) -> Any:
    return service.http.request(method, service.url("/account/api" + path), json=body,
                                timeout=30, headers={"Authorization": f"Bearer {token}"})


# --- a device's approval ----------------------------------------------------------------------


def test_a_password_sign_in_cannot_approve_a_device_of_a_passkeys_only_application(
        service: Service) -> None:
    device = register_client("SPA", grantTypes=[GRANT, "refresh_token"],
                             scopes=["openid", "profile"])
    passkeys_only_from_now_on(device.application_id)
    started = start_device(service, device).json()
    bob = new_person()
    by_password = password_sign_in(service, account_client(service), bob, scope=ACCOUNT_SCOPE)
    allow = {"userCode": started["user_code"], "decision": "allow"}

    refused = account_call(service, by_password.tokens["access_token"], "POST", "/device",
                           allow)
    assert_error(refused, 403, "passwords_not_allowed")
    # Nothing was answered: the device still waits, and Bob may approve with his passkey.
    assert_oauth_error(poll(service, device, started["device_code"]), 400,
                       "authorization_pending")
    oauth = OAuthDriver(service)
    by_passkey = oauth.tokens(oauth.authorization(
        account_client(service), person=(bob, with_a_passkey(service, bob)),
        scope=ACCOUNT_SCOPE))
    approved = account_call(service, by_passkey["access_token"], "POST", "/device", allow)
    assert approved.status_code == 200 and approved.json() == {"approved": True}, approved.text
    issued = poll(service, device, started["device_code"])
    assert issued.status_code == 200, issued.text
    assert "passkey" in oauth.verified(issued.json()["id_token"],
                                       audience=device.client_id)["amr"]


def test_a_password_sign_in_cannot_approve_a_device_for_a_person_of_a_passkeys_only_unit(
        service: Service) -> None:
    device = register_client("SPA", grantTypes=[GRANT], scopes=["openid", "profile"])
    started = start_device(service, device).json()
    bob = new_person()
    by_password = password_sign_in(service, account_client(service), bob, scope=ACCOUNT_SCOPE)
    into_a_passkeys_only_unit(bob)
    assert_error(account_call(service, by_password.tokens["access_token"], "POST", "/device",
                              {"userCode": started["user_code"], "decision": "allow"}),
                 403, "passwords_not_allowed")


# --- recovery -------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["application", "unit"])
def test_a_recovery_where_passkeys_only_hold_offers_only_a_new_passkey(
        mailing: Service, smtp: SmtpServer, where: str) -> None:
    strict = make_application(passkeysOnly=where == "application")
    person = new_person()
    if where == "unit":
        into_a_passkeys_only_unit(person)
    address = person.attributes["email"]
    oauth = OAuthDriver(mailing)
    pending, flows, step = recovering_by_e_mail_for(mailing, smtp, strict, person)
    assert [action["ref"] for action in step["data"]["actions"]] == ["passkey_register"]
    # Taken anyway, the way to a password ends where the password would be set.
    flows.act("use_password")
    step = flows.act("set_password", password="a brand new passphrase")
    assert step["flowStatus"] == "INCOMPLETE"
    assert step["failureReason"] == "passwords_not_allowed"
    assert directory_store.get_user(person.id).password_hash == person.password_hash

    flows = FlowClient(mailing, strict["id"])
    flows.start("RECOVERY")
    flows.act("email_code", username=person.username)
    flows.act("check_code", otp=mailed_code(smtp, address, 2))
    done = flows.create_passkey()
    assert done["flowStatus"] == "COMPLETE", done
    answered = oauth.callback(pending, done["assertion"])
    assert answered.status_code == 200, answered.text
    assert answered.json()["redirect_uri"].startswith("https://app.example/cb?code=")


def test_the_callback_refuses_a_password_sign_in_for_an_application_now_passkeys_only(
        mailing: Service, smtp: SmtpServer) -> None:
    app = make_application()
    pending, flows, _ = recovering_by_e_mail_for(mailing, smtp, app, new_person())
    flows.act("use_password")
    done = flows.act("set_password", password="a brand new passphrase")
    assert done["flowStatus"] == "COMPLETE", done

    passkeys_only_from_now_on(app["id"])  # between the flow's end and its hand-off
    assert_error(OAuthDriver(mailing).callback(pending, done["assertion"]), 403,
                 "passwords_not_allowed")


# --- what password sign-ins made before the rule ----------------------------------------------


def test_switching_an_application_to_passkeys_only_ends_its_password_grants_and_sessions(
        service: Service) -> None:
    app = make_application()
    client = client_of(app)
    person = new_person()
    by_password = password_sign_in(service, client, person)
    oauth = OAuthDriver(service)
    refreshed = oauth.refresh(client, by_password.tokens["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text
    by_passkey = oauth.tokens(oauth.authorization(client))

    passkeys_only_from_now_on(app["id"])
    assert_oauth_error(oauth.refresh(client, refreshed.json()["refresh_token"]), 400,
                       "invalid_grant", "passwords_not_allowed")
    assert oauth.refresh(client, by_passkey["refresh_token"]).status_code == 200
    # The browser's session of the password sign-in answers no longer: a new sign-in.
    silent = oauth.authorize(client, session=by_password.session, prompt="none",
                             code_challenge=s256_challenge("v" * 43),
                             code_challenge_method="S256")
    assert query_of(silent.headers["Location"])["error"] == "login_required"
    asked = oauth.gate_link(client, code_challenge=s256_challenge("v" * 43),
                            code_challenge_method="S256", session=by_password.session)
    resumed = service.post("/oauth2/auth/callback", {"authId": asked["authId"],
                                                     "resume": "session"},
                           headers={"Cookie": f"{SESSION_COOKIE}={by_password.session}"})
    assert_error(resumed, 403, "passwords_not_allowed")


def test_moving_a_person_into_a_passkeys_only_unit_ends_their_password_grants_and_sessions(
        service: Service) -> None:
    client = client_of(make_application())
    person = new_person()
    by_password = password_sign_in(service, client, person)
    oauth = OAuthDriver(service)
    pkce = {"code_challenge": s256_challenge("v" * 43), "code_challenge_method": "S256"}
    silent = oauth.authorize(client, session=by_password.session, prompt="none", **pkce)
    assert "code" in query_of(silent.headers["Location"]), silent.headers["Location"]

    into_a_passkeys_only_unit(person)
    assert_oauth_error(oauth.refresh(client, by_password.tokens["refresh_token"]), 400,
                       "invalid_grant", "passwords_not_allowed")
    silent = oauth.authorize(client, session=by_password.session, prompt="none", **pkce)
    assert query_of(silent.headers["Location"])["error"] == "login_required"


def handed_off_by_password(service: Service, client: RegisteredClient, person: UserRecord,
                           **params: str) -> tuple[str, dict[str, Any]]:
    """``person`` signed in by password (an assertion with ``amr: ["pwd"]``, as a flow's
    password step gives) handed to an authorization request of ``client``: the request's
    id and the callback's answer."""
    link = OAuthDriver(service).gate_link(client, code_challenge=s256_challenge("v" * 43),
                                          code_challenge_method="S256", **params)
    assertion = signin.issue_assertion(ServiceContext.for_config(service.config), person,
                                       ["pwd"])
    answered = OAuthDriver(service).callback(link["authId"], assertion)
    assert answered.status_code == 200, answered.text
    return link["authId"], answered.json()


def test_a_consent_left_open_while_the_application_turns_passkeys_only_gives_no_code(
        open_registration: Service) -> None:
    client, person = self_registered(open_registration), new_person()
    auth_id, asked = handed_off_by_password(open_registration, client, person)
    assert "consentToken" in asked, asked  # the question waits for the person

    passkeys_only_from_now_on(client.application_id)
    answered = OAuthDriver(open_registration).consent(auth_id, asked["consentToken"], "allow")
    assert_error(answered, 403, "passwords_not_allowed")


def test_a_password_sign_ins_token_is_not_exchanged_by_a_passkeys_only_application(
        service: Service, resources: None) -> None:  # noqa: F811
    ordinary = agent()
    person = new_person()
    _, answered = handed_off_by_password(service, ordinary, person, scope="openid notes:read",
                                         resource=NOTES)
    code = query_of(answered["redirect_uri"])["code"]
    token = OAuthDriver(service).tokens(Authorization(
        client=ordinary, user=person, code=code, state="", nonce="", verifier="v" * 43))
    strict = agent(subjectAudiences=[NOTES])
    passkeys_only_from_now_on(strict.application_id)
    assert_oauth_error(exchange(service, strict, token["access_token"], scope="notes:read"),
                       400, "invalid_grant", "passwords_not_allowed")


# --- the unit's rule, in the store -----------------------------------------------------------


def test_a_units_rule_is_read_in_one_statement_however_deep_and_a_loop_ends_the_walk(
        store_url: str) -> None:
    from tests.test_store import make_user

    person = make_user()
    assert directory_store.passkeys_only_unit(person.id) is False
    above = person.ou_id
    for depth in range(5):
        above_it = directory_store.create_ou(handle=f"up-{depth}", name=f"Up {depth}")
        directory_store.update_ou(above, parent=above_it["id"])
        above = above_it["id"]
    assert directory_store.passkeys_only_unit(person.id) is False
    directory_store.update_ou(above, passkeys_only=True)  # five units above the person's
    assert directory_store.passkeys_only_unit(person.id) is True
    directory_store.update_ou(above, passkeys_only=False, parent=person.ou_id)  # a loop
    assert directory_store.passkeys_only_unit(person.id) is False
    assert directory_store.passkeys_only_unit("no-such-user") is False
