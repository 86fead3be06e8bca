"""What the passkey API tests share: a client for the four endpoints and small assertions.

No tests here; the specifications live in the tests/test_passkey_*.py files.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from identityctl.config import load_config
from identityctl.security.tokens import ACCESS_TOKEN_TYP
from identityctl.services.directory import users as directory
from identityctl.services.tokens import TokenService
from identityctl.store.directory import UserRecord
from tests.conftest import Service, free_port
from tests.support.authenticator import SoftAuthenticator
from tests.support.origins import TEST_ORIGIN
from tests.support.processes import stop


def assert_error(response: requests.Response, status: int, code: str) -> dict[str, Any]:
    """The response is the JSON error shape with ``status`` and ``code``."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"code", "message", "description"}, body
    assert body["code"] == code, body
    return body


@contextlib.contextmanager
def second_instance(service: Service,
                    edit: Callable[[str], str] = lambda text: text) -> Iterator[Service]:
    """Another `identityctl serve` process on ``service``'s database and public address.

    Like a second instance behind the same load balancer: same config file contents
    (changed by ``edit``), another port, another process.
    """
    port = free_port()
    config_path = service.config_path.with_name(f"instance-{port}.toml")
    config_path.write_text(edit(service.config_path.read_text()))
    log_path = config_path.with_suffix(".log")
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "identityctl", "--config", str(config_path), "serve",
             "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=log)
    instance = Service(config=load_config(config_path), config_path=config_path,
                       base_url=f"http://localhost:{port}", http=requests.Session())
    try:
        deadline = time.monotonic() + 30
        while not _answers(instance):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"second instance did not start:\n"
                                   f"{log_path.read_text()[-2000:]}")
            time.sleep(0.1)
        yield instance
    finally:
        instance.http.close()
        stop(process, timeout=10)


def _answers(instance: Service) -> bool:
    try:
        return instance.get("/health").status_code == 200
    except requests.ConnectionError:
        return False


@dataclass
class PasskeyClient:
    """Drives the atomic passkey API of one running service like a browser app would."""

    service: Service
    #: The browser's origin (one of passkey.allowed_origins).
    origin: str = ""
    _admin_token: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        self.origin = self.origin or self.service.config.passkey.allowed_origins[0]

    @classmethod
    def of_process(cls, config_path: Path, base_url: str) -> PasskeyClient:
        """For an `identityctl serve` process (another store than this test process's):
        its admin token comes from `identityctl token`, as an operator gets one."""
        from tests.test_cli_process import identityctl

        token = identityctl("token", "--scope", "system", config=config_path)
        assert token.returncode == 0, token.stderr
        service = Service(config=load_config(config_path), config_path=config_path,
                          base_url=base_url, http=requests.Session())
        return cls(service, _admin_token=token.stdout.strip())

    @property
    def rp_id(self) -> str:
        return self.service.config.passkey.rp_id

    def new_user(self, **attributes: Any) -> UserRecord:
        return directory.create_user(username=f"user-{uuid.uuid4().hex[:10]}",
                                     attributes=attributes, origin=TEST_ORIGIN)

    def admin_token(self) -> str:
        """An admin access token, as `identityctl token --scope system` mints it."""
        if not self._admin_token:
            config = self.service.config
            self._admin_token = TokenService(config.issuer).sign(
                {"sub": "admin", "aud": [config.mcp_audience, config.issuer],
                 "scope": "system", "client_id": "identityctl-cli"},
                typ=ACCESS_TOKEN_TYP, ttl=600)
        return self._admin_token

    def _bearer(self, token: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"} if token else {}

    # --- registration ---------------------------------------------------------------------

    def register_start(self, user_id: str | None, *, token: str | None = "admin",
                       **fields: Any) -> requests.Response:
        body = {"userId": user_id, "relyingPartyId": self.rp_id, **fields}
        token = self.admin_token() if token == "admin" else token
        return self.service.post("/register/passkey/start", body, headers=self._bearer(token))

    def register_finish(self, credential: Any, session_token: Any, *, name: Any = None,
                        token: str | None = "admin") -> requests.Response:
        body = {"publicKeyCredential": credential, "sessionToken": session_token}
        if name is not None:
            body["credentialName"] = name
        token = self.admin_token() if token == "admin" else token
        return self.service.post("/register/passkey/finish", body, headers=self._bearer(token))

    def begin_registration(self, user: UserRecord, **fields: Any) -> tuple[dict, str]:
        """Creation options and session token of a successful start."""
        started = self.register_start(user.id, **fields)
        assert started.status_code == 200, started.text
        body = started.json()
        return body["publicKeyCredentialCreationOptions"], body["sessionToken"]

    def register(self, user: UserRecord, authenticator: SoftAuthenticator, *,
                 name: str | None = None, **tamper: Any) -> requests.Response:
        """Start, create with ``authenticator`` (tampered as asked), finish."""
        options, session_token = self.begin_registration(user)
        credential = authenticator.create(options, origin=self.origin, **tamper)
        return self.register_finish(credential, session_token, name=name)

    def enrolled(self, user: UserRecord, authenticator: SoftAuthenticator) -> dict[str, Any]:
        """Register a passkey that must succeed; its registration metadata."""
        finished = self.register(user, authenticator)
        assert finished.status_code == 201, finished.text
        return finished.json()

    # --- authentication -------------------------------------------------------------------

    def auth_start(self, user_id: str | None = None, **fields: Any) -> requests.Response:
        body: dict[str, Any] = {"relyingPartyId": self.rp_id, **fields}
        if user_id is not None:
            body["userId"] = user_id
        return self.service.post("/auth/passkey/start", body)

    def begin_sign_in(self, user_id: str | None = None) -> tuple[dict, str]:
        started = self.auth_start(user_id)
        assert started.status_code == 200, started.text
        body = started.json()
        return body["publicKeyCredentialRequestOptions"], body["sessionToken"]

    def auth_finish(self, credential: Any, session_token: Any, *,
                    skip_assertion: bool | None = None) -> requests.Response:
        body = {"publicKeyCredential": credential, "sessionToken": session_token}
        if skip_assertion is not None:
            body["skipAssertion"] = skip_assertion
        return self.service.post("/auth/passkey/finish", body)

    def sign_in(self, authenticator: SoftAuthenticator, user_id: str | None = None,
                **tamper: Any) -> requests.Response:
        """Start (with ``user_id`` or usernameless), get an assertion, finish."""
        options, session_token = self.begin_sign_in(user_id)
        credential = authenticator.get(options, origin=self.origin, **tamper)
        return self.auth_finish(credential, session_token)
