"""Who may enrol a passkey, and that disabled or locked users get nowhere.

The reference system let anyone who knew a userId enrol their own authenticator on that
account. Here /register/passkey/* needs the assertion of a fresh sign-in of that same user
or an admin token.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from identityctl.security.tokens import ACCESS_TOKEN_TYP, ASSERTION_TYP
from identityctl.services.directory import users as directory
from identityctl.services.tokens import TokenService
from identityctl.store import passkeys as passkey_store
from identityctl.store.directory import UserRecord
from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient, assert_error


@pytest.fixture
def client(service: Service) -> PasskeyClient:
    return PasskeyClient(service)


def _signed_in(client: PasskeyClient, user: UserRecord,
               authenticator: SoftAuthenticator) -> str:
    """The assertion of a passkey sign-in of ``user``."""
    signed_in = client.sign_in(authenticator, user.id)
    assert signed_in.status_code == 200, signed_in.text
    return signed_in.json()["assertion"]


def _token(client: PasskeyClient, claims: dict[str, Any], typ: str) -> str:
    issuer = client.service.config.issuer
    return TokenService(issuer).sign({"aud": issuer, **claims}, typ=typ, ttl=300)


def test_enrolment_without_a_token_is_refused(client: PasskeyClient) -> None:
    victim = client.new_user()
    started = client.register_start(victim.id, token=None)
    assert_error(started, 401, "authentication_required")
    assert started.headers["WWW-Authenticate"].startswith("Bearer")

    options, session_token = client.begin_registration(victim)
    attacker_key = SoftAuthenticator()
    finished = client.register_finish(attacker_key.create(options, origin=client.origin),
                                      session_token, token=None)
    assert_error(finished, 401, "authentication_required")
    assert passkey_store.list_credentials(victim.id) == []


def test_the_assertion_of_another_user_cannot_enrol_on_a_victims_account(
        client: PasskeyClient) -> None:
    """The takeover the reference system shipped: knowing a userId must not be enough."""
    victim, attacker = client.new_user(), client.new_user()
    attacker_key = SoftAuthenticator()
    client.enrolled(attacker, attacker_key)
    attacker_assertion = _signed_in(client, attacker, attacker_key)

    assert_error(client.register_start(victim.id, token=attacker_assertion), 403,
                 "token_for_another_user")
    # Nor by finishing a ceremony someone else started for the victim.
    options, session_token = client.begin_registration(victim)
    stolen = client.register_finish(attacker_key.create(options, origin=client.origin),
                                    session_token, token=attacker_assertion)
    assert_error(stolen, 403, "token_for_another_user")
    assert passkey_store.list_credentials(victim.id) == []


def test_a_fresh_sign_in_lets_users_add_their_own_second_passkey(client: PasskeyClient) -> None:
    user, laptop, phone = client.new_user(), SoftAuthenticator(), SoftAuthenticator()
    client.enrolled(user, laptop)
    assertion = _signed_in(client, user, laptop)

    started = client.register_start(user.id, token=assertion)
    assert started.status_code == 200, started.text
    body = started.json()
    finished = client.register_finish(
        phone.create(body["publicKeyCredentialCreationOptions"], origin=client.origin),
        body["sessionToken"], token=assertion)

    assert finished.status_code == 201, finished.text
    assert len(passkey_store.list_credentials(user.id)) == 2


def test_an_old_sign_in_must_be_repeated(client: PasskeyClient) -> None:
    user = client.new_user()
    window = client.service.config.passkey.enrolment_window
    stale = _token(client, {"sub": user.id, "amr": ["passkey"],
                            "auth_time": int(time.time()) - window - 60}, ASSERTION_TYP)
    assert_error(client.register_start(user.id, token=stale), 401, "sign_in_too_old")


@pytest.mark.parametrize(("make_token", "status", "code"), [
    (lambda c: "not-a-jwt", 401, "invalid_token"),
    (lambda c: _token(c, {"sub": "admin", "scope": "openid profile"}, ACCESS_TOKEN_TYP),
     403, "insufficient_scope"),
    (lambda c: _token(c, {"sub": "admin", "scope": "system", "aud": "https://elsewhere"},
                      ACCESS_TOKEN_TYP), 401, "invalid_token"),
    # An ID token or any other kind of JWT never passes for an assertion.
    (lambda c: _token(c, {"sub": "admin", "scope": "system"}, "JWT"), 401, "invalid_token"),
], ids=["garbage", "no-system-scope", "other-audience", "id-token"])
def test_tokens_that_do_not_grant_enrolment(client: PasskeyClient,
                                            make_token: Callable[[PasskeyClient], str],
                                            status: int, code: str) -> None:
    assert_error(client.register_start(client.new_user().id, token=make_token(client)),
                 status, code)


def test_an_admin_token_minted_by_the_cli_enrols_for_any_user(
        client: PasskeyClient, cli: Callable[..., Any]) -> None:
    minted = cli("token", "--scope", "system", "--ttl", "120")
    assert minted.exit_code == 0, minted.output
    user = client.new_user()
    started = client.register_start(user.id, token=minted.output.strip())
    assert started.status_code == 200, started.text


# --- disabled and locked users ------------------------------------------------------------

@pytest.mark.parametrize("status", ["disabled", "locked"])
def test_unusable_accounts_are_refused_on_every_passkey_path(client: PasskeyClient,
                                                            status: str) -> None:
    user, authenticator = client.new_user(), SoftAuthenticator()
    client.enrolled(user, authenticator)
    registration = client.begin_registration(user)
    with_user_id = client.begin_sign_in(user.id)
    usernameless = client.begin_sign_in()

    directory.set_status(user.id, status, origin=TEST_ORIGIN)

    assert_error(client.register_start(user.id), 403, "account_unavailable")
    assert_error(client.auth_start(user.id), 403, "account_unavailable")
    options, session_token = registration
    assert_error(client.register_finish(authenticator.create(options, origin=client.origin),
                                        session_token), 403, "account_unavailable")
    registered = authenticator.credentials[0].credential_id
    for options, session_token in (with_user_id, usernameless):
        assertion = authenticator.get(options, origin=client.origin, credential_id=registered)
        assert_error(client.auth_finish(assertion, session_token), 403, "account_unavailable")
    assert len(passkey_store.list_credentials(user.id)) == 1

    directory.set_status(user.id, "active", origin=TEST_ORIGIN)
    options, session_token = client.begin_sign_in(user.id)
    assertion = authenticator.get(options, origin=client.origin, credential_id=registered)
    assert client.auth_finish(assertion, session_token).status_code == 200
