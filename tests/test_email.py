"""E-mail goes out through the outbox to a real SMTP server (aiosmtpd on 127.0.0.1): once,
while the SMTP server is down and after it is back, across a `kill -9` of the server in the
middle of a delivery, and with two instances on one PostgreSQL database."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from identityctl.config import load_config
from identityctl.services.admin import bootstrap
from identityctl.services.admin.bootstrap import open_store
from identityctl.services.context import ServiceContext
from identityctl.services.delivery import mail
from identityctl.store import db
from tests.conftest import (
    QUICK_DELIVERIES,
    Service,
    free_port,
    make_deployment,
    pg_server_url,
    shared_deployment,
)
from tests.support.postgres import empty_database
from tests.support.processes import stop, wait_for_health
from tests.support.smtp import Mailbox, SmtpServer, text_of
from tests.test_scale_out import _serve


def address() -> str:
    return f"person-{uuid.uuid4().hex[:8]}@example.com"


def queue_test_message(service: Service, to: str) -> None:
    with db.transaction():
        mail.queue(ServiceContext.for_config(service.config), "test", to=to, server="test")


def outbox_state(to: str) -> list[str]:
    return [("sent" if entry.delivered_at else "failed" if entry.failed_at else "waiting")
            for entry in mail.recent() if entry.target == to]


def test_a_queued_message_goes_out_once_with_text_and_html(mailing: Service,
                                                          smtp: SmtpServer) -> None:
    to = address()
    queue_test_message(mailing, to)
    [message] = smtp.mailbox.wait_for(to)
    assert message["From"] == "Example Identity <identity@example.com>"
    assert message["Subject"] == "Test message from identityctl"
    assert "can send e-mail" in text_of(message)
    assert message.get_body(preferencelist=("html",)) is not None
    assert message["Message-ID"].startswith("<") and message["Auto-Submitted"]
    time.sleep(2)  # more rounds of the deliveries thread: nothing more is sent
    assert len(smtp.mailbox.to(to)) == 1
    assert outbox_state(to) == ["sent"]
    # The body (which may carry a one-time code) is not kept once sent.
    [entry] = [entry for entry in mail.recent() if entry.target == to]
    assert entry.subject == "Test message from identityctl"


def test_a_message_waits_while_the_smtp_server_is_down_then_goes_out_once(
        mailing: Service, smtp: SmtpServer) -> None:
    to = address()
    smtp.down()
    queue_test_message(mailing, to)
    deadline = time.monotonic() + 20
    while not any(entry.attempts for entry in mail.recent() if entry.target == to):
        assert time.monotonic() < deadline, "no delivery was tried"
        time.sleep(0.1)
    [entry] = [entry for entry in mail.recent() if entry.target == to]
    assert entry.delivered_at is None and "127.0.0.1" in entry.last_error
    smtp.up()
    smtp.mailbox.wait_for(to, timeout=30)  # the retry after the backoff
    time.sleep(2)
    assert len(smtp.mailbox.to(to)) == 1 and outbox_state(to) == ["sent"]


def test_email_test_sends_now_and_says_what_went_wrong(mailing: Service,
                                                      smtp: SmtpServer) -> None:
    runner = CliRunner()
    to = address()
    sent = runner.invoke(cli_app, ["--config", str(mailing.config_path), "email", "test",
                                   "--to", to, "--json"])
    assert sent.exit_code == 0, sent.output
    assert len(smtp.mailbox.wait_for(to)) == 1
    smtp.down()
    failed = runner.invoke(cli_app, ["--config", str(mailing.config_path), "email", "test",
                                     "--to", to])
    assert failed.exit_code != 0
    assert f"127.0.0.1:{smtp.port}" in failed.output and "Traceback" not in failed.output
    listed = runner.invoke(cli_app, ["--config", str(mailing.config_path), "email", "outbox"])
    assert listed.exit_code == 0, listed.output


def test_without_smtp_email_test_names_the_setting(service: Service) -> None:
    failed = CliRunner().invoke(cli_app, ["--config", str(service.config_path), "email",
                                          "test", "--to", address()])
    assert failed.exit_code != 0 and "email.smtp_host" in failed.output


# --- a server killed mid-delivery --------------------------------------------------------------


@pytest.fixture
def served_deployment(tmp_path: Path, smtp: SmtpServer) -> Iterator[tuple[Path, int]]:
    yield from shared_deployment(tmp_path, {**smtp.settings(), **QUICK_DELIVERIES})


def test_a_message_is_sent_after_the_server_is_killed_in_the_middle_of_sending_it(
        served_deployment: tuple[Path, int], smtp: SmtpServer, tmp_path: Path) -> None:
    config_path, port = served_deployment
    service = Service(config=load_config(config_path), config_path=config_path,
                      base_url=f"http://localhost:{port}", http=requests.Session())
    to = address()
    smtp.mailbox.holding.set()  # DATA is not answered: the sender is mid-delivery
    queue_test_message(service, to)  # committed; no server runs yet
    log = tmp_path / "serve.log"
    server = _serve(config_path, port, log)
    try:
        wait_for_health(f"http://127.0.0.1:{port}/health", server, log)
        deadline = time.monotonic() + 20
        while smtp.mailbox.data_commands == 0:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        server.send_signal(signal.SIGKILL)  # claimed and being sent: not marked sent
        server.wait()
        smtp.mailbox.holding.clear()
        assert smtp.mailbox.to(to) == [] or len(smtp.mailbox.to(to)) == 1
        server = _serve(config_path, port, tmp_path / "restarted.log")
        wait_for_health(f"http://127.0.0.1:{port}/health", server, tmp_path / "restarted.log")
        smtp.mailbox.wait_for(to, timeout=30)
        deadline = time.monotonic() + 20
        while outbox_state(to) != ["sent"]:
            assert time.monotonic() < deadline, outbox_state(to)
            time.sleep(0.1)
    finally:
        stop(server)
    # The held DATA of the killed process never completed: the restarted one's is the one.
    assert len({message["Message-ID"] for message in smtp.mailbox.to(to)}) == 1


# --- two instances, one PostgreSQL ------------------------------------------------------------


@pytest.mark.postgres
def test_two_instances_on_one_postgresql_send_each_message_once(
        tmp_path: Path, smtp: SmtpServer) -> None:
    server_url = pg_server_url()
    with empty_database(server_url, prefix="identityctl_mail") as url:
        port_a, port_b = free_port(), free_port()
        config_path = make_deployment(tmp_path, port=port_a, database_url=url,
                                      settings=smtp.settings())
        config = load_config(config_path)
        open_store(config, create=True)
        bootstrap.seed(config)
        recipients = [address() for _ in range(30)]
        processes: list[subprocess.Popen[str]] = []
        try:
            for port in (port_a, port_b):
                processes.append(_serve(config_path, port, tmp_path / f"serve-{port}.log"))
                wait_for_health(f"http://127.0.0.1:{port}/health", processes[-1])
            service = Service(config=config, config_path=config_path,
                              base_url=f"http://localhost:{port_a}", http=requests.Session())
            for to in recipients:  # queued while both instances poll the outbox
                queue_test_message(service, to)
            for to in recipients:
                smtp.mailbox.wait_for(to, timeout=60)
            time.sleep(3)
        finally:
            stop(*processes)
            db.close()
        received = _by_recipient(smtp.mailbox, recipients)
        assert all(count == 1 for count in received.values()), received


def _by_recipient(mailbox: Mailbox, recipients: list[str]) -> dict[str, int]:
    return {to: len(mailbox.to(to)) for to in recipients}
