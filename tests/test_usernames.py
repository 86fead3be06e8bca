"""Usernames are one username without regard to case and Unicode form (RFC 8265
UsernameCaseMapped): the key function, sign-up and sign-in over HTTP, the CLI, the store on
SQLite and PostgreSQL (also when sign-ups race), and migration 3 on version-2 stores.
"""

from __future__ import annotations

import json
import threading
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import precis_i18n
import pytest
from typer.testing import CliRunner

from identityctl.cli.main import app as cli_app
from identityctl.config import load_config
from identityctl.errors import Conflict
from identityctl.security.usernames import username_key
from identityctl.services.directory import users as directory_service
from identityctl.store import db, directory, migrations
from identityctl.store.models import CeremonySession, SchemaVersion, now
from tests.conftest import (
    Service,
    _reset_postgres,
    free_port,
    make_deployment,
    pg_server_url,
    start_service,
)
from tests.support.flows import FlowClient
from tests.test_flow_execution import PASSWORD, make_application, sign_up, verified_assertion
from tests.test_store import make_user

FULLWIDTH_ALICE = "\uff41\uff4c\uff49\uff43\uff45"  # alice in fullwidth letters
FULLWIDTH_ALICE_UPPER = "\uff21\uff2c\uff29\uff23\uff25"
E_NFC = "\u00e9"  # é, one code point
E_NFD = "e\u0301"  # e + combining acute accent


# --- the key --------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["alice", "Alice", "ALICE", "aLiCe", FULLWIDTH_ALICE,
                                      FULLWIDTH_ALICE_UPPER])
def test_case_and_width_do_not_make_another_username(spelling: str) -> None:
    assert username_key(spelling) == "alice"


def test_nfd_and_nfc_spellings_are_one_username() -> None:
    assert E_NFC != E_NFD
    assert username_key(f"Ren{E_NFD}") == username_key(f"ren{E_NFC}") == f"ren{E_NFC}"
    assert username_key(f"REN{unicodedata.normalize('NFD', 'É')}") == f"ren{E_NFC}"


def test_sharp_s_is_kept_as_the_profile_lowercases_it() -> None:
    """UsernameCaseMapped maps to lowercase (not case folding): ß stays ß, capital ẞ becomes
    ß, and 'strasse' stays another username."""
    assert username_key("Straße") == username_key("STRAẞE") == "straße"
    assert username_key("STRASSE") == "strasse" != username_key("straße")


def test_the_key_is_the_profiles_enforced_form_and_a_fixed_point() -> None:
    profile = precis_i18n.get_profile("UsernameCaseMapped")
    for spelling in ("Alice", FULLWIDTH_ALICE, f"Jos{E_NFD}", "ΣΊΣΥΦΟΣ", "İstanbul", "Zoë",
                     "user+tag@example.com", "Ｔａｒｏ山田", "ｶﾀｶﾅ"):
        key = username_key(spelling)
        assert key == profile.enforce(spelling), spelling
        assert username_key(key) == key


def test_ascii_takes_a_shortcut_that_gives_the_profiles_answer() -> None:
    """Every printable ASCII character but the space is allowed by the profile, and the
    shortcut must give what the profile gives (or, for what it refuses, the fallback)."""
    profile = precis_i18n.get_profile("UsernameCaseMapped")
    for code in range(0x21, 0x7F):
        assert username_key(chr(code)) == profile.enforce(chr(code)), hex(code)
    assert username_key("Bob.Smith_1+x@Example-Mail.COM") == "bob.smith_1+x@example-mail.com"
    for refused in ("", "a b", "tab\there", "del\x7f"):
        assert username_key(refused) == refused.lower()


@pytest.mark.parametrize(("refused", "key"), [
    ("", ""),
    ("Alice Smith", "alice smith"),  # spaces are disallowed
    (FULLWIDTH_ALICE + " X", "alice x"),  # width mapped even when refused
    ("Stra\u00dfe Eins", "strasse eins"),  # the fallback case-folds: ß -> ss
    ("\ufb01nn", "finn"),  # ﬁ: a compatibility character
    (f"Caf{E_NFD} Noir", f"caf{E_NFC} noir"),  # NFC
    ("x\u200dy", "x\u200dy"),  # zero width joiner, kept
])
def test_text_the_profile_refuses_still_gets_a_key(refused: str, key: str) -> None:
    with pytest.raises(UnicodeError):
        precis_i18n.get_profile("UsernameCaseMapped").enforce(refused)
    assert username_key(refused) == key


def test_every_username_the_product_accepts_gets_the_profiles_key() -> None:
    """The product's rule (1-128 ASCII letters, digits, . _ @ + -) is inside the profile's,
    so no username accepted today falls back."""
    profile = precis_i18n.get_profile("UsernameCaseMapped")
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._@+-"
    for index in range(len(alphabet)):
        name = "a" + alphabet[index:] + alphabet[:index]
        assert directory_service.USERNAME_PATTERN.match(name[:128])
        assert username_key(name[:128]) == profile.enforce(name[:128])


# --- sign-up and sign-in over HTTP ----------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Service]:
    """identityctl over HTTP on a fresh SQLite file, and on PostgreSQL when one is given."""
    url = None
    if request.param == "postgresql":
        url = pg_server_url()
        _reset_postgres(url)
    running, stop = start_service(tmp_path, database_url=url)
    yield running
    stop()


def test_a_sign_up_as_alice_in_other_case_or_width_is_username_taken(served: Service) -> None:
    flow = FlowClient(served, make_application()["id"])
    assert sign_up(flow, "alice")["flowStatus"] == "COMPLETE"
    for spelling in ("Alice", "ALICE", "aLiCe"):
        flow.start("REGISTRATION")
        refused = flow.act("signup", username=spelling, password=PASSWORD)
        assert refused["failureReason"] == "username_taken", spelling
    # Fullwidth letters are outside the product's username rule: refused as invalid, and
    # never created.
    flow.start("REGISTRATION")
    assert flow.act("signup", username=FULLWIDTH_ALICE, password=PASSWORD)[
        "failureReason"] == "invalid_field"
    assert [user.username for user in directory.list_users()] == ["alice"]


def test_alice_signs_in_as_ALICE_with_her_passkey_and_her_password(served: Service) -> None:
    flow = FlowClient(served, make_application()["id"])
    sign_up(flow, "alice")
    alice = directory.find_user_by_username("alice")

    by_passkey = FlowClient(served, flow.application_id, authenticator=flow.authenticator)
    by_passkey.start()
    by_passkey.act("passkey", username="ALICE")
    assert len(by_passkey.additional("passkeyChallenge")["allowCredentials"]) == 1
    done = by_passkey.use_passkey()
    assert verified_assertion(served, done["assertion"])["sub"] == alice.id

    by_password = FlowClient(served, flow.application_id)
    by_password.start()
    done = by_password.act("password", username="Alice", password=PASSWORD)
    assert done["flowStatus"] == "COMPLETE"
    claims = verified_assertion(served, done["assertion"])
    assert (claims["sub"], claims["amr"]) == (alice.id, ["pwd"])


def test_sign_ups_racing_for_one_username_in_several_cases_make_one_user(
        served: Service) -> None:
    application_id = make_application()["id"]
    spellings = ["alice", "Alice", "ALICE", "aLIce"]
    racers = [FlowClient(served, application_id) for _ in spellings]
    for racer in racers:
        racer.start("REGISTRATION")
    start = threading.Barrier(len(racers))
    outcomes: dict[str, Any] = {}

    def sign_up_as(racer: FlowClient, spelling: str) -> None:
        start.wait()
        outcomes[spelling] = racer.act("signup", username=spelling, password=PASSWORD)

    threads = [threading.Thread(target=sign_up_as, args=pair)
               for pair in zip(racers, spellings, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    refused = sorted(spelling for spelling, step in outcomes.items()
                     if step.get("failureReason") == "username_taken")
    created = [user.username for user in directory.list_users()]
    assert len(created) == 1 and created[0] in spellings
    assert refused == sorted(set(spellings) - set(created))


# --- the CLI --------------------------------------------------------------------------------


def _json(result: Any) -> Any:
    return json.loads(result.stdout)


def test_identityctl_user_create_refuses_Alice_after_alice(cli: Callable[..., Any]) -> None:
    created = cli("user", "create", "--username", "alice", "--json")
    assert created.exit_code == 0, created.output
    for spelling in ("Alice", "ALICE"):
        refused = cli("user", "create", "--username", spelling, "--json")
        assert refused.exit_code == 1
        assert _json(refused)["error"]["code"] == "username_taken"
        assert spelling in _json(refused)["error"]["description"]
    shown = cli("user", "show", "ALICE", "--json")
    assert (shown.exit_code, _json(shown)["username"]) == (0, "alice")
    assert _json(shown)["id"] == _json(created)["id"]


def test_a_username_is_kept_as_typed_and_found_in_any_case(cli: Callable[..., Any]) -> None:
    created = _json(cli("user", "create", "--username", "Bob.Smith", "--json"))
    assert created["username"] == "Bob.Smith"
    for spelling in ("bob.smith", "BOB.SMITH", created["id"]):
        assert _json(cli("user", "show", spelling, "--json"))["username"] == "Bob.Smith"
    assert [user["username"] for user in _json(cli("user", "list", "--json"))] == ["Bob.Smith"]


# --- the store, on SQLite and PostgreSQL ----------------------------------------------------


def test_the_store_keeps_the_key_with_the_username_on_create_and_rename(
        store_url: str) -> None:
    alice = make_user("Alice")
    assert _stored_keys() == {alice.id: "alice"}
    assert directory.find_user_by_username(FULLWIDTH_ALICE).id == alice.id
    assert directory.find_user("ALICE").id == alice.id
    renamed = directory.update_user(alice.id, username="Alicia")
    assert renamed.username == "Alicia"
    assert _stored_keys() == {alice.id: "alicia"}
    assert directory.find_user_by_username("alice") is None
    assert directory.find_user_by_username("ALICIA").id == alice.id


def test_a_username_whose_key_is_taken_is_a_conflict(store_url: str) -> None:
    make_user("alice")
    bob = make_user("bob")
    for spelling in ("Alice", FULLWIDTH_ALICE, "ALICE"):
        with pytest.raises(Conflict) as conflict:
            make_user(spelling)
        assert conflict.value.code == "username_taken"
    with pytest.raises(Conflict) as conflict:
        directory.update_user(bob.id, username="ALICE")
    assert conflict.value.code == "username_taken"
    assert directory.get_user(bob.id).username == "bob"
    make_user(f"Jos{E_NFD}")
    for spelling in (f"jos{E_NFC}", f"JOS{unicodedata.normalize('NFD', 'É')}"):
        with pytest.raises(Conflict):
            make_user(spelling)


def test_creates_racing_for_one_key_leave_one_user(store_url: str) -> None:
    """The unique index decides, not a read before the write."""
    spellings = ["alice", "Alice", "ALICE", "aLiCe", FULLWIDTH_ALICE, "\uff21lice"]
    make_user("bob")  # the OU and the user type, made before the race
    start = threading.Barrier(len(spellings))
    results: dict[str, str] = {}

    def create(spelling: str) -> None:
        try:
            start.wait()
            make_user(spelling)
            results[spelling] = "created"
        except Conflict as conflict:
            results[spelling] = conflict.code
        finally:
            db.release_connection()  # back to the pool for the next thread

    threads = [threading.Thread(target=create, args=(spelling,)) for spelling in spellings]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results.values()) == ["created"] + ["username_taken"] * (len(spellings) - 1)
    winner = next(spelling for spelling, result in results.items() if result == "created")
    assert directory.find_user_by_username("alice").username == winner


def _stored_keys() -> dict[str, str]:
    return dict(db.database.execute_sql('SELECT "id", "username_key" FROM "user"').fetchall())


# --- migration 3 ----------------------------------------------------------------------------

OLD_SESSIONS_INDEX = ["user_id", "ceremony", "superseded"]
NEW_SESSIONS_INDEX = ["user_id", "ceremony", "scope", "superseded"]


def _as_version_2() -> None:
    """Take a migrated store back to schema version 2: no ``user.username_key``, no
    ``ceremony_session.scope``, the open sessions index on (user, ceremony, superseded)."""
    execute = db.database.execute_sql
    execute('DROP INDEX "user_username_key"')
    execute('ALTER TABLE "user" DROP COLUMN "username_key"')
    execute('DROP INDEX "ceremony_session_user_id_ceremony_scope_superseded"')
    execute('ALTER TABLE "ceremony_session" DROP COLUMN "scope"')
    execute('CREATE INDEX "ceremony_session_user_id_ceremony_superseded" '
            'ON "ceremony_session" ("user_id", "ceremony", "superseded")')
    SchemaVersion.delete().where(SchemaVersion.version > 2).execute()


def _rename_in_place(user_id: str, username: str) -> None:
    """What an older release let happen: a second spelling stored for another user."""
    db.database.execute_sql(f'UPDATE "user" SET "username" = {db.database.param} '
                            f'WHERE "id" = {db.database.param}', (username, user_id))


def _schema() -> dict[str, Any]:
    return {
        "columns": {table: [column.name for column in db.database.get_columns(table)]
                    for table in ("user", "ceremony_session")},
        "indexes": {table: sorted((index.name, tuple(index.columns), index.unique)
                                  for index in db.database.get_indexes(table))
                    for table in ("user", "ceremony_session")},
        "versions": [row.version for row in SchemaVersion.select().order_by(
            SchemaVersion.version)],
        "users": sorted(db.database.execute_sql(
            'SELECT "id", "username" FROM "user"').fetchall()),
    }


def _migrations_from(first: int) -> list[str]:
    """What :func:`migrations.upgrade` reports applying from migration ``first`` on."""
    return [f"{number}: {description}" for number, description, _ in migrations.MIGRATIONS
            if number >= first]


def _start_session(user_id: str, token_hash: str) -> None:
    """A ceremony session row that names no scope (as every row of a version-2 store)."""
    CeremonySession.insert(token_hash=token_hash, ceremony="authentication", user=user_id,
                           rp_id="localhost", challenge="c", state={}, superseded=False,
                           created_at=now(), expires_at=now() + 300).execute()


def test_a_clean_version_2_store_upgrades(store_url: str) -> None:
    alice, bob = make_user("alice"), make_user("bob")
    _start_session(alice.id, "a1")
    _as_version_2()
    _rename_in_place(bob.id, "Bob")
    assert "username_key" not in _schema()["columns"]["user"]
    assert migrations.current_version() == 2

    assert migrations.upgrade() == _migrations_from(3)
    assert migrations.current_version() == migrations.LATEST_VERSION
    assert _stored_keys() == {alice.id: "alice", bob.id: "bob"}
    if not db.is_sqlite():  # as in a fresh store: no default, every insert sets the key
        assert db.database.execute_sql(
            "SELECT column_default, is_nullable FROM information_schema.columns "
            "WHERE table_name = 'user' AND column_name = 'username_key'").fetchall() \
            == [(None, "NO")]
    indexes = {index.name: index for index in db.database.get_indexes("user")}
    assert indexes["user_username_key"].columns == ["username_key"]
    assert indexes["user_username_key"].unique
    sessions = [index.columns for index in db.database.get_indexes("ceremony_session")]
    assert NEW_SESSIONS_INDEX in sessions and OLD_SESSIONS_INDEX not in sessions
    assert db.database.execute_sql('SELECT "scope" FROM "ceremony_session"').fetchall() \
        == [("",)]  # the row from before the upgrade
    _start_session(bob.id, "b1")  # an insert that leaves scope to the database's default
    assert db.database.execute_sql('SELECT "scope" FROM "ceremony_session" WHERE '
                                   f'"token_hash" = {db.database.param}', ("b1",)).fetchall() \
        == [("",)]

    assert directory.find_user_by_username("BOB").id == bob.id
    assert directory.find_user("ALICE").id == alice.id
    with pytest.raises(Conflict) as conflict:
        make_user("ALICE")
    assert conflict.value.code == "username_taken"
    assert migrations.upgrade() == []


def test_a_version_1_store_upgrades_through_2_and_3(store_url: str) -> None:
    """Migration 2 creates the index of its day, not the one models.py describes now (which
    names a column that only migration 3 adds)."""
    alice = make_user("Alice")
    _start_session(alice.id, "a1")
    _as_version_2()
    db.database.execute_sql('DROP INDEX "ceremony_session_user_id_ceremony_superseded"')
    SchemaVersion.delete().where(SchemaVersion.version > 1).execute()
    assert migrations.upgrade() == _migrations_from(2)
    sessions = [index.columns for index in db.database.get_indexes("ceremony_session")]
    assert NEW_SESSIONS_INDEX in sessions and OLD_SESSIONS_INDEX not in sessions
    assert directory.find_user_by_username("alice").id == alice.id


def test_a_version_2_store_with_colliding_usernames_is_refused_and_left_as_it_was(
        store_url: str) -> None:
    alice, bob, carol, dave = (make_user(name) for name in ("alice", "bob", "carol", "dave"))
    erin, frank = make_user("erin"), make_user("frank")
    _as_version_2()
    _rename_in_place(bob.id, "Alice")
    _rename_in_place(carol.id, FULLWIDTH_ALICE_UPPER)
    _rename_in_place(frank.id, "ERIN")
    before = _schema()

    with pytest.raises(Conflict) as refused:
        migrations.upgrade()
    error = refused.value
    assert error.code == "usernames_collide"
    for user in (alice, bob, carol, erin, frank):
        assert user.id in error.description
    for username in ("alice", "Alice", FULLWIDTH_ALICE_UPPER, "erin", "ERIN"):
        assert f"'{username}'" in error.description
    assert dave.id not in error.description
    assert "identityctl user delete" in error.description
    assert 'UPDATE "user" SET username' in error.description
    assert _schema() == before
    assert migrations.current_version() == 2

    # Once the operator renamed the extra spellings, the upgrade goes through.
    _rename_in_place(bob.id, "bob")
    _rename_in_place(carol.id, "carol")
    _rename_in_place(frank.id, "frank")
    assert migrations.upgrade() == _migrations_from(3)
    assert directory.find_user_by_username("ERIN").id == erin.id


def test_identityctl_db_upgrade_names_the_colliding_users(tmp_path: Path) -> None:
    config_path = make_deployment(tmp_path, port=free_port())
    db.connect(load_config(config_path).database_url)
    try:
        migrations.upgrade()
        alice, bob = make_user("alice"), make_user("bob")
        _as_version_2()
        _rename_in_place(bob.id, "ALICE")
    finally:
        db.close()

    result = CliRunner().invoke(cli_app, ["--config", str(config_path), "db", "upgrade",
                                          "--json"], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "usernames_collide"
    assert f"'alice' (id {alice.id})" in error["description"]
    assert f"'ALICE' (id {bob.id})" in error["description"]
    db.close()
