"""A real SMTP server for the tests (aiosmtpd) on 127.0.0.1: it keeps what it receives, can
be stopped and started again on its port (an SMTP server that is down), and can hold a
message's DATA unanswered (a sender that dies mid-delivery)."""

from __future__ import annotations

import asyncio
import email
import email.policy
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller


class Mailbox:
    """What the SMTP server received, and its knobs."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.data_commands = 0
        self.holding = threading.Event()  # while set, DATA is not answered
        self._lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.data_commands += 1
        while self.holding.is_set():
            await asyncio.sleep(0.05)
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self._lock:
            self.messages.append(message)  # type: ignore[arg-type]
        return "250 Message accepted"

    def to(self, address: str) -> list[EmailMessage]:
        with self._lock:
            return [message for message in self.messages if message["To"] == address]

    def wait_for(self, address: str, count: int = 1, timeout: float = 30) -> list[EmailMessage]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.to(address)
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{count} message(s) to {address} did not arrive in {timeout} s; "
                             f"received: {[m['To'] for m in self.messages]}")


def text_of(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    assert part is not None
    return part.get_content()


def code_in(message: EmailMessage) -> str:
    """The one-time code a message carries (on a line of its own)."""
    found = re.search(r"^\s*([0-9]{6})\s*$", text_of(message), re.M)
    assert found, text_of(message)
    return found.group(1)


class SmtpServer:
    """aiosmtpd on 127.0.0.1:``port``; ``down()`` and ``up()`` keep the port and mailbox."""

    def __init__(self) -> None:
        from tests.conftest import free_port  # (conftest imports this module)

        self.port = free_port()
        self.mailbox = Mailbox()
        self._controller: Controller | None = None

    def up(self) -> None:
        self._controller = Controller(self.mailbox, hostname="127.0.0.1", port=self.port)
        self._controller.start()

    def down(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def settings(self) -> dict[str, str]:
        """Lines of the sample config that point a deployment at this server."""
        return {'smtp_host = ""': 'smtp_host = "127.0.0.1"',
                "smtp_port = 587": f"smtp_port = {self.port}",
                'security = "starttls"': 'security = "none"',
                'from = "identityctl <identity@localhost>"':
                    'from = "Example Identity <identity@example.com>"'}


@contextmanager
def smtp_server() -> Iterator[SmtpServer]:
    server = SmtpServer()
    server.up()
    try:
        yield server
    finally:
        server.down()
