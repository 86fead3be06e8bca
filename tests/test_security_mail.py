"""Mail about a person's account speaks for the deployment, and keeps no secret once sent,
over HTTP with mail read from a real SMTP server (aiosmtpd):

- a client that registered itself (RFC 7591) cannot start the RECOVERY flow, so its chosen
  name (``Security team: call +1-555-0100 now``) never reaches anyone's inbox from the
  deployment's own sender; mail about such a client has the deployment's look;
- once a one-time code's message is sent, nothing in the store holds the code, its subject
  included (the outbox keeps the subject with the code blanked).

One deployment (open registration, mail to the module's SMTP server) serves the module.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from identityctl.services import catalog
from identityctl.services.accounts import recovery
from identityctl.services.delivery import mail
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from identityctl.store.models import OutboxMessage
from identityctl.ui import gate
from tests.conftest import Service, deployment_mailing_to
from tests.support.flows import FlowClient
from tests.support.oauth import register_client
from tests.support.origins import TEST_ORIGIN
from tests.support.smtp import SmtpServer, code_in, smtp_server, text_of

VISHING = "Security team: call +1-555-0100 now"
LOOPBACK = "http://127.0.0.1:33418/callback"


@pytest.fixture(scope="module")
def smtp() -> Iterator[SmtpServer]:
    with smtp_server() as server:
        yield server


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, smtp: SmtpServer) -> Iterator[Service]:
    yield from deployment_mailing_to(smtp, tmp_path_factory.mktemp("security-mail"), {
        'dynamic_registration = "off"': 'dynamic_registration = "open"'})


def person_with_a_confirmed_address() -> Any:
    name = f"bob-{uuid.uuid4().hex[:6]}"
    bob = directory.create_user(username=name, attributes={"email": f"{name}@example.com"},
                                origin=TEST_ORIGIN)
    recovery.confirm_email(bob.id, origin=RequestOrigin(actor="test"))
    return bob


def self_registered(service: Service, name: str) -> dict[str, Any]:
    """The application a stranger's client made for itself at /oauth2/register."""
    answer = service.post("/oauth2/register", {
        "client_name": name, "redirect_uris": [LOOPBACK],
        "grant_types": ["authorization_code", "refresh_token"]})
    assert answer.status_code == 201, answer.text
    client_id = answer.json()["client_id"]
    [application] = [app for app in catalog.applications.list_applications()
                     if catalog.applications.oauth_config(app).get("clientId") == client_id]
    return application


def test_a_self_registered_client_cannot_start_recovery_nor_name_itself_in_mail(
        deployment: Service, smtp: SmtpServer) -> None:
    bob = person_with_a_confirmed_address()
    stranger = self_registered(deployment, VISHING)
    flows = FlowClient(deployment, stranger["id"])
    refused = flows.call({"applicationId": stranger["id"], "flowType": "RECOVERY"})
    assert refused.status_code == 403, refused.text
    assert refused.json()["code"] == "recovery_not_offered"
    assert "account page" in refused.json()["description"]
    # Mail about such a client would look like the deployment's own.
    assert mail.brand_of(stranger) == {}
    # ... and its sign-in page offers no way into recovery.
    assert not gate.gate_application(stranger["id"]).recovery_offered

    # Bob's own recovery, through an application an administrator made, still works; none of
    # his mail carries the stranger's words.
    ours = FlowClient(deployment, register_client("SPA").application_id)
    ours.start("RECOVERY")
    ours.act("email_code", username=bob.username)
    [message] = smtp.mailbox.wait_for(bob.attributes["email"])
    assert message["Subject"].startswith("Your SPA app ")
    for received in smtp.mailbox.to(bob.attributes["email"]):
        assert "555-0100" not in received["Subject"] + text_of(received)


def sent(message_id: str, timeout: float = 30) -> OutboxMessage:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = OutboxMessage.get_by_id(message_id)
        if row.delivered_at:
            return row
        time.sleep(0.05)
    raise AssertionError(f"outbox message {message_id} was not marked sent in {timeout} s")


def test_no_code_is_stored_once_its_message_is_sent_subject_included(
        deployment: Service, smtp: SmtpServer) -> None:
    bob = person_with_a_confirmed_address()
    address = bob.attributes["email"]
    flows = FlowClient(deployment, register_client("SPA").application_id)
    flows.start("RECOVERY")
    flows.act("email_code", username=bob.username)
    [message] = smtp.mailbox.wait_for(address)
    code = code_in(message)
    assert code in message["Subject"]  # the person sees it at a glance
    [row] = OutboxMessage.select().where(OutboxMessage.target == address)
    stored = sent(row.id)
    assert code not in json.dumps(stored.payload) + stored.target + stored.last_error
    assert stored.payload == {"subject": message["Subject"].replace(code, "••••••")}
    listed = CliRunner().invoke(cli_app, ["--config", str(deployment.config_path), "email",
                                          "outbox", "--json"])
    assert listed.exit_code == 0, listed.output
    [entry] = [entry for entry in json.loads(listed.output) if entry["to"] == address]
    assert entry["state"] == "sent" and code not in json.dumps(entry)
