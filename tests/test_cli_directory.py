"""`identityctl user`, `ou` and `user-type` against a running deployment (Typer's runner)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from identityctl.security.passwords import verify_password
from identityctl.services.directory import users as directory_service
from identityctl.store import audit, directory
from tests.support.origins import TEST_ORIGIN

Cli = Callable[..., Any]
PASSWORD = "correct horse battery staple"


def ok_json(cli: Cli, *args: str, input: str | None = None) -> Any:
    """Run a command with --json; it must succeed and print one JSON document."""
    result = cli(*args, "--json", input=input)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def error_code(cli: Cli, *args: str, input: str | None = None) -> str:
    """Run a command with --json; it must fail with exit status 1 and a JSON error."""
    result = cli(*args, "--json", input=input)
    assert result.exit_code == 1, result.output
    error = json.loads(result.stdout)["error"]
    assert set(error) == {"code", "message", "description"}
    return error["code"]


def create_alice(cli: Cli, *extra: str) -> dict[str, Any]:
    return ok_json(cli, "user", "create", "--username", "alice", "--email", "alice@example.com",
                   "--password-stdin", *extra, input=PASSWORD + "\n")


# --- users ----------------------------------------------------------------------------------


def test_a_user_is_created_shown_listed_and_deleted(cli: Cli) -> None:
    alice = create_alice(cli, "--attribute", "given_name=Alice")
    assert alice["username"] == "alice"
    assert alice["attributes"] == {"email": "alice@example.com", "given_name": "Alice"}
    assert alice["hasPassword"] is True
    assert alice["type"] == "person"
    assert ok_json(cli, "user", "show", "alice") == alice
    assert ok_json(cli, "user", "show", alice["id"])["username"] == "alice"
    assert [user["username"] for user in ok_json(cli, "user", "list")] == ["alice"]
    deleted = ok_json(cli, "user", "delete", "alice", "--yes")
    assert deleted == {"deleted": alice["id"], "username": "alice"}
    assert error_code(cli, "user", "show", "alice") == "user_not_found"


def test_the_password_comes_from_stdin_and_is_stored_hashed(cli: Cli) -> None:
    alice = create_alice(cli)
    stored = directory.get_user(alice["id"]).password_hash
    assert stored.startswith("$argon2id$")
    assert verify_password(stored, PASSWORD)


def test_a_user_without_a_password_signs_in_with_passkeys_only(cli: Cli) -> None:
    bob = ok_json(cli, "user", "create", "--username", "bob")
    assert bob["hasPassword"] is False
    shown = cli("user", "show", "bob")
    assert "none (passkeys only)" in shown.stdout


def test_people_get_a_table_and_a_record(cli: Cli) -> None:
    create_alice(cli)
    listing = cli("user", "list")
    assert listing.exit_code == 0
    assert "Username" in listing.stdout and "alice" in listing.stdout
    assert "alice@example.com" in cli("user", "show", "alice").stdout


def test_unknown_user_is_user_not_found(cli: Cli) -> None:
    for command in (["show"], ["delete", "--yes"], ["disable"], ["set-password"]):
        assert error_code(cli, "user", *command, "nobody", input=PASSWORD + "\n") \
            == "user_not_found"
    result = cli("user", "show", "nobody")
    assert result.exit_code == 1
    assert "user_not_found" in result.stderr and "nobody" in result.stderr
    assert "Traceback" not in result.output


def test_duplicate_username_is_username_taken(cli: Cli) -> None:
    create_alice(cli)
    assert error_code(cli, "user", "create", "--username", "alice") == "username_taken"


@pytest.mark.parametrize("password", ["short", "password", "alice"])
def test_weak_passwords_are_refused(cli: Cli, password: str) -> None:
    assert error_code(cli, "user", "create", "--username", "alice", "--password-stdin",
                      input=password + "\n") == "weak_password"
    assert error_code(cli, "user", "show", "alice") == "user_not_found"


def test_set_password_asks_twice_and_never_takes_it_as_an_argument(cli: Cli) -> None:
    alice = create_alice(cli)
    new = "a different long passphrase"
    mismatch_then_match = f"{new}\ntypo\n{new}\n{new}\n"
    result = cli("user", "set-password", "alice", input=mismatch_then_match)
    assert result.exit_code == 0, result.output
    assert new not in result.output
    assert verify_password(directory.get_user(alice["id"]).password_hash, new)
    assert cli("user", "set-password", "alice", new).exit_code == 2


def test_set_password_from_stdin_checks_the_policy(cli: Cli) -> None:
    create_alice(cli)
    assert error_code(cli, "user", "set-password", "alice", "--password-stdin",
                      input="12345678\n") == "weak_password"
    changed = ok_json(cli, "user", "set-password", "alice", "--password-stdin",
                      input="another good passphrase\n")
    assert changed["hasPassword"] is True
    assert audit.events(event="user.password_set")[0]["actor"] == "cli"


def test_delete_asks_first(cli: Cli) -> None:
    create_alice(cli)
    declined = cli("user", "delete", "alice", input="n\n")
    assert declined.exit_code == 1
    assert ok_json(cli, "user", "show", "alice")["username"] == "alice"
    accepted = cli("user", "delete", "alice", input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert error_code(cli, "user", "show", "alice") == "user_not_found"


def test_disable_enable_and_unlock(cli: Cli) -> None:
    create_alice(cli)
    assert ok_json(cli, "user", "disable", "alice")["status"] == "disabled"
    assert error_code(cli, "user", "unlock", "alice") == "account_disabled"
    assert ok_json(cli, "user", "enable", "alice")["status"] == "active"
    directory_service.set_status("alice", "locked", origin=TEST_ORIGIN)
    assert ok_json(cli, "user", "unlock", "alice")["status"] == "active"


def test_attributes_follow_the_user_type_schema(cli: Cli) -> None:
    assert error_code(cli, "user", "create", "--username", "alice", "--attribute",
                      "shoe_size=42") == "invalid_field"
    assert error_code(cli, "user", "create", "--username", "alice", "--attribute",
                      "given_name") == "invalid_field"
    create_alice(cli)
    assert error_code(cli, "user", "create", "--username", "bob", "--email",
                      "alice@example.com, bob@example.com") == "invalid_email"
    # An address nobody proved blocks nobody (tests/test_email_addresses.py).
    assert ok_json(cli, "user", "create", "--username", "bob", "--email",
                   "alice@example.com")["attributes"] == {"email": "alice@example.com"}


def test_update_merges_attributes_and_keeps_unique_values_of_the_same_user(cli: Cli) -> None:
    create_alice(cli, "--attribute", "family_name=Liddell")
    updated = ok_json(cli, "user", "update", "alice", "--email", "alice@example.com",
                      "--attribute", "given_name=Alice", "--unset", "family_name")
    assert updated["attributes"] == {"email": "alice@example.com", "given_name": "Alice"}


def test_typed_attributes_are_converted_from_text(cli: Cli, tmp_path: Path) -> None:
    schema = tmp_path / "employee.json"
    schema.write_text(json.dumps({"badge": {"type": "number", "required": True},
                                  "contractor": {"type": "boolean"}}))
    ok_json(cli, "user-type", "create", "--name", "employee", "--schema-file", str(schema))
    carol = ok_json(cli, "user", "create", "--username", "carol", "--type", "employee",
                    "--attribute", "badge=42", "--attribute", "contractor=true")
    assert carol["attributes"] == {"badge": 42, "contractor": True}
    assert error_code(cli, "user", "create", "--username", "dave", "--type", "employee",
                      "--attribute", "badge=forty") == "invalid_field"
    assert error_code(cli, "user", "create", "--username", "dave", "--type",
                      "employee") == "invalid_field"


# --- organization units ---------------------------------------------------------------------


def test_organization_units_form_a_tree(cli: Cli) -> None:
    emea = ok_json(cli, "ou", "create", "--handle", "emea", "--name", "EMEA")
    sales = ok_json(cli, "ou", "create", "--handle", "sales", "--parent", "emea")
    assert sales["parent"] == emea["id"]
    assert sales["name"] == "sales"
    assert {unit["handle"] for unit in ok_json(cli, "ou", "list")} == {"default", "emea",
                                                                       "sales"}
    assert "emea" in cli("ou", "list").stdout
    assert error_code(cli, "ou", "update", "emea", "--parent", "sales") == "ou_cycle"
    assert error_code(cli, "ou", "update", "emea", "--parent", "emea") == "ou_cycle"
    moved = ok_json(cli, "ou", "update", "sales", "--top-level", "--description", "Sellers")
    assert (moved["parent"], moved["description"]) == (None, "Sellers")
    assert ok_json(cli, "ou", "show", "sales") == moved


def test_organization_units_in_use_are_kept(cli: Cli) -> None:
    assert error_code(cli, "ou", "delete", "default", "--yes") == "ou_in_use"
    ok_json(cli, "ou", "create", "--handle", "spare")
    assert ok_json(cli, "ou", "delete", "spare", "--yes")["handle"] == "spare"
    assert error_code(cli, "ou", "show", "spare") == "ou_not_found"
    assert error_code(cli, "ou", "create", "--handle", "Not A Handle") == "invalid_field"
    assert error_code(cli, "ou", "create", "--handle", "default") == "ou_exists"


# --- user types -----------------------------------------------------------------------------


def test_user_types_are_managed_with_schema_files(cli: Cli, tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"email": {"type": "string", "unique": True}}))
    ok_json(cli, "ou", "create", "--handle", "staff")
    created = ok_json(cli, "user-type", "create", "--name", "employee", "--ou", "staff",
                      "--schema-file", str(schema), "--self-registration")
    assert created["schema"] == {"email": {"type": "string", "unique": True}}
    assert created["allowSelfRegistration"] is True
    assert [kind["name"] for kind in ok_json(cli, "user-type", "list")] == ["employee",
                                                                           "person"]
    schema.write_text(json.dumps({"email": {"type": "string"}, "age": {"type": "number"}}))
    updated = ok_json(cli, "user-type", "update", "employee", "--no-self-registration",
                      "--schema-file", str(schema))
    assert updated["allowSelfRegistration"] is False
    assert set(updated["schema"]) == {"email", "age"}
    assert ok_json(cli, "user-type", "show", created["id"]) == updated
    assert ok_json(cli, "user-type", "delete", "employee", "--yes")["name"] == "employee"
    assert error_code(cli, "user-type", "show", "employee") == "user_type_not_found"


def test_bad_schemas_and_types_in_use_are_refused(cli: Cli, tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"age": {"type": "integer"}}))
    assert error_code(cli, "user-type", "create", "--name", "robot", "--schema-file",
                      str(schema)) == "invalid_field"
    schema.write_text("{not json")
    assert error_code(cli, "user-type", "create", "--name", "robot", "--schema-file",
                      str(schema)) == "malformed_json"
    create_alice(cli)
    assert error_code(cli, "user-type", "delete", "person", "--yes") == "user_type_in_use"


def test_an_admin_sees_whose_address_is_verified_and_who_cannot_recover(cli: Cli) -> None:
    ok_json(cli, "user", "create", "--username", "ada", "--email", "ada@example.com",
            "--email-verified")
    ok_json(cli, "user", "create", "--username", "bob", "--email", "bob@example.com")
    ok_json(cli, "user", "create", "--username", "cy")
    listed = {user["username"]: user for user in ok_json(cli, "user", "list")}
    assert [listed[name]["emailVerified"] for name in ("ada", "bob", "cy")] == [
        True, False, False]
    shown = " ".join(cli("user", "show", "ada").stdout.split())
    assert "email ada@example.com (verified)" in shown
    # This deployment sends no mail: a verified address alone is no way back.
    assert "can recover no (only an administrator can help)" in shown
    assert [user["username"] for user in ok_json(cli, "user", "list",
                                                 "--cannot-recover")] == ["ada", "bob", "cy"]
    ok_json(cli, "user", "recovery-codes", "ada")
    assert ok_json(cli, "user", "show", "ada")["recoveryCodesLeft"] == 10
    assert "can recover yes: 10 recovery code(s)" in " ".join(
        cli("user", "show", "ada").stdout.split())
    unable = ok_json(cli, "user", "list", "--cannot-recover")
    assert [(user["username"], user["canRecover"]) for user in unable] == [
        ("bob", False), ("cy", False)]
    table = cli("user", "list", "--cannot-recover").stdout
    # (ada as a word: a random id may hold the letters "ada")
    assert "bob@example.com" in table and "verified)" in table \
        and not re.search(r"\bada\b", table)
