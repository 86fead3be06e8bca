"""Recovery without an admin, through /flow/execute as the hosted page drives it, with mail
read from a real SMTP server (aiosmtpd): e-mail verification at sign-up, the RECOVERY flow
by e-mail code and by recovery code, the bounds on guessing, and invitations."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jwt
import pytest

from identityctl.services import catalog
from identityctl.services.accounts import recovery
from identityctl.services.accounts.email_codes import (
    CODE_MAILS_PER_ADDRESS,
    CODE_MAILS_PER_REQUESTER,
)
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import mail
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from identityctl.store import db
from identityctl.store import recovery as recovery_store
from tests.conftest import QUICK_DELIVERIES, Service, start_service
from tests.support.authenticator import SoftAuthenticator
from tests.support.flows import FlowClient
from tests.support.oauth import OAuthDriver, register_client
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient, assert_error
from tests.support.smtp import SmtpServer, code_in, text_of
from tests.test_account import Account
from tests.test_lockout_resistance import from_address

PASSWORD = "correct horse battery"


def new_person(*, verified: bool = True) -> Any:
    name = f"rita-{uuid.uuid4().hex[:6]}"
    user = directory.create_user(username=name, password=PASSWORD,
                                 attributes={"email": f"{name}@example.com"}, origin=TEST_ORIGIN)
    if verified:
        with db.transaction():
            recovery_store.mark_verified(user.id, user.attributes["email"])
    return user


def recovering(service: Service) -> FlowClient:
    flows = FlowClient(service, register_client("SPA").application_id)
    flows.start("RECOVERY")
    return flows


def with_a_proven_address(service: Service) -> tuple[Account, str]:
    """A person signed in on their account page, whose e-mail address is proven."""
    me = Account(service)
    address = me.user.attributes["email"]
    with db.transaction():
        recovery_store.mark_verified(me.user.id, address)
    return me, address


def mailed_code(smtp: SmtpServer, to: str, count: int = 1) -> str:
    return code_in(smtp.mailbox.wait_for(to, count)[count - 1])


def signing_up(service: Service) -> str:
    """An application people may sign up to; its id."""
    app = register_client("SPA")
    application = catalog.applications.get_application(app.application_id)
    catalog.applications.update_application({**application, "isRegistrationFlowEnabled": True},
                                            origin=TEST_ORIGIN)
    return app.application_id


# --- e-mail verification at sign-up ----------------------------------------------------------


def test_sign_up_confirms_the_address_with_a_code_and_tokens_say_it_is_verified(
        mailing: Service, smtp: SmtpServer) -> None:
    app = register_client("SPA")
    application = catalog.applications.get_application(app.application_id)
    catalog.applications.update_application({**application, "isRegistrationFlowEnabled": True},
                                            origin=TEST_ORIGIN)
    flows = FlowClient(mailing, app.application_id)
    flows.start("REGISTRATION")
    name = f"vera-{uuid.uuid4().hex[:6]}"
    address = f"{name}@example.com"
    flows.act("signup", username=name, password=PASSWORD, email=address)
    step = flows.create_passkey()
    assert step["data"]["additionalData"]["emailSentTo"] == address
    assert [i["identifier"] for i in step["data"]["inputs"]] == ["otp"]
    assert flows.act("verify_email", otp="000000" if mailed_code(smtp, address) != "000000"
                     else "111111")["failureReason"] == "invalid_code"
    done = flows.act("verify_email", otp=mailed_code(smtp, address))
    assert done["flowStatus"] == "COMPLETE"

    user = directory.require_user(name)
    rp = OAuthDriver(mailing)
    tokens = rp.tokens(rp.authorization(app, person=(user, flows.authenticator),
                                        scope="openid email"))
    claims = jwt.decode(tokens["id_token"], options={"verify_signature": False})
    assert claims["email"] == address and claims["email_verified"] is True
    assert rp.userinfo(tokens["access_token"]).json()["email_verified"] is True
    # Another address is not verified until proven.
    directory.update_user(user.id, attributes={"email": f"new-{address}"}, origin=TEST_ORIGIN)
    again = rp.tokens(rp.authorization(app, person=(user, flows.authenticator),
                                       scope="openid email"))
    assert rp.userinfo(again["access_token"]).json()["email_verified"] is False


# --- recovery by e-mail code ---------------------------------------------------------------------


def test_recovery_by_e_mail_code_enrols_a_new_passkey_signs_in_and_tells_the_person(
        mailing: Service, smtp: SmtpServer) -> None:
    person = new_person()
    address = person.attributes["email"]
    flows = recovering(mailing)
    step = flows.act("email_code", username=person.username)
    assert [i["identifier"] for i in step["data"]["inputs"]] == ["otp"]
    [message] = smtp.mailbox.wait_for(address)
    assert message["Subject"].startswith("Your SPA app ")  # the application's name
    step = flows.act("check_code", otp=code_in(message))
    assert "passkeyCreationOptions" in step["data"]["additionalData"]
    done = flows.create_passkey()
    assert done["flowStatus"] == "COMPLETE" and done["assertion"]
    claims = jwt.decode(done["assertion"], options={"verify_signature": False})
    assert claims["sub"] == person.id and set(claims["amr"]) == {"otp", "passkey"}
    [_, notice] = smtp.mailbox.wait_for(address, 2)
    assert "added to your account" in text_of(notice) and "recovering" in text_of(notice)
    # The new passkey signs in.
    assert PasskeyClient(mailing).sign_in(flows.authenticator, person.id).status_code == 200


def test_the_address_itself_names_the_account(mailing: Service, smtp: SmtpServer) -> None:
    person = new_person()
    flows = recovering(mailing)
    flows.act("email_code", username=person.attributes["email"].upper())
    step = flows.act("check_code", otp=mailed_code(smtp, person.attributes["email"]))
    assert "passkeyCreationOptions" in step["data"]["additionalData"]


def test_a_username_that_spells_someones_proven_address_does_not_take_their_recovery(
        mailing: Service, smtp: SmtpServer) -> None:
    """A name with an @ is the account that proved that address, whoever chose it as a
    username, before or after."""
    name = f"rita-{uuid.uuid4().hex[:6]}"
    address = f"{name}@example.com"
    squatter = FlowClient(mailing, signing_up(mailing))
    squatter.start("REGISTRATION")
    squatter.act("signup", username=address, password=PASSWORD)
    assert squatter.create_passkey()["flowStatus"] == "COMPLETE"
    assert directory.require_user(address).username == address
    owner = directory.create_user(username=name, attributes={"email": address},
                                  origin=TEST_ORIGIN)
    with db.transaction():
        recovery_store.mark_verified(owner.id, address)

    flows = recovering(mailing)
    flows.act("email_code", username=address)
    flows.act("check_code", otp=mailed_code(smtp, address))
    done = flows.create_passkey()
    assert jwt.decode(done["assertion"], options={"verify_signature": False})["sub"] == owner.id
    # A recovery code typed with the address is the owner's too.
    [code, *_] = recovery.new_recovery_codes(owner.id, origin=RequestOrigin(actor="test"))
    step = recovering(mailing).act("recovery_code", username=address.upper(), recoveryCode=code)
    assert "passkeyCreationOptions" in step["data"]["additionalData"]
    assert recovery.recovery_codes_left(owner.id) == 9


def test_anyone_named_gets_the_same_answer_and_only_a_proven_address_gets_mail(
        mailing: Service, smtp: SmtpServer) -> None:
    known, unverified = new_person(), new_person(verified=False)
    answers = []
    for name in (known.username, unverified.username, "nobody-at-all", "who@example.com"):
        flows = recovering(mailing)
        step = flows.act("email_code", username=name)
        answers.append((step["flowStatus"], step.get("failureReason"),
                        [i["identifier"] for i in step["data"]["inputs"]],
                        sorted(step["data"]["additionalData"])))
    assert len(set(map(repr, answers))) == 1, answers
    smtp.mailbox.wait_for(known.attributes["email"])
    time.sleep(2)  # the deliveries thread ran: nothing else went out
    assert smtp.mailbox.to(unverified.attributes["email"]) == []
    assert {message["To"] for message in smtp.mailbox.messages} == {known.attributes["email"]}


def test_a_code_opens_only_the_execution_it_was_sent_to(mailing: Service,
                                                        smtp: SmtpServer) -> None:
    person = new_person()
    first, second = recovering(mailing), recovering(mailing)
    first.act("email_code", username=person.username)
    code = mailed_code(smtp, person.attributes["email"])
    second.act("email_code", username=person.username)
    mailed_code(smtp, person.attributes["email"], 2)
    assert second.act("check_code", otp=code)["failureReason"] == "invalid_code"
    assert "passkeyCreationOptions" in first.act("check_code", otp=code)["data"][
        "additionalData"]


def test_wrong_codes_end_the_execution_and_are_bounded_per_account(
        mailing: Service, smtp: SmtpServer) -> None:
    person = new_person()
    flows = recovering(mailing)
    flows.act("email_code", username=person.username)
    code = mailed_code(smtp, person.attributes["email"])
    wrong = "000000" if code != "000000" else "111111"
    for _ in range(mailing.config.email.code_attempts):
        assert flows.act("check_code", otp=wrong)["failureReason"] == "invalid_code"
    ended = flows.act("check_code", otp=code)  # even the right one: this try is over
    assert ended["flowStatus"] == "ERROR" and ended["failureReason"] == "too_many_attempts"
    assert_error(flows.call({"executionId": flows.execution_id, "action": "check_code",
                             "inputs": {"otp": code}}), 400, "execution_completed")
    # New executions keep guessing at the same account from this address: throttled.
    refused = None
    for _ in range(3):
        more = recovering(mailing)
        more.act("email_code", username=person.username)
        for _ in range(mailing.config.email.code_attempts):
            answer = more.call({"executionId": more.execution_id, "action": "check_code",
                                "inputs": {"otp": wrong}})
            if answer.status_code == 429:
                refused = answer
                break
        if refused is not None:
            break
    assert refused is not None and refused.json()["code"] == "too_many_attempts"


@pytest.fixture
def short_codes(tmp_path: Path, smtp: SmtpServer) -> Iterator[Service]:
    running, stop = start_service(tmp_path, settings={**smtp.settings(), **QUICK_DELIVERIES,
                                                      "code_ttl = 600": "code_ttl = 1"})
    yield running
    stop()


def test_a_code_expires(short_codes: Service, smtp: SmtpServer) -> None:
    person = new_person()
    flows = recovering(short_codes)
    flows.act("email_code", username=person.username)
    code = mailed_code(smtp, person.attributes["email"])
    time.sleep(1.2)
    assert flows.act("check_code", otp=code)["failureReason"] == "code_expired"
    flows.act("resend_code")
    fresh = mailed_code(smtp, person.attributes["email"], 2)
    assert "passkeyCreationOptions" in flows.act("check_code", otp=fresh)["data"][
        "additionalData"]


# --- the allowance of code mails: a stranger spends only their own share --------------------

STRANGER, OWNER = "127.0.0.2", "127.0.0.3"
#: Requesters that spend an address's ceiling between them, each its whole share.
CEILING_SPENDERS = [f"127.0.1.{n}" for n in range(1, CODE_MAILS_PER_ADDRESS
                                                  // CODE_MAILS_PER_REQUESTER + 1)]


def code_asked(service: Service, address: str, application_id: str, name: str) -> FlowClient:
    """A recovery by e-mail code for ``name``, asked from ``address``."""
    flows = FlowClient(from_address(service, address), application_id)
    flows.start("RECOVERY")
    flows.act("email_code", username=name)
    return flows


def answer_of(step: dict[str, Any]) -> tuple[Any, ...]:
    return (step["flowStatus"], step.get("failureReason"),
            tuple(i["identifier"] for i in step["data"]["inputs"]))


def spend_the_ceiling(service: Service, name: str) -> None:
    application_id = register_client("SPA").application_id
    for requester in CEILING_SPENDERS:
        for _ in range(CODE_MAILS_PER_REQUESTER):
            code_asked(service, requester, application_id, name)


def test_a_strangers_requests_from_one_address_do_not_stop_the_owners_recovery_from_another(
        mailing: Service, smtp: SmtpServer) -> None:
    person = new_person()
    address = person.attributes["email"]
    notices = CODE_MAILS_PER_REQUESTER + 1  # notices are no codes: they spend nothing
    with db.transaction():
        for _ in range(notices):
            mail.notify(ServiceContext.for_config(mailing.config), person, "totp_added")
    application_id = register_client("SPA").application_id
    answers = {answer_of(code_asked(mailing, STRANGER, application_id, person.username).step)
               for _ in range(CODE_MAILS_PER_REQUESTER + 1)}  # one past the stranger's share
    assert len(answers) == 1, answers  # the same answer, sent or not
    smtp.mailbox.wait_for(address, notices + CODE_MAILS_PER_REQUESTER)

    owner = code_asked(mailing, OWNER, application_id, address)
    *_, theirs = smtp.mailbox.wait_for(address, notices + CODE_MAILS_PER_REQUESTER + 1)
    assert answer_of(owner.step) in answers
    time.sleep(2)  # the deliveries thread ran: the stranger's request past their share sent nothing
    assert len(smtp.mailbox.to(address)) == notices + CODE_MAILS_PER_REQUESTER + 1
    step = owner.act("check_code", otp=code_in(theirs))
    assert "passkeyCreationOptions" in step["data"]["additionalData"]


def test_a_flood_to_one_mailbox_from_many_addresses_is_bounded(mailing: Service,
                                                               smtp: SmtpServer) -> None:
    person = new_person()
    address = person.attributes["email"]
    # Sign-ups with the person's address from one place: that requester's share of codes,
    # then the sign-up goes on without one (the address stays unconfirmed).
    application_id = signing_up(mailing)
    sign_ups = []
    for _ in range(CODE_MAILS_PER_REQUESTER + 1):
        flows = FlowClient(from_address(mailing, STRANGER), application_id)
        flows.start("REGISTRATION")
        flows.act("signup", username=f"flood-{uuid.uuid4().hex[:8]}", password=PASSWORD,
                  email=address)
        step = flows.create_passkey()
        sign_ups.append((step["flowStatus"], step["data"].get("additionalData", {}).get(
            "emailSentTo")))
    assert sign_ups == [("INCOMPLETE", address)] * CODE_MAILS_PER_REQUESTER + [
        ("COMPLETE", None)]
    # Recovery codes from many more places: each its own share, all within the ceiling.
    spend_the_ceiling(mailing, person.username)
    smtp.mailbox.wait_for(address, CODE_MAILS_PER_ADDRESS)
    time.sleep(2)  # the deliveries thread ran: nothing past the ceiling went out
    assert len(smtp.mailbox.to(address)) == CODE_MAILS_PER_ADDRESS


def test_the_account_pages_code_arrives_after_strangers_spent_the_addresss_ceiling(
        mailing: Service, smtp: SmtpServer) -> None:
    me, address = with_a_proven_address(mailing)
    spend_the_ceiling(mailing, address)
    smtp.mailbox.wait_for(address, CODE_MAILS_PER_ADDRESS)
    assert me.ok("POST", "/email/code", {"address": address})["address"] == address
    *_, mine = smtp.mailbox.wait_for(address, CODE_MAILS_PER_ADDRESS + 1)
    assert me.ok("POST", "/email/confirm", {"code": code_in(mine)})["emailVerified"] is True


# --- recovery codes ------------------------------------------------------------------------------


def test_a_recovery_code_works_once_even_when_sent_twice_at_once(mailing: Service) -> None:
    person = new_person(verified=False)
    codes = recovery.new_recovery_codes(person.id, origin=RequestOrigin(actor="test"))
    assert len(set(codes)) == 10 and recovery.recovery_codes_left(person.id) == 10
    tries = [recovering(mailing) for _ in range(4)]
    typed = codes[0].lower().replace("-", " ")  # as a person might type it

    def use(flows: FlowClient) -> dict[str, Any]:
        return flows.act("recovery_code", username=person.username, recoveryCode=typed)

    with ThreadPoolExecutor(len(tries)) as pool:
        answers = list(pool.map(use, tries))
    won = [a for a in answers if "passkeyCreationOptions" in a["data"].get("additionalData", {})]
    assert len(won) == 1, answers
    assert all(a.get("failureReason") == "invalid_recovery_code" for a in answers
               if a not in won)
    assert recovery.recovery_codes_left(person.id) == 9
    # Another person's name with this person's code: refused, and the code is not spent.
    other = new_person(verified=False)
    assert recovering(mailing).act("recovery_code", username=other.username,
                                   recoveryCode=codes[1])["failureReason"] == \
        "invalid_recovery_code"
    assert recovery.recovery_codes_left(person.id) == 9
    # New codes replace the old ones.
    recovery.new_recovery_codes(person.id, origin=RequestOrigin(actor="test"))
    assert recovering(mailing).act("recovery_code", username=person.username,
                                   recoveryCode=codes[1])["failureReason"] == \
        "invalid_recovery_code"


def test_a_new_password_instead_of_a_passkey(mailing: Service) -> None:
    person = new_person(verified=False)
    [code, *_] = recovery.new_recovery_codes(person.id, origin=RequestOrigin(actor="test"))
    flows = recovering(mailing)
    flows.act("recovery_code", username=person.username, recoveryCode=code)
    flows.act("use_password")
    assert flows.act("set_password", password="short")["failureReason"] == "weak_password"
    done = flows.act("set_password", password="a brand new passphrase")
    assert done["flowStatus"] == "COMPLETE"
    assert directory.require_user(person.id).password_hash is not None


# --- invitations ---------------------------------------------------------------------------------


def test_an_invitation_enrols_a_first_passkey_once_and_tells_the_person(
        mailing: Service, smtp: SmtpServer) -> None:
    name = f"ivo-{uuid.uuid4().hex[:6]}"
    user = directory.create_user(username=name, attributes={"email": f"{name}@example.com"},
                                 origin=TEST_ORIGIN)
    with db.transaction():
        recovery_store.mark_verified(user.id, user.attributes["email"])
    made = recovery.invite(ServiceContext.for_config(mailing.config), name, send_email=True,
                           origin=RequestOrigin(actor="test"))
    [invitation] = smtp.mailbox.wait_for(user.attributes["email"])
    assert made["url"] in text_of(invitation)
    link = urlsplit(made["url"]).fragment
    started = mailing.post("/account/api/enrol/start", {"link": link})
    assert started.status_code == 200 and started.json()["username"] == name
    device = SoftAuthenticator()
    finished = mailing.post("/account/api/enrol/finish", {
        "link": link, "sessionToken": started.json()["sessionToken"],
        "publicKeyCredential": device.create(
            started.json()["publicKeyCredentialCreationOptions"],
            origin=mailing.config.passkey.allowed_origins[0])})
    assert finished.status_code == 201, finished.text
    assert_error(mailing.post("/account/api/enrol/start", {"link": link}), 401, "link_used")
    [_, notice] = smtp.mailbox.wait_for(user.attributes["email"], 2)
    assert "invitation" in text_of(notice)
    assert PasskeyClient(mailing).sign_in(device, user.id).status_code == 200


# --- notices and the account page -------------------------------------------------------------


def test_passkeys_added_and_deleted_on_the_account_page_are_e_mailed(
        mailing: Service, smtp: SmtpServer) -> None:
    me, address = with_a_proven_address(mailing)
    [first] = me.ok("GET", "/passkeys")["passkeys"]
    started = me.ok("POST", "/passkeys/start", {})
    made = SoftAuthenticator().create(started["publicKeyCredentialCreationOptions"],
                                      origin=me.passkeys.origin)
    me.ok("POST", "/passkeys/finish", {"sessionToken": started["sessionToken"],
                                       "publicKeyCredential": made, "credentialName": "Phone"})
    [added] = smtp.mailbox.wait_for(address)
    assert "\"Phone\" was added" in text_of(added) and "on your account page" in text_of(added)
    assert me.call("DELETE", f"/passkeys/{first['credentialId']}").status_code == 204
    [_, removed] = smtp.mailbox.wait_for(address, 2)
    assert "was removed" in text_of(removed) and mailing.url("/account") in text_of(removed)
    profile = me.ok("GET", "/profile")
    assert profile["emailVerified"] is True and profile["recoveryCodesLeft"] == 0
    made_codes = me.call("POST", "/recovery-codes", {})
    assert made_codes.status_code == 201 and len(made_codes.json()["recoveryCodes"]) == 10
    assert me.ok("GET", "/profile")["recoveryCodesLeft"] == 10
