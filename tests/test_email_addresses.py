"""E-mail addresses, attacked over HTTP and the CLI as an outsider (or a careless import) would:

- one rule (security/email_address.py) wherever an address comes in: a sign-up with an
  address that would write a header of its own (``x@y\\r\\nBcc: …``), a list, or 300
  characters is refused in plain words, and nothing is stored or queued; the CLI refuses the
  same; an upstream provider's value that is not one address is not used as one; a message
  queued to such an address long ago is given up, never sent, and mail behind it goes out;
- an address nobody proved blocks nobody and tells nothing: the real owner signs up and
  signs in through an upstream provider with it, and gets the same answers as with any
  other address; once they prove it, it leaves the account that only claimed it, and that
  account is not told. A proven address stays one person's.

One deployment (mail to the module's SMTP server, a GitHub stand-in as upstream provider)
serves the module.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
import requests
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from identityctl.services.accounts import federation
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import mail
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin
from identityctl.store import audit, db, outbox
from identityctl.store import recovery as recovery_store
from identityctl.store.identity_providers import ProviderRecord
from identityctl.store.models import OutboxMessage, User
from tests.conftest import Service, deployment_mailing_to
from tests.support.flows import FlowClient
from tests.support.origins import TEST_ORIGIN
from tests.support.smtp import SmtpServer, code_in, smtp_server
from tests.test_federation import GitHubStandIn, send_json
from tests.test_flow_execution import PASSWORD, make_application, new_username

HEADER = "x@y.example\r\nBcc: a@b.example"
LIST = "a@b.example, c@d.example"
LONG = "a" * 60 + "@" + "b" * 235 + ".example"  # 300 characters


@pytest.fixture(scope="module")
def smtp() -> Iterator[SmtpServer]:
    with smtp_server() as server:
        yield server


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, smtp: SmtpServer) -> Iterator[Service]:
    yield from deployment_mailing_to(smtp, tmp_path_factory.mktemp("addresses"))


@pytest.fixture
def signing_up(deployment: Service) -> FlowClient:
    return FlowClient(deployment, make_application()["id"])


def cli(service: Service, *args: str) -> Any:
    return CliRunner().invoke(cli_app, ["--config", str(service.config_path), *args, "--json"])


def shape(step: dict[str, Any]) -> tuple[Any, ...]:
    """What a step tells the person, values aside."""
    return (step["flowStatus"], step.get("type"), step.get("failureReason"),
            [entry["identifier"] for entry in step["data"]["inputs"]],
            sorted(step["data"]["additionalData"]))


# --- one rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize("address", [HEADER, LIST, LONG], ids=["header", "list", "300"])
def test_sign_up_refuses_a_header_a_list_and_a_300_character_address(
        deployment: Service, signing_up: FlowClient, address: str) -> None:
    queued = OutboxMessage.select().count()
    name = new_username()
    signing_up.start("REGISTRATION")
    step = signing_up.act("signup", username=name, password=PASSWORD, email=address)
    assert step["failureReason"] == "invalid_email"
    assert [entry["identifier"] for entry in step["data"]["inputs"]][:2] == ["username",
                                                                             "password"]
    assert name not in [user.username for user in directory.list_users(limit=1000)]
    assert OutboxMessage.select().count() == queued


def test_the_cli_refuses_what_sign_up_refuses(deployment: Service) -> None:
    name = new_username()
    for args in (("user", "create", "--username", name, "--email", LIST),
                 ("user", "create", "--username", name, "--attribute", f"email={HEADER}"),
                 ("email", "test", "--to", HEADER)):
        refused = cli(deployment, *args)
        assert refused.exit_code == 1, refused.output
        error = json.loads(refused.stdout)["error"]
        assert error["code"] == "invalid_email" and "e-mail address" in error["description"]
    made = json.loads(cli(deployment, "user", "create", "--username", name, "--email",
                          "Ada@Example.COM").stdout)
    assert made["attributes"]["email"] == "Ada@example.com"  # the domain in lower case
    refused = cli(deployment, "user", "update", name, "--email", LONG)
    assert json.loads(refused.stdout)["error"]["code"] == "invalid_email"
    assert directory.require_user(name).attributes["email"] == "Ada@example.com"


def test_a_message_queued_to_a_malformed_address_is_given_up_and_mail_behind_it_goes_out(
        deployment: Service, smtp: SmtpServer) -> None:
    with db.transaction():  # as a store written before the rule may hold them
        stuck = [outbox.enqueue(kind=mail.EMAIL, target=target, payload={
            "subject": "Your code: ••••••", "header": "Your code: 437084",
            "text": "Your code: 437084\n", "html": "<p>Your code: 437084</p>"})
            for target in (HEADER, LIST)]
        mail.queue(ServiceContext.for_config(deployment.config), "test",
                   to="after@example.com", server="test")
    smtp.mailbox.wait_for("after@example.com")
    for message_id in stuck:
        row = OutboxMessage.get_by_id(message_id)
        assert row.failed_at and row.attempts == 1 and "not one e-mail address" in row.last_error
        assert "437084" not in str(row.payload)  # given up: no code stays behind either
    assert not any("b.example" in str(message["To"]) for message in smtp.mailbox.messages)


# --- an address nobody proved -----------------------------------------------------------------


def holders_of(address: str) -> list[str]:
    """The ids of the accounts whose ``email`` attribute is ``address``."""
    return [row.id for row in User.select() if (row.attributes or {}).get("email") == address]


def sign_up_skipping_the_passkey(flows: FlowClient, address: str) -> dict[str, Any]:
    flows.start("REGISTRATION")
    step = flows.act("signup", username=new_username(), password=PASSWORD, email=address)
    assert step.get("failureReason") is None, step
    return flows.act("skip")


def test_an_unproven_address_blocks_nobodys_sign_up_and_leaves_when_its_owner_proves_it(
        deployment: Service, smtp: SmtpServer) -> None:
    address = f"owner-{uuid.uuid4().hex[:6]}@example.com"
    squatter = FlowClient(deployment, make_application()["id"])
    sign_up_skipping_the_passkey(squatter, address)  # claims the address, never proves it
    smtp.mailbox.wait_for(address)
    [squatter_id] = holders_of(address)

    owner = FlowClient(deployment, make_application()["id"])
    stranger = FlowClient(deployment, make_application()["id"])
    # The owner's answer is the answer anyone gets for an address nobody holds.
    assert shape(sign_up_skipping_the_passkey(owner, address)) == shape(
        sign_up_skipping_the_passkey(stranger, f"fresh-{uuid.uuid4().hex[:6]}@example.com"))
    done = owner.act("verify_email", otp=code_in(smtp.mailbox.wait_for(address, 2)[1]))
    assert done["flowStatus"] == "COMPLETE", done
    owner_id = jwt.decode(done["assertion"], options={"verify_signature": False})["sub"]

    assert recovery_store.user_with_verified_address(address) == owner_id
    assert holders_of(address) == [owner_id]
    [removed] = audit.events(event="email.removed", user_id=squatter_id)
    assert removed["details"]["by"] == owner_id
    assert len(smtp.mailbox.to(address)) == 2  # the two codes; the squatter is told nothing

    # A proven address stays one person's: a later claim is only a claim.
    late = FlowClient(deployment, make_application()["id"])
    assert shape(sign_up_skipping_the_passkey(late, address))[0] == "INCOMPLETE"
    assert recovery_store.user_with_verified_address(address) == owner_id


class GitHubAccount(GitHubStandIn):
    """The GitHub stand-in answering for ``account``: its id and primary verified address."""

    account: ClassVar[tuple[int, str]] = (0, "")

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/api/user":
            send_json(self, 200, {"id": self.account[0], "login": f"gh-{self.account[0]}"})
        elif path == "/api/user/emails":
            send_json(self, 200, [{"email": self.account[1], "primary": True,
                                   "verified": True}])
        else:
            super().do_GET()


@pytest.fixture(scope="module")
def github(deployment: Service) -> Iterator[ProviderRecord]:
    stand_in = ThreadingHTTPServer(("127.0.0.1", 0), GitHubAccount)
    threading.Thread(target=stand_in.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{stand_in.server_address[1]}"
    yield federation.add_provider(
        ServiceContext.for_config(deployment.config), kind="github", client_id="gh-client",
        client_secret="gh-secret", web_url=base, api_url=f"{base}/api",
                                  origin=RequestOrigin(actor="test"))
    stand_in.shutdown()


def federated_sign_in(service: Service, provider: ProviderRecord,
                      account: tuple[int, str]) -> dict[str, Any]:
    GitHubAccount.account = account
    flows = FlowClient(service, make_application()["id"])
    flows.start()
    away = flows.act("federated", idpId=provider.id)
    back = requests.get(away["data"]["redirectURL"], allow_redirects=False, timeout=30)
    answer = {name: values[0] for name, values in
              parse_qs(urlsplit(back.headers["Location"]).query).items()}
    return flows.act("callback", **answer)


def test_an_unproven_address_does_not_stop_its_owner_signing_in_through_a_provider(
        deployment: Service, github: ProviderRecord) -> None:
    address = f"mona-{uuid.uuid4().hex[:6]}@example.com"
    squatter = directory.create_user(username=new_username(), password=PASSWORD,
                                     attributes={"email": address}, origin=TEST_ORIGIN)
    done = federated_sign_in(deployment, github, (600_001, address))
    assert done["flowStatus"] == "COMPLETE", done  # not federated_link_required
    owner_id = jwt.decode(done["assertion"], options={"verify_signature": False})["sub"]
    assert owner_id != squatter.id
    assert directory.require_user(owner_id).attributes["email"] == address
    assert recovery_store.user_with_verified_address(address) == owner_id
    assert "email" not in directory.require_user(squatter.id).attributes


def test_an_upstream_value_that_is_not_one_address_is_not_used_as_one(
        deployment: Service, github: ProviderRecord) -> None:
    done = federated_sign_in(deployment, github, (600_002, LIST))
    assert done["flowStatus"] == "COMPLETE", done
    user = directory.require_user(jwt.decode(done["assertion"],
                                             options={"verify_signature": False})["sub"])
    assert "email" not in user.attributes
    assert recovery_store.verified_address(user.id) is None
