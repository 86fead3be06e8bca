"""The automatic upgrade to a passkey at the end of a recovery, over HTTP with a software
authenticator: a person who lost their passkey gets back in by e-mail code or by recovery
code, sets a new password instead of the recovery's own "Create a passkey" step, and the
password manager's silent creation (Conditional Create) gives them a new passkey, stored,
audited and told by e-mail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jwt
import pytest

from identityctl.services.accounts import recovery
from identityctl.store import audit
from identityctl.store import passkeys as passkey_store
from identityctl.store.directory import UserRecord
from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator
from tests.support.flows import FlowClient, credential_inputs
from tests.support.origins import TEST_ORIGIN
from tests.support.passkeys import PasskeyClient
from tests.support.smtp import SmtpServer, text_of
from tests.test_recovery import mailed_code, new_person, recovering

NEW_PASSWORD = "a brand new passphrase"


def lost_their_passkey(service: Service) -> UserRecord:
    """A person with a proven address and one passkey, on a device they no longer have."""
    person = new_person()
    PasskeyClient(service).enrolled(person, SoftAuthenticator())
    return person


def by_e_mail_code(flows: FlowClient, person: UserRecord, smtp: SmtpServer) -> None:
    flows.act("email_code", username=person.username)
    flows.act("check_code", otp=mailed_code(smtp, person.attributes["email"]))


def by_recovery_code(flows: FlowClient, person: UserRecord, smtp: SmtpServer) -> None:
    [code, *_] = recovery.new_recovery_codes(person.id, origin=TEST_ORIGIN)
    flows.act("recovery_code", username=person.username, recoveryCode=code)


Recover = Callable[[FlowClient, UserRecord, SmtpServer], None]
WAYS_BACK_IN = pytest.mark.parametrize("way_back_in", [by_e_mail_code, by_recovery_code],
                                       ids=["e-mail code", "recovery code"])


def recovered_with_a_new_password(service: Service, smtp: SmtpServer, way_back_in: Recover,
                                  *, browser_can: str) -> tuple[FlowClient, UserRecord]:
    """Back in ``way_back_in``, past the recovery's passkey step ("Set a new password
    instead"), from a page whose browser can ``browser_can``."""
    person = lost_their_passkey(service)
    flows = recovering(service)
    way_back_in(flows, person, smtp)
    assert "passkeyCreationOptions" in flows.step["data"]["additionalData"]
    flows.act("use_password")
    flows.act("set_password", password=NEW_PASSWORD, passkeyUpgrade=browser_can)
    return flows, person


def registration_of(person: UserRecord, credential_id: str) -> list[dict[str, Any]]:
    return [event for event in audit.events(user_id=person.id, event="passkey.register")
            if event["details"]["credentialId"] == credential_id]


@WAYS_BACK_IN
def test_a_recovered_person_gets_a_new_passkey_from_the_silent_creation_stored_and_told(
        mailing: Service, smtp: SmtpServer, way_back_in: Recover) -> None:
    flows, person = recovered_with_a_new_password(mailing, smtp, way_back_in,
                                                  browser_can="conditional")
    step = flows.step
    assert step["flowStatus"] == "INCOMPLETE" and step["failureReason"] == "passkey_upgrade"
    # Just offered a passkey and chose a password: only the silent creation is tried.
    assert step["data"]["additionalData"]["passkeyUpgrade"] == "conditional"
    assert [a["ref"] for a in step["data"]["actions"]] == ["passkey_create", "not_now"]

    address = person.attributes["email"]
    mailed_before = len(smtp.mailbox.to(address))  # the e-mail code, when that was the way
    # Conditional Create: the password manager makes it without a gesture (UP=0).
    credential = flows.authenticator.create(flows.additional("passkeyCreationOptions"),
                                            origin=flows.origin, up=False, uv=False)
    done = flows.act("passkey_create", **credential_inputs(credential))
    assert done["flowStatus"] == "COMPLETE" and done["assertion"]
    claims = jwt.decode(done["assertion"], options={"verify_signature": False})
    assert claims["sub"] == person.id and "passkey" not in claims["amr"]

    stored = {key.credential_id: key for key in passkey_store.list_credentials(person.id)}
    assert len(stored) == 2  # the lost one stays until the person deletes it
    new = stored[credential["id"]]
    [registered] = registration_of(person, credential["id"])
    assert registered["outcome"] == "success"
    notice = smtp.mailbox.wait_for(address, mailed_before + 1)[mailed_before]
    assert notice["Subject"].startswith("A passkey was added")
    assert f'"{new.name}" was added to your account (while recovering your account)' \
        in text_of(notice)
    # The new passkey signs in.
    assert PasskeyClient(mailing).sign_in(flows.authenticator, person.id).status_code == 200


@WAYS_BACK_IN
def test_without_conditional_create_a_recovered_person_is_not_asked_again(
        mailing: Service, smtp: SmtpServer, way_back_in: Recover) -> None:
    flows, person = recovered_with_a_new_password(mailing, smtp, way_back_in,
                                                  browser_can="modal")
    assert flows.step["flowStatus"] == "COMPLETE"
    assert len(passkey_store.list_credentials(person.id)) == 1
