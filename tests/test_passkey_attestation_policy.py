"""Which authenticators may register, over HTTP: the AAGUID lists, and FIDO metadata that
an administrator loads with `identityctl passkey metadata load` (a test BLOB signed under a
test root, `--trust-root`), against keys whose `packed` attestation chains to a test maker's
root. Refusals are 403 `authenticator_not_allowed` and audited as denied."""

from __future__ import annotations

import base64
import datetime
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from typer.testing import CliRunner, Result

from identityctl.cli.main import app as cli_app
from identityctl.services.accounts.passkeys import attestation
from identityctl.store import audit
from tests.conftest import Service, deployment_with
from tests.support.attestation import (
    LEGAL_HEADER,
    Authority,
    attestation_certificate,
    blob_signer,
    entry,
    metadata_blob,
    root_ca,
)
from tests.support.authenticator import SoftAuthenticator, b64url
from tests.support.passkeys import PasskeyClient, assert_error

KEY = "11111111-2222-3333-4444-555555555555"
REVOKED = "22222222-3333-4444-5555-666666666666"
OTHER = "66666666-7777-8888-9999-000000000000"
ONE_DAY = datetime.timedelta(days=1)
DIRECT = {'attestation = "none"': 'attestation = "direct"'}


def key(aaguid: str, maker: Authority | None = None) -> SoftAuthenticator:
    """A key of make ``aaguid``, attested under ``maker``'s root, or self-attested."""
    return SoftAuthenticator(attestation="packed", aaguid=bytes.fromhex(aaguid.replace("-", "")),
                             attestation_certificate=attestation_certificate(maker, aaguid)
                             if maker else None)


def refusal(client: PasskeyClient, authenticator: SoftAuthenticator) -> dict[str, Any]:
    """The refused registration's error and the audit event it left."""
    user = client.new_user()
    error = assert_error(client.register(user, authenticator), 403, "authenticator_not_allowed")
    [event] = audit.events(user_id=user.id, event="passkey.register")
    assert event["outcome"] == "denied"
    return {"description": error["description"], **event["details"]}


@pytest.fixture
def allowing(tmp_path: Path) -> Iterator[Service]:
    yield from deployment_with(tmp_path, {**DIRECT, "aaguid_allow = []":
                                          f'aaguid_allow = ["{KEY.upper()}"]'})


@pytest.fixture
def denying(tmp_path: Path) -> Iterator[Service]:
    yield from deployment_with(tmp_path, {**DIRECT, "aaguid_deny = []":
                                          f'aaguid_deny = ["{KEY}"]'})


@pytest.fixture
def regulated(tmp_path: Path) -> Iterator[Service]:
    yield from deployment_with(tmp_path, {**DIRECT, "metadata = false": "metadata = true"})


def test_an_allow_list_registers_its_authenticators_only(allowing: Service) -> None:
    client = PasskeyClient(allowing)
    user = client.new_user()
    assert client.register(user, key(KEY)).status_code == 201
    refused = refusal(client, key(OTHER))
    assert refused["reason"] == "not_allowed" and refused["aaguid"] == OTHER
    assert "passkey.aaguid_allow" in refused["description"]
    # The policy needs the attestation: a start cannot ask for less than the deployment's.
    options, _ = client.begin_registration(user, attestation="none")
    assert options["attestation"] == "direct"


def test_a_deny_list_refuses_its_authenticators(denying: Service) -> None:
    client = PasskeyClient(denying)
    assert client.register(client.new_user(), key(OTHER)).status_code == 201
    refused = refusal(client, key(KEY))
    assert refused["reason"] == "denied" and "passkey.aaguid_deny" in refused["description"]


def _cli(service: Service, *args: str) -> Result:
    return CliRunner().invoke(cli_app, ["--config", str(service.config_path), *args],
                              catch_exceptions=False)


def test_metadata_lets_only_attested_keys_of_listed_makes_in_good_standing_register(
        regulated: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = PasskeyClient(regulated)
    fido, maker = root_ca("Test FIDO Root"), root_ca("Test Keys Attestation Root")
    assert_error(client.register(client.new_user(), key(KEY, maker)), 503,
                 "attestation_metadata_missing")

    blob, trust_root = tmp_path / "blob.jwt", tmp_path / "root.pem"
    blob.write_bytes(metadata_blob(blob_signer(fido), [
        entry(KEY, maker), entry(REVOKED, maker, statuses=("FIDO_CERTIFIED", "REVOKED"))]))
    trust_root.write_bytes(fido.pem)
    loaded = _cli(regulated, "passkey", "metadata", "load", str(blob),
                  "--trust-root", str(trust_root), "--json")
    assert loaded.exit_code == 0, loaded.output
    summary = json.loads(loaded.output)
    assert summary["entries"] == 2 and summary["legalHeader"] == LEGAL_HEADER
    assert summary["nextUpdate"] and summary["version"] == 1
    assert [e["outcome"] for e in audit.events(event="passkey.metadata.load")] == ["success"]

    assert client.register(client.new_user(), key(KEY, maker)).status_code == 201
    assert refusal(client, key(KEY))["reason"] == "attestation_untrusted"  # self attestation
    assert refusal(client, key(KEY, root_ca("Counterfeit")))["reason"] == \
        "attestation_untrusted"
    assert refusal(client, key(OTHER, maker))["reason"] == "not_in_metadata"
    revoked = refusal(client, key(REVOKED, maker))
    assert revoked["reason"] == "status" and revoked["status"] == "REVOKED"
    assert "REVOKED" in revoked["description"]

    # The FIDO Alliance's root (the default) did not sign the test BLOB: refused, and the
    # loaded metadata stays.
    refused = _cli(regulated, "passkey", "metadata", "load", str(blob), "--json")
    assert refused.exit_code == 1
    assert json.loads(refused.output)["error"]["code"] == "metadata_untrusted"
    stale = tmp_path / "stale.jwt"
    stale.write_bytes(metadata_blob(blob_signer(fido), [entry(KEY, maker)],
                                    next_update=datetime.date.today() - ONE_DAY))
    refused = _cli(regulated, "passkey", "metadata", "load", str(stale),
                   "--trust-root", str(trust_root), "--json")
    assert json.loads(refused.output)["error"]["code"] == "metadata_expired"
    shown = _cli(regulated, "passkey", "metadata", "show", "--json")
    assert json.loads(shown.output)["version"] == 1

    # Once the loaded BLOB's next update has passed, registrations wait for a new one.
    monkeypatch.setattr(attestation, "_today",
                        lambda: datetime.date.fromisoformat(summary["nextUpdate"]) + ONE_DAY)
    assert_error(client.register(client.new_user(), key(KEY, maker)), 503,
                 "attestation_metadata_expired")
    monkeypatch.undo()

    # A newer BLOB reports the make revoked: every instance's next registration reads it.
    blob.write_bytes(metadata_blob(blob_signer(fido), [
        entry(KEY, maker, statuses=("FIDO_CERTIFIED", "REVOKED"))], number=2))
    assert _cli(regulated, "passkey", "metadata", "load", str(blob),
                "--trust-root", str(trust_root)).exit_code == 0
    assert refusal(client, key(KEY, maker))["reason"] == "status"


def _signed(signer: Authority, payload: bytes, *, x5c: list[str] | None = None) -> bytes:
    """A JWS of ``payload`` as is (JSON or not) signed by ``signer``, its chain in ``x5c``."""
    chain = [base64.b64encode(signer.der).decode()] if x5c is None else x5c
    return jwt.api_jws.encode(payload, signer.key, algorithm="RS256",
                              headers={"x5c": chain}).encode()


def test_a_blob_too_large_endless_too_deep_or_without_its_certificate_is_refused_in_one_line(
        regulated: Service, tmp_path: Path) -> None:
    fido, maker = root_ca("Test FIDO Root"), root_ca("Test Keys Attestation Root")
    signer, trust_root = blob_signer(fido), tmp_path / "root.pem"
    trust_root.write_bytes(fido.pem)
    deep = b"[" * 100_000 + b"]" * 100_000
    oversized = tmp_path / "oversized.jwt"
    with oversized.open("wb") as sparse:  # 80 MB that take no disk
        sparse.truncate(80 * 2**20)
    fifo = tmp_path / "blob.fifo"
    os.mkfifo(fifo)
    files = {"oversized": (oversized, "metadata_invalid"),
             "a device": (Path("/dev/zero"), "metadata_invalid"),
             "a pipe": (fifo, "metadata_invalid"),
             "signed, nested deep": (deep, "metadata_invalid"),
             "unsigned, nested deep": (b".".join([b64url(deep).encode()] * 3),
                                       "metadata_invalid"),
             "no certificate": (_signed(signer, json.dumps(
                 {"no": 1, "nextUpdate": "2099-01-01", "legalHeader": LEGAL_HEADER,
                  "entries": [entry(KEY, maker)]}).encode(), x5c=[]), "metadata_untrusted"),
             "unverified, unparsed": (_signed(blob_signer(root_ca("Another Root")), deep),
                                      "metadata_untrusted")}
    for name, (content, code) in files.items():
        if isinstance(content, bytes):
            path = tmp_path / "blob.jwt"
            path.write_bytes(_signed(signer, content) if name == "signed, nested deep"
                             else content)
        else:
            path = content
        refused = _cli(regulated, "passkey", "metadata", "load", str(path),
                       "--trust-root", str(trust_root), "--json")
        assert refused.exit_code == 1, (name, refused.output)
        error = json.loads(refused.output)["error"]
        assert error["code"] == code, (name, error)
        if not isinstance(content, bytes):  # refused before it was read: the file is named
            assert str(path) in error["description"], (name, error)
        printed = _cli(regulated, "passkey", "metadata", "load", str(path),
                       "--trust-root", str(trust_root))
        assert printed.exit_code == 1 and printed.output.startswith(f"error {code}: ")
        assert "Traceback" not in printed.output, name
    # A trust root that never ends is refused too, and nothing was loaded.
    good = tmp_path / "good.jwt"
    good.write_bytes(metadata_blob(signer, [entry(KEY, maker)]))
    refused = _cli(regulated, "passkey", "metadata", "load", str(good),
                   "--trust-root", "/dev/zero", "--json")
    assert json.loads(refused.output)["error"]["code"] == "metadata_trust_root_invalid"
    shown = _cli(regulated, "passkey", "metadata", "show", "--json")
    assert json.loads(shown.output) == {"loaded": False}
