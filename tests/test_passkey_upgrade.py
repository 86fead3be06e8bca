"""The automatic upgrade to a passkey after a sign-in that used none (PasskeyAuthExecutor
``upgrade``): the rule, and the default flows over HTTP with a software authenticator."""

from __future__ import annotations

from typing import Any

import pytest

from identityctl.flow.definition import validate_flow
from identityctl.passkey.upgrade import CONDITIONAL, OFFER, upgrade_offer
from identityctl.services import catalog
from identityctl.store import audit
from identityctl.store import passkeys as passkey_store
from tests.conftest import Service
from tests.support.flows import FlowClient, credential_inputs
from tests.support.oauth import register_client
from tests.support.origins import TEST_ORIGIN
from tests.support.smtp import SmtpServer, text_of
from tests.test_recovery import PASSWORD, new_person

# --- the rule ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("amr", "browser_can", "has_passkeys", "visible", "offered"), [
    (["pwd"], "conditional", False, True, OFFER),
    (["pwd"], "modal", False, True, OFFER),
    (["otp"], "conditional", False, True, OFFER),
    # Signed in with a passkey: there is one here already.
    (["passkey"], "conditional", False, True, None),
    (["hwk", "passkey", "pwd"], "modal", False, True, None),
    # A page that says nothing (an API client, an older page) is never asked.
    (["pwd"], "", False, True, None),
    (["pwd"], "something", False, True, None),
    # Has passkeys and chose the password: only the silent creation, never a question.
    (["pwd"], "conditional", True, True, CONDITIONAL),
    (["pwd"], "modal", True, True, None),
    # The flow wants no visible step.
    (["pwd"], "conditional", False, False, CONDITIONAL),
    (["pwd"], "modal", False, False, None),
])
def test_what_a_sign_in_is_offered(amr: list[str], browser_can: str, has_passkeys: bool,
                                   visible: bool, offered: str | None) -> None:
    assert upgrade_offer(amr=amr, browser_can=browser_can, has_passkeys=has_passkeys,
                         visible_step=visible) == offered


def test_the_upgrade_needs_the_user_known_before_it() -> None:
    flow = {"name": "x", "handle": "x", "flowType": "AUTHENTICATION", "nodes": [
        {"id": "start", "type": "START", "onSuccess": "upgrade"},
        {"id": "upgrade", "type": "TASK_EXECUTION", "onSuccess": "end",
         "executor": {"name": "PasskeyAuthExecutor", "mode": "upgrade",
                      "properties": {"relyingPartyId": "localhost"}}},
        {"id": "end", "type": "END"}]}
    with pytest.raises(Exception, match="before the flow has created or identified"):
        validate_flow(flow)
    flow["nodes"][1]["executor"]["properties"] = {}
    with pytest.raises(Exception, match="needs property relyingPartyId"):
        validate_flow(flow)


# --- the default flows -------------------------------------------------------------------------


def password_sign_in(service: Service, **inputs: str) -> tuple[FlowClient, Any]:
    person = new_person()
    flows = FlowClient(service, register_client("SPA").application_id)
    flows.start()
    flows.act("password", username=person.username, password=PASSWORD, **inputs)
    return flows, person


def test_a_password_sign_in_is_offered_a_passkey_that_is_stored_and_told(
        mailing: Service, smtp: SmtpServer) -> None:
    flows, person = password_sign_in(mailing, passkeyUpgrade="conditional")
    step = flows.step
    assert step["flowStatus"] == "INCOMPLETE" and step["failureReason"] == "passkey_upgrade"
    assert step["data"]["additionalData"]["passkeyUpgrade"] == "offer"
    assert [a["ref"] for a in step["data"]["actions"]] == ["passkey_create", "not_now"]
    options = flows.additional("passkeyCreationOptions")
    assert options["authenticatorSelection"]["userVerification"] == "preferred"

    # Conditional Create: the password manager makes it without a gesture (UP=0).
    credential = flows.authenticator.create(options, origin=flows.origin, up=False, uv=False)
    done = flows.act("passkey_create", **credential_inputs(credential))
    assert done["flowStatus"] == "COMPLETE", done
    [stored] = passkey_store.list_credentials(person.id)
    assert stored.credential_id == credential["id"]
    assert audit.events(user_id=person.id, event="passkey.register")
    notice = smtp.mailbox.wait_for(person.attributes["email"])[0]
    assert "when you signed in" in text_of(notice)


def test_not_now_an_api_client_and_a_passkey_sign_in_go_straight_on(service: Service) -> None:
    flows, person = password_sign_in(service, passkeyUpgrade="modal")
    assert flows.act("not_now")["flowStatus"] == "COMPLETE"
    assert passkey_store.list_credentials(person.id) == []
    # A client that does not say what its browser can is not asked.
    quiet, _ = password_sign_in(service)
    assert quiet.step["flowStatus"] == "COMPLETE"


def test_a_failed_upgrade_never_blocks_the_sign_in(service: Service) -> None:
    flows, person = password_sign_in(service, passkeyUpgrade="modal")
    options = flows.additional("passkeyCreationOptions")
    credential = flows.authenticator.create(options, origin="https://evil.example")
    done = flows.act("passkey_create", **credential_inputs(credential))
    assert done["flowStatus"] == "COMPLETE"
    assert passkey_store.list_credentials(person.id) == []


def test_every_default_flow_with_a_password_or_code_has_the_upgrade(service: Service) -> None:
    for handle, kind in (("default-basic-passkey-flow", "AUTHENTICATION"),
                         ("default-basic-flow", "AUTHENTICATION"),
                         ("default-recovery-flow", "RECOVERY")):
        flow = catalog.flows.require_flow(handle, kind)
        [upgrade] = [node for node in flow["nodes"] if node["id"] == "passkey_upgrade"]
        assert upgrade["executor"]["mode"] == "upgrade"


def test_an_application_can_turn_the_offer_off(service: Service) -> None:
    client = register_client("SPA")
    application = catalog.applications.get_application(client.application_id)
    assert application["passkeyUpgrade"] is True  # on unless turned off
    catalog.applications.update_application({**application, "passkeyUpgrade": False},
                                            origin=TEST_ORIGIN)
    person = new_person()
    flows = FlowClient(service, client.application_id)
    flows.start()
    flows.act("password", username=person.username, password=PASSWORD,
              passkeyUpgrade="conditional")
    assert flows.step["flowStatus"] == "COMPLETE"
