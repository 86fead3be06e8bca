"""Authenticator apps (TOTP, RFC 6238) after a password, and the "passkeys only" rule: the
window and replay rules in process, then over HTTP the enrolment on the account API, the
sign-in's second step (a recovery code for a lost phone), its throttle, one code used twice
at once, and the refusals where passkeys only are allowed."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jwt
import pytest

from identityctl.oauth.pkce import s256_challenge
from identityctl.security import totp
from identityctl.services import catalog
from identityctl.services.accounts import recovery
from identityctl.services.directory import users as directory
from identityctl.store import audit as audit_store
from identityctl.store import db
from identityctl.store import recovery as recovery_store
from tests.conftest import Service
from tests.support.flows import FlowClient
from tests.support.oauth import OAuthDriver, RegisteredClient
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import assert_error
from tests.support.smtp import SmtpServer, code_in, text_of
from tests.support.threads import run_at_once
from tests.test_account import Account
from tests.test_flow_execution import PASSWORD, make_application
from tests.test_lockout_resistance import ATTACKER, VICTIM, flow_from, password_attempt

NOW = 1_700_000_000.0  # a moment in the middle of a 30-second step
SECRET = totp.new_enrolment(account_name="ada", issuer="example.com").secret


# --- the rules, in process ----------------------------------------------------------------


@pytest.mark.parametrize("offset", [-30, 0, 30])
def test_a_code_of_the_step_before_now_or_after_is_accepted(offset: int) -> None:
    code = totp.code_at(SECRET, NOW + offset)
    assert totp.matching_step(SECRET, code, now=NOW, after_step=None) \
        == totp.step_at(NOW + offset)


@pytest.mark.parametrize("offset", [-60, 60])
def test_a_code_two_steps_away_is_refused(offset: int) -> None:
    assert totp.matching_step(SECRET, totp.code_at(SECRET, NOW + offset), now=NOW,
                              after_step=None) is None


def test_a_spent_step_and_every_earlier_one_open_nothing_again() -> None:
    step = totp.step_at(NOW)
    assert totp.matching_step(SECRET, totp.code_at(SECRET, NOW), now=NOW,
                              after_step=step) is None
    assert totp.matching_step(SECRET, totp.code_at(SECRET, NOW - 30), now=NOW,
                              after_step=step) is None
    assert totp.matching_step(SECRET, totp.code_at(SECRET, NOW + 30), now=NOW,
                              after_step=step) == step + 1


def test_what_is_not_six_digits_is_no_code() -> None:
    code = totp.code_at(SECRET, NOW)
    assert totp.matching_step(SECRET, f"{code[:3]} {code[3:]}", now=NOW, after_step=None)
    for typed in ("", "12345", "1234567", "abcdef", code + "0"):
        assert totp.matching_step(SECRET, typed, now=NOW, after_step=None) is None


def test_a_sealed_seed_opens_only_for_its_account() -> None:
    key = bytes(32)
    sealed = totp.seal(key, SECRET, binding="user-1")
    assert SECRET not in sealed and totp.unseal(key, sealed, binding="user-1") == SECRET
    with pytest.raises(totp.TOTPError):
        totp.unseal(key, sealed, binding="user-2")
    with pytest.raises(totp.TOTPError):
        totp.unseal(bytes([1]) * 32, sealed, binding="user-1")


def test_the_otpauth_uri_names_the_account_and_the_service() -> None:
    enrolment = totp.new_enrolment(account_name="ada", issuer="id.example.com")
    assert enrolment.uri.startswith("otpauth://totp/id.example.com:ada?")
    assert f"secret={enrolment.secret}" in enrolment.uri and len(enrolment.secret) == 32


# --- over HTTP ------------------------------------------------------------------------------


def with_password(me: Account) -> Account:
    me.user = directory.set_password(me.user.id, PASSWORD, origin=TEST_ORIGIN)
    return me


def enrolled(me: Account) -> str:
    """``me`` with an active authenticator app; its secret."""
    started = me.ok("POST", "/totp", {})
    me.ok("POST", "/totp/confirm", {"code": totp.code_at(started["secret"], time.time())})
    return started["secret"]


def at_the_code_prompt(service: Service, app: dict[str, Any], username: str,
                       address: str = VICTIM) -> FlowClient:
    flows = flow_from(service, address, app["id"])
    step = password_attempt(flows, username, PASSWORD)
    assert step["flowStatus"] == "INCOMPLETE" and not step.get("failureReason"), step
    assert {i["identifier"] for i in step["data"]["inputs"]} == {"totpCode", "recoveryCode"}
    return flows


def later_code(secret: str) -> str:
    """A code of the next step (within the window, and never a step already spent)."""
    return totp.code_at(secret, time.time() + 30)


def test_an_authenticator_app_is_set_up_with_a_first_code_and_removed_after_a_recent_sign_in(
        mailing: Service, smtp: SmtpServer) -> None:
    me = with_password(Account(mailing))
    with db.transaction():
        recovery_store.mark_verified(me.user.id, me.user.attributes["email"])
    assert me.ok("GET", "/profile")["totpEnrolled"] is False
    started = me.ok("POST", "/totp", {})
    assert started["qrCode"].startswith("data:image/svg+xml")
    assert started["uri"].startswith("otpauth://totp/") and started["secret"] in started["uri"]
    # Pending until a code from the app comes back: a wrong one leaves it pending.
    wrong = "000000" if totp.code_at(started["secret"], time.time()) != "000000" else "111111"
    assert_error(me.call("POST", "/totp/confirm", {"code": wrong}), 400, "invalid_totp_code")
    assert me.ok("GET", "/profile")["totpEnrolled"] is False
    me.ok("POST", "/totp/confirm", {"code": totp.code_at(started["secret"], time.time())})
    assert me.ok("GET", "/profile")["totpEnrolled"] is True
    assert_error(me.call("POST", "/totp", {}), 409, "totp_already_enrolled")
    [notice] = smtp.mailbox.wait_for(me.user.attributes["email"])
    assert "authenticator app" in text_of(notice)
    # The secret is in no audit event.
    events = audit_store.events(user_id=me.user.id)
    assert {"totp.enrolment_start", "totp.enrol"} <= {event["event"] for event in events}
    assert started["secret"] not in repr(events)

    me.ok("DELETE", "/totp")
    assert me.ok("GET", "/profile")["totpEnrolled"] is False
    assert "removed" in smtp.mailbox.wait_for(me.user.attributes["email"], 2)[1]["Subject"]
    assert_error(me.call("DELETE", "/totp"), 400, "totp_not_enrolled")


def test_only_a_person_with_a_password_sets_up_an_app(service: Service) -> None:
    # (That setting it up or removing it needs a recent sign-in: test_account.py.)
    assert_error(Account(service).call("POST", "/totp", {}), 409, "totp_needs_password")


def test_a_password_sign_in_asks_the_enrolled_for_a_code_and_no_one_else(
        service: Service) -> None:
    app = make_application()
    me = with_password(Account(service))
    secret = enrolled(me)
    flows = at_the_code_prompt(service, app, me.user.username)
    wrong = "000000" if later_code(secret) != "000000" else "111111"
    assert flows.act("totp", totpCode=wrong)["failureReason"] == "invalid_totp_code"
    done = flows.act("totp", totpCode=later_code(secret))
    assert done["flowStatus"] == "COMPLETE"
    claims = jwt.decode(done["assertion"], options={"verify_signature": False})
    assert claims["sub"] == me.user.id and {"pwd", "otp", "mfa"} <= set(claims["amr"])
    # The code just used opens nothing again.
    again = at_the_code_prompt(service, app, me.user.username)
    assert again.act("totp", totpCode=later_code(secret))["failureReason"] \
        == "invalid_totp_code"

    someone = directory.create_user(username=f"tom-{uuid.uuid4().hex[:6]}", password=PASSWORD,
                                    origin=TEST_ORIGIN)
    plain = flow_from(service, VICTIM, app["id"])
    assert password_attempt(plain, someone.username, PASSWORD)["flowStatus"] == "COMPLETE"


def test_a_recovery_code_stands_in_for_a_lost_phone_once(service: Service) -> None:
    app = make_application()
    me = with_password(Account(service))
    enrolled(me)
    [code, *_] = recovery.new_recovery_codes(me.user.id, origin=TEST_ORIGIN)
    flows = at_the_code_prompt(service, app, me.user.username)
    assert flows.act("recovery_code", recoveryCode=code.lower())["flowStatus"] == "COMPLETE"
    again = at_the_code_prompt(service, app, me.user.username)
    assert again.act("recovery_code", recoveryCode=code)["failureReason"] \
        == "invalid_recovery_code"


def test_wrong_codes_are_throttled_like_passwords_at_that_address_only(
        service: Service) -> None:
    app = make_application()
    me = with_password(Account(service))
    secret = enrolled(me)
    right = later_code(secret)
    wrong = (f"{n:06d}" for n in range(1000) if f"{n:06d}" != right)
    limit = service.config.security.max_failures_per_account
    answers = []
    # The password typed again between guesses (a fresh execution each time) wipes none.
    for _ in range(2):
        guesser = at_the_code_prompt(service, app, me.user.username, address=ATTACKER)
        answers += [guesser.call({"executionId": guesser.execution_id, "action": "totp",
                                  "inputs": {"totpCode": next(wrong)}}).status_code
                    for _ in range(limit // 2)]
    assert 429 not in answers
    assert password_attempt(flow_from(service, ATTACKER, app["id"]), me.user.username,
                            PASSWORD)["status"] == 429
    # The person, from their own address, is not locked out.
    mine = at_the_code_prompt(service, app, me.user.username)
    assert mine.act("totp", totpCode=right)["flowStatus"] == "COMPLETE"


def test_one_code_sent_twice_at_once_signs_in_exactly_once(service: Service) -> None:
    app = make_application()
    me = with_password(Account(service))
    secret = enrolled(me)
    first, second = (at_the_code_prompt(service, app, me.user.username) for _ in range(2))
    code = later_code(secret)
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda flows: flows.act("totp", totpCode=code),
                                (first, second)))
    assert sorted(answer["flowStatus"] for answer in answers) == ["COMPLETE", "INCOMPLETE"]


def test_passkeys_only_refuses_passwords_for_an_application_or_a_unit(
        service: Service) -> None:
    strict = make_application(passkeysOnly=True)
    assert catalog.applications.get_application(strict["id"])["passkeysOnly"] is True
    me = with_password(Account(service))
    step = password_attempt(flow_from(service, VICTIM, strict["id"]), me.user.username,
                            PASSWORD)
    assert step["flowStatus"] == "INCOMPLETE"
    assert step["failureReason"] == "passwords_not_allowed"

    # A unit's rule covers its people and those of the units inside it.
    top = directory.create_ou(handle=f"top-{uuid.uuid4().hex[:6]}", name="Top",
                              passkeys_only=True, origin=TEST_ORIGIN)
    inner = directory.create_ou(handle=f"in-{uuid.uuid4().hex[:6]}", name="In",
                                parent=top["handle"], origin=TEST_ORIGIN)
    kind = directory.create_user_type(name=f"staff-{uuid.uuid4().hex[:6]}", ou=inner["id"],
                                      origin=TEST_ORIGIN)
    staff = directory.create_user(username=f"sam-{uuid.uuid4().hex[:6]}", password=PASSWORD,
                                  user_type=kind["name"], origin=TEST_ORIGIN)
    assert staff.ou_id == inner["id"]
    app = make_application()
    assert password_attempt(flow_from(service, VICTIM, app["id"]), staff.username,
                            PASSWORD)["failureReason"] == "passwords_not_allowed"
    assert password_attempt(flow_from(service, VICTIM, app["id"]), staff.username,
                            "wrong")["failureReason"] == "invalid_credentials"

    # The account page offers neither a password nor an app where the rule holds.
    directory.update_ou(me.user.ou_id, passkeys_only=True, origin=TEST_ORIGIN)
    try:
        assert me.ok("GET", "/profile")["passwordsAllowed"] is False
        assert_error(me.call("PUT", "/password", {"password": "another good one"}), 403,
                     "passwords_not_allowed")
        assert_error(me.call("POST", "/totp", {}), 403, "passwords_not_allowed")
    finally:
        directory.update_ou(me.user.ou_id, passkeys_only=False, origin=TEST_ORIGIN)


def test_recovery_by_e_mail_asks_the_enrolled_for_their_app_too(
        mailing: Service, smtp: SmtpServer) -> None:
    me = with_password(Account(mailing))
    address = me.user.attributes["email"]
    with db.transaction():
        recovery_store.mark_verified(me.user.id, address)
    secret = enrolled(me)
    flows = FlowClient(mailing, make_application()["id"])
    flows.start("RECOVERY")
    flows.act("email_code", username=me.user.username)
    [mailed] = [message for message in smtp.mailbox.wait_for(address, 2)
                if "code" in message["Subject"]]
    step = flows.act("check_code", otp=code_in(mailed))
    # The mailbox alone is not enough: the app's code (or a recovery code) comes next.
    assert {i["identifier"] for i in step["data"]["inputs"]} == {"totpCode", "recoveryCode"}
    step = flows.act("totp", totpCode=later_code(secret))
    assert "passkeyCreationOptions" in step["data"]["additionalData"]


def test_the_store_spends_a_step_once_and_never_an_earlier_one(store_url: str) -> None:
    from identityctl.store import totp as totp_store
    from tests.test_store import make_user

    person = make_user()
    with db.transaction():
        totp_store.start(person.id, "sealed")
    assert not totp_store.is_active(person.id)
    assert not totp_store.use_step(person.id, 100, confirm=False)  # not active yet
    assert totp_store.use_step(person.id, 100, confirm=True)
    assert totp_store.is_active(person.id)
    assert not totp_store.use_step(person.id, 100, confirm=True)  # confirmed once only
    assert not totp_store.use_step(person.id, 100, confirm=False)  # spent
    assert not totp_store.use_step(person.id, 99, confirm=False)  # earlier

    racers, start, wins = 8, threading.Barrier(8), []

    def spend() -> None:
        try:
            start.wait()
            wins.append(totp_store.use_step(person.id, 101, confirm=False))
        finally:
            db.release_connection()

    run_at_once(spend, racers)
    assert sorted(wins) == [False] * (racers - 1) + [True]
    with db.transaction():
        assert totp_store.remove(person.id) and not totp_store.remove(person.id)


def test_passkeys_only_is_set_as_code_and_from_the_command_line(
        service: Service, cli: Any) -> None:
    from identityctl.errors import InvalidField
    from identityctl.services.admin import configuration
    from identityctl.services.context import ServiceContext

    ctx = ServiceContext.for_config(service.config)
    units = configuration.export(ctx, only=["organizationUnits"])["organizationUnits"]
    strict = {"handle": f"strict-{uuid.uuid4().hex[:6]}", "name": "Strict",
              "description": "", "parent": None, "passkeysOnly": True}
    document = {"apiVersion": "identityctl/v1", "kind": "Configuration",
                "organizationUnits": [*units, strict]}
    configuration.apply(ctx, document, origin=TEST_ORIGIN)
    exported = configuration.export(ctx, only=["organizationUnits"])["organizationUnits"]
    assert strict in exported  # written only where it holds
    assert all("passkeysOnly" not in unit for unit in exported if unit != strict)
    with pytest.raises(InvalidField) as refused:
        configuration.apply(ctx, {**document, "organizationUnits": [
            *units, {**strict, "passkeysOnly": "yes"}]}, origin=TEST_ORIGIN)
    assert "passkeysOnly" in refused.value.description

    assert cli("ou", "update", strict["handle"], "--passwords-allowed").exit_code == 0
    assert directory.require_ou(strict["handle"])["passkeysOnly"] is False
    app = make_application()
    assert cli("app", "update", app["id"], "--passkeys-only").exit_code == 0
    assert catalog.applications.get_application(app["id"])["passkeysOnly"] is True


def test_an_administrator_removes_a_lost_app(service: Service, cli: Any) -> None:
    me = with_password(Account(service))
    enrolled(me)
    assert cli("user", "remove-totp", me.user.username).exit_code == 0
    assert me.ok("GET", "/profile")["totpEnrolled"] is False
    assert password_attempt(flow_from(service, VICTIM, make_application()["id"]),
                            me.user.username, PASSWORD)["flowStatus"] == "COMPLETE"


def test_another_applications_password_sign_in_does_not_open_a_passkeys_only_one(
        service: Service) -> None:
    strict, other = make_application(passkeysOnly=True), make_application()
    strict_client = RegisteredClient(
        application_id=strict["id"], redirect_uri="https://app.example/cb", secret=None,
        client_id=catalog.applications.oauth_config(strict)["clientId"], auth_method="none")
    other_client = dataclasses.replace(
        strict_client, application_id=other["id"],
        client_id=catalog.applications.oauth_config(other)["clientId"])
    me = with_password(Account(service))
    oauth = OAuthDriver(service)
    pkce = {"code_challenge": s256_challenge("v" * 43), "code_challenge_method": "S256"}

    # A flow's assertion completes its own application's requests only.
    flows = FlowClient(service, other["id"])
    flows.start()
    assertion = flows.act("password", username=me.user.username, password=PASSWORD)["assertion"]
    strict_request = oauth.gate_link(strict_client, **pkce)["authId"]
    assert_error(oauth.callback(strict_request, assertion), 400,
                 "assertion_for_another_application")

    # Nor does the browser's session of that password sign-in answer for it: its own flow runs.
    answered = oauth.callback(oauth.gate_link(other_client, **pkce)["authId"], assertion)
    assert answered.status_code == 200, answered.text
    session = answered.headers["Set-Cookie"].split(";")[0].partition("=")[2]
    location = oauth.authorize(strict_client, session=session, **pkce).headers["Location"]
    assert location.startswith(service.config.gate_url + "/signin?"), location
    location = oauth.authorize(other_client, session=session, **pkce).headers["Location"]
    assert location.startswith("https://app.example/cb?code="), location
