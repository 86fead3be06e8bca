"""`identityctl passkey list | rename | delete` on a running deployment."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from identityctl.store import audit
from tests.conftest import Service
from tests.support.authenticator import SoftAuthenticator
from tests.support.passkeys import PasskeyClient, assert_error


def test_list_rename_and_delete_a_users_passkeys(service: Service,
                                                 cli: Callable[..., Any]) -> None:
    client = PasskeyClient(service)
    user, authenticator = client.new_user(), SoftAuthenticator(backup_eligible=True)
    credential_id = client.enrolled(user, authenticator)["CredentialID"]

    listed = cli("passkey", "list", user.username, "--json")
    assert listed.exit_code == 0, listed.output
    [record] = json.loads(listed.output)
    assert (record["credentialId"], record["backupEligible"]) == (credential_id, True)
    table = cli("passkey", "list", user.id)
    assert table.exit_code == 0 and "Passkeys" in table.output

    renamed = cli("passkey", "rename", user.username, credential_id, "Work laptop", "--json")
    assert renamed.exit_code == 0, renamed.output
    assert json.loads(renamed.output)["name"] == "Work laptop"

    deleted = cli("passkey", "delete", user.username, credential_id, "--yes", "--json")
    assert deleted.exit_code == 0, deleted.output
    assert json.loads(cli("passkey", "list", user.id, "--json").output) == []
    assert_error(client.auth_start(user.id), 404, "no_passkeys")
    assert [e["event"] for e in audit.events(user_id=user.id)][:2] == ["passkey.delete",
                                                                       "passkey.rename"]


def test_cli_errors_name_what_is_wrong(service: Service, cli: Callable[..., Any]) -> None:
    user = PasskeyClient(service).new_user()
    missing = cli("passkey", "delete", user.username, "AAAA", "--yes", "--json")
    assert missing.exit_code == 1
    assert json.loads(missing.output)["error"]["code"] == "credential_not_found"
    unknown = cli("passkey", "list", "nobody", "--json")
    assert json.loads(unknown.output)["error"]["code"] == "user_not_found"
    blank = cli("passkey", "rename", user.username, "AAAA", "  ", "--json")
    assert json.loads(blank.output)["error"]["code"] == "missing_field"


def test_a_credential_id_that_starts_with_a_dash_is_an_argument_not_an_option(
        service: Service, cli: Callable[..., Any]) -> None:
    user = PasskeyClient(service).new_user()
    # Base64URL ids start with "-" one time in 64: "no such passkey", not "no such option".
    renamed = cli("passkey", "rename", user.username, "-3AbC", "Work laptop", "--json")
    assert json.loads(renamed.output)["error"]["code"] == "credential_not_found", renamed.output
    deleted = cli("passkey", "delete", user.username, "-3AbC", "--yes", "--json")
    assert json.loads(deleted.output)["error"]["code"] == "credential_not_found", deleted.output
