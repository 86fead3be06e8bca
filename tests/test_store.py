"""The store, on SQLite and on PostgreSQL: schema versions, records, constraints, atomicity.

Every test runs once per database of the `store_url` fixture (PostgreSQL when
IDENTITYCTL_TEST_PG_URL names a server, as scripts/test.sh arranges).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from identityctl.errors import Conflict, NotFound, ServiceUnavailable
from identityctl.store import catalog, db, directory, migrations, passkeys
from identityctl.store.directory import UserRecord
from identityctl.store.models import AuthorizationCode, SchemaVersion, new_id, now
from tests.support.threads import run_at_once

NESTED_JSON = {"name": "Zoë 😀", "flag": True, "count": 3, "ratio": 0.5, "none": None,
               "list": [1, "two", {"three": [False]}]}


def make_ou(handle: str = "staff", parent_id: str | None = None) -> dict[str, Any]:
    return directory.create_ou(handle=handle, name=handle.title(), parent_id=parent_id)


def make_user_type(ou_id: str, name: str = "person") -> dict[str, Any]:
    return directory.create_user_type(name=name, ou_id=ou_id, allow_self_registration=True,
                                      schema={"email": {"type": "string", "unique": True}})


def make_user(username: str = "alice", attributes: dict[str, Any] | None = None) -> UserRecord:
    ou = directory.find_ou("staff") or make_ou()
    kind = directory.find_user_type("person") or make_user_type(ou["id"])
    return directory.create_user(username=username, user_handle=f"handle-{username}",
                                 user_type_id=kind["id"], ou_id=ou["id"],
                                 attributes=attributes or {}, password_hash=None)


def make_application(name: str = "Shop", client_id: str = "shop-client") -> dict[str, Any]:
    return catalog.create_application(
        name=name, description="", template="SPA", ouId=None, authFlowId=None,
        registrationFlowId=None, isRegistrationFlowEnabled=False, themeId=None,
        allowedUserTypes=[], clientId=client_id, clientSecretHash=None,
        oauth={"redirectUris": ["https://shop.example.com/cb"], "publicClient": True})


def make_flow(handle: str = "login", flow_type: str = "AUTHENTICATION") -> dict[str, Any]:
    return catalog.create_flow(handle=handle, name="Login", flow_type=flow_type,
                               nodes=[{"id": "start", "type": "START", "onSuccess": "end"},
                                      {"id": "end", "type": "END", "meta": NESTED_JSON}])


# --- schema versions ------------------------------------------------------------------------


def test_a_migrated_store_records_every_version_once(store_url: str) -> None:
    versions = [row.version for row in SchemaVersion.select().order_by(SchemaVersion.version)]
    assert versions == [number for number, _, _ in migrations.MIGRATIONS]
    assert migrations.current_version() == migrations.LATEST_VERSION


def test_upgrading_again_changes_nothing(store_url: str) -> None:
    make_user()
    assert migrations.upgrade() == []
    assert SchemaVersion.select().count() == len(migrations.MIGRATIONS)
    assert directory.find_user("alice") is not None


OPEN_SESSIONS_INDEX = ["user_id", "ceremony", "scope", "superseded"]


def _session_indexes() -> list[list[str]]:
    return [index.columns for index in db.database.get_indexes("ceremony_session")]


def test_a_version_1_store_gains_the_open_sessions_index(store_url: str) -> None:
    name = next(index.name for index in db.database.get_indexes("ceremony_session")
                if index.columns == OPEN_SESSIONS_INDEX)
    db.database.execute_sql(f'DROP INDEX "{name}"')
    SchemaVersion.delete().where(SchemaVersion.version > 1).execute()
    assert migrations.upgrade() == [f"{number}: {description}" for number, description, _
                                    in migrations.MIGRATIONS if number > 1]
    assert OPEN_SESSIONS_INDEX in _session_indexes()
    assert ["user_id", "ceremony", "superseded"] not in _session_indexes()  # replaced by 3


def test_a_version_4_store_loses_the_never_used_locked_until(store_url: str) -> None:
    db.database.execute_sql('ALTER TABLE "user" ADD COLUMN "locked_until" DOUBLE PRECISION')
    SchemaVersion.delete().where(SchemaVersion.version > 4).execute()
    assert migrations.upgrade() == [f"{number}: {description}" for number, description, _
                                    in migrations.MIGRATIONS if number > 4]
    assert "locked_until" not in {column.name for column in db.database.get_columns("user")}
    assert make_user("after").status == "active"


# --- records --------------------------------------------------------------------------------


def test_organization_units_form_a_tree_and_can_be_renamed(store_url: str) -> None:
    parent = make_ou("emea")
    child = make_ou("sales", parent_id=parent["id"])
    assert directory.find_ou("sales") == child
    assert child["parent"] == parent["id"]
    assert directory.update_ou(child["id"], name="EMEA Sales")["name"] == "EMEA Sales"
    assert [unit["handle"] for unit in directory.list_ous()] == ["emea", "sales"]
    directory.delete_ou(child["id"])
    assert directory.find_ou(child["id"]) is None


def test_user_types_keep_their_schema(store_url: str) -> None:
    kind = make_user_type(make_ou()["id"])
    assert directory.find_user_type(kind["id"]) == kind
    changed = directory.update_user_type(kind["id"], schema=NESTED_JSON,
                                         allow_self_registration=False)
    assert changed["schema"] == NESTED_JSON
    assert changed["allowSelfRegistration"] is False
    directory.delete_user_type(kind["id"])
    assert directory.list_user_types() == []


def test_users_are_found_by_id_username_and_handle(store_url: str) -> None:
    user = make_user(attributes=NESTED_JSON)
    assert directory.find_user(user.id) == user
    assert directory.find_user("alice") == user
    assert directory.find_user_by_handle("handle-alice") == user
    assert directory.get_user(user.id).attributes == NESTED_JSON
    updated = directory.update_user(user.id, status="disabled", password_hash="$argon2id$x")
    assert (updated.status, updated.password_hash) == ("disabled", "$argon2id$x")
    assert updated.updated_at >= user.updated_at
    assert [u.username for u in directory.list_users()] == ["alice"]
    directory.delete_user(user.id)
    with pytest.raises(NotFound) as missing:
        directory.get_user(user.id)
    assert missing.value.code == "user_not_found"


def test_a_credential_read_with_its_owner_gives_both_records_as_their_own_reads(
        store_url: str) -> None:
    user = make_user(attributes=NESTED_JSON)
    passkeys.insert_credential(
        credential_id="cred-1", user_id=user.id, public_key=b"\x01\x02", algorithm=-7,
        sign_count=3, transports=["internal"], aaguid="", attestation_format="none",
        backup_eligible=True, backup_state=False, user_verified=True, name="Laptop", now=now())
    stored = passkeys.find_credential("cred-1")
    assert passkeys.find_credential_with_owner("cred-1") == (passkeys.SignInCredential(
        credential_id="cred-1", user_id=user.id, public_key=stored.public_key, sign_count=3,
        backup_eligible=True), directory.get_user(user.id))
    assert passkeys.find_credential_with_owner("cred-2") is None


def test_themes_round_trip_their_document(store_url: str) -> None:
    theme = catalog.create_theme(handle="ocean", display_name="Ocean", description="Blue",
                                 theme=NESTED_JSON)
    assert catalog.find_theme("ocean")["theme"] == NESTED_JSON
    assert catalog.update_theme(theme["id"], display_name="Deep")["displayName"] == "Deep"
    catalog.delete_theme(theme["id"])
    assert catalog.list_themes() == []


def test_flows_are_unique_per_handle_and_type(store_url: str) -> None:
    login = make_flow()
    signup = make_flow(flow_type="REGISTRATION")
    assert catalog.find_flow_by_handle("login", "REGISTRATION") == signup
    assert catalog.get_flow(login["id"])["nodes"][1]["meta"] == NESTED_JSON
    total, page = catalog.list_flows(flow_type="AUTHENTICATION")
    assert (total, [flow["id"] for flow in page]) == (1, [login["id"]])
    assert catalog.update_flow(login["id"], name="Sign in")["name"] == "Sign in"
    catalog.delete_flow(login["id"])
    assert catalog.list_flows()[0] == 1


def test_applications_keep_oauth_settings_and_never_show_the_secret_hash(
        store_url: str) -> None:
    application = make_application()
    assert catalog.find_application_by_client_id("shop-client") == application
    config = application["inboundAuthConfig"][0]["config"]
    assert config["clientId"] == "shop-client"
    assert config["redirectUris"] == ["https://shop.example.com/cb"]
    assert "clientSecretHash" not in str(application)
    catalog.update_application(application["id"], clientSecretHash="$argon2id$y")
    assert catalog.client_secret_hash("shop-client") == "$argon2id$y"
    catalog.delete_application(application["id"])
    with pytest.raises(NotFound):
        catalog.get_application(application["id"])


def test_missing_rows_are_not_found_with_the_record_code(store_url: str) -> None:
    for attempt, code in [(lambda: directory.update_ou("nope", name="x"), "ou_not_found"),
                          (lambda: directory.delete_user("nope"), "user_not_found"),
                          (lambda: catalog.delete_theme("nope"), "theme_not_found"),
                          (lambda: catalog.get_flow("nope"), "flow_not_found")]:
        with pytest.raises(NotFound) as missing:
            attempt()
        assert missing.value.code == code


def test_an_id_wins_over_a_username_that_spells_it(store_url: str) -> None:
    """Usernames are chosen at sign-up, so one may spell another user's id: a lookup by id
    (tokens, codes, sessions) must never find the other user, whatever order rows come in."""
    alice = make_user("alice")
    mallory = make_user(alice.id)
    assert directory.find_user_by_id(alice.id).id == alice.id
    assert directory.find_user_by_username(alice.id).id == mallory.id
    assert directory.find_user(alice.id).id == alice.id
    assert directory.find_user(mallory.id).id == mallory.id
    assert directory.find_user("alice").id == alice.id
    assert directory.find_user_by_username(mallory.id) is None


def _start(user_id: str, token_hash: str, ceremony: str = passkeys.AUTHENTICATION, *,
           scope: str = "address:10.0.0.1") -> None:
    moment = now()
    passkeys.create_session(token_hash=token_hash, ceremony=ceremony, user_id=user_id,
                            scope=scope, rp_id="localhost", challenge="c", state={},
                            now=moment, expires_at=moment + 300)


def test_a_start_supersedes_only_that_users_open_sessions_of_that_ceremony_and_scope(
        store_url: str) -> None:
    alice, bob = make_user("alice"), make_user("bob")
    for token_hash in ("a1", "a2", "a3"):
        _start(alice.id, token_hash)
    _start(bob.id, "b1")
    _start(alice.id, "r1", passkeys.REGISTRATION)
    _start(alice.id, "f1", scope="flow:execution-1")  # somebody else's start for alice
    assert [passkeys.find_session(token).superseded for token in ("a1", "a2", "a3")] \
        == [True, True, False]
    assert not passkeys.find_session("b1").superseded
    assert not passkeys.find_session("r1").superseded
    assert not passkeys.find_session("f1").superseded


def test_superseding_searches_the_open_sessions_index_not_the_users_history(
        store_url: str) -> None:
    """Anyone may call start with a user id: each start must not cost more because of the
    sessions earlier starts left behind."""
    if not db.is_sqlite():
        pytest.skip("the plan is read with SQLite's EXPLAIN QUERY PLAN")
    alice = make_user("alice")
    statements: list[str] = []
    connection = db.database.connection()
    connection.set_trace_callback(statements.append)
    try:
        _start(alice.id, "a1")
    finally:
        connection.set_trace_callback(None)
    supersede = next(sql for sql in statements if sql.startswith("UPDATE"))
    plan = " ".join(str(row) for row in db.database.execute_sql("EXPLAIN QUERY PLAN "
                                                                 + supersede))
    assert "(user_id=? AND ceremony=? AND scope=? AND superseded=?)" in plan, plan


# --- constraints ----------------------------------------------------------------------------


def test_unique_values_are_conflicts_with_stable_codes(store_url: str) -> None:
    make_user()
    make_flow()
    make_application()
    catalog.create_theme(handle="ocean", display_name="Ocean", description="", theme={})
    duplicates = [
        (lambda: make_ou(), "ou_exists"),
        (lambda: make_user_type(directory.find_ou("staff")["id"]), "user_type_exists"),
        (lambda: make_user(), "username_taken"),
        (lambda: catalog.create_theme(handle="ocean", display_name="O", description="",
                                      theme={}), "theme_exists"),
        (lambda: make_flow(), "flow_exists"),
        (lambda: make_application(client_id="other-client"), "application_exists"),
        (lambda: make_application(name="Other"), "application_exists"),
    ]
    for attempt, code in duplicates:
        with pytest.raises(Conflict) as conflict:
            attempt()
        assert conflict.value.code == code


def test_renaming_onto_a_taken_username_is_a_conflict(store_url: str) -> None:
    make_user("alice")
    bob = make_user("bob")
    with pytest.raises(Conflict) as conflict:
        directory.update_user(bob.id, username="alice")
    assert conflict.value.code == "username_taken"


def test_records_still_in_use_cannot_be_deleted(store_url: str) -> None:
    user = make_user()
    parent = directory.find_ou("staff")
    make_ou("child", parent_id=parent["id"])
    with pytest.raises(Conflict) as ou_in_use:
        directory.delete_ou(parent["id"])
    assert ou_in_use.value.code == "ou_in_use"
    with pytest.raises(Conflict) as type_in_use:
        directory.delete_user_type(user.user_type_id)
    assert type_in_use.value.code == "user_type_in_use"
    assert directory.find_ou("staff") is not None
    assert directory.find_user_type("person") is not None


# --- atomicity ------------------------------------------------------------------------------


def test_a_transaction_keeps_all_its_writes_or_none(store_url: str) -> None:
    with pytest.raises(Conflict), db.transaction():
        ou = make_ou("first")
        make_user_type(ou["id"])
        make_ou("first")  # fails: everything above goes too
    assert directory.find_ou("first") is None
    assert directory.list_user_types() == []
    with db.transaction():
        make_user_type(make_ou("second")["id"])
    assert directory.find_user_type("person")["ouId"] == directory.find_ou("second")["id"]


def test_a_full_disk_in_the_middle_of_a_transaction_is_a_503_and_keeps_nothing(
        store_url: str) -> None:
    if not db.is_sqlite():
        pytest.skip("the database is filled with SQLite's max_page_count")
    make_ou("first")
    pages = db.database.execute_sql("PRAGMA page_count").fetchone()[0]
    db.database.execute_sql(f"PRAGMA max_page_count = {pages + 1}")
    try:
        with pytest.raises(ServiceUnavailable) as full, db.transaction():
            for number in range(200):  # SQLite rolls the transaction back itself
                make_ou(f"unit-{number}-" + "x" * 200)
    finally:
        db.database.execute_sql("PRAGMA max_page_count = 1073741823")
    assert full.value.code == "database_disk_full"
    assert [ou["handle"] for ou in directory.list_ous()] == ["first"]


def test_a_single_use_code_is_consumed_by_exactly_one_of_many_racers(store_url: str) -> None:
    user, application = make_user(), make_application()
    AuthorizationCode.create(code_hash="h", application=application["id"], user=user.id,
                             redirect_uri="https://shop.example.com/cb", auth_time=now(),
                             expires_at=now() + 60)
    racers = 8
    start = threading.Barrier(racers)
    wins: list[int] = []

    def consume() -> None:
        try:
            start.wait()
            # The pattern the OAuth layer relies on: one conditional UPDATE decides.
            wins.append(AuthorizationCode.update(consumed_at=now())
                        .where((AuthorizationCode.code_hash == "h")
                               & AuthorizationCode.consumed_at.is_null()).execute())
        finally:
            db.release_connection()  # back to the pool for the next thread

    run_at_once(consume, racers)
    assert sorted(wins) == [0] * (racers - 1) + [1]
    assert AuthorizationCode.get_by_id("h").consumed_at is not None


def test_a_previous_key_retires_only_once_it_stopped_signing_long_enough_ago(
        store_url: str) -> None:
    from identityctl.store import keys
    from identityctl.store.models import SigningKey

    for kid in ("k1", "k2", "k3"):
        keys.add_active_key(kid=kid, algorithm="ES256", private_pem="-", public_jwk={"kid": kid})
    # k1 was created long ago but signed until k2 arrived a moment ago.
    SigningKey.update(created_at=now() - 10_000).where(SigningKey.kid == "k1").execute()
    SigningKey.update(created_at=now() - 5).where(SigningKey.kid == "k2").execute()
    assert keys.retire_previous_keys(now() - 600) == 0
    SigningKey.update(created_at=now() - 1_000).where(SigningKey.kid == "k2").execute()
    assert keys.retire_previous_keys(now() - 600) == 1
    assert [key.kid for key in keys.published_keys()] == ["k3", "k2"]


@pytest.fixture
def own_statements() -> Iterator[None]:
    """Statements a test makes are not the store's: forget them afterwards (every connect
    compiles every statement made)."""
    from identityctl.store.compiled import CompiledQuery

    made = len(CompiledQuery.every)
    yield
    del CompiledQuery.every[made:]


def test_a_compiled_query_binds_values_by_name_whatever_order_peewee_emits_them(
        store_url: str, own_statements: None) -> None:
    from identityctl.store.compiled import CompiledQuery
    from identityctl.store.models import User

    carol = make_user("carol")
    by_name = CompiledQuery(lambda username: User.select(User.id).where(
        User.username == username))
    assert by_name.scalar(username="carol") == carol.id
    assert by_name.scalar(username="nobody") is None  # the same SQL text, another value
    # The builder names its parameters in one order, peewee emits them in the other.
    swapped = CompiledQuery(lambda first, second: User.select(User.id).where(
        (User.username == second) & (User.id == first)))
    assert swapped.scalar(first=carol.id, second="carol") == carol.id
    assert swapped.scalar(first="someone else", second="carol") is None
    with pytest.raises(TypeError, match="by name"):
        swapped.scalar(carol.id, "carol")


def test_a_statement_constant_is_a_parameter_with_a_default(store_url: str,
                                                            own_statements: None) -> None:
    from identityctl.store.compiled import CompiledQuery
    from identityctl.store.models import User

    carol = make_user("carol")
    active = CompiledQuery(lambda username, status="active": User.select(User.id).where(
        (User.username == username) & (User.status == status)))
    assert active.scalar(username="carol") == carol.id
    assert active.scalar(username="carol", status="disabled") is None


def test_a_builder_that_cannot_be_bound_by_name_is_refused_when_compiled(
        store_url: str, own_statements: None) -> None:
    from identityctl.store.compiled import CompiledQuery, StatementError
    from identityctl.store.models import User

    hidden_constant = CompiledQuery(lambda username: User.select(User.id).where(
        (User.username == username) & (User.status == "active")))
    with pytest.raises(StatementError, match=r"'active'.*not a parameter"):
        hidden_constant.compile()
    unused = CompiledQuery(lambda username, status: User.select(User.id).where(
        User.username == username))
    with pytest.raises(StatementError, match="status"):
        unused.compile()


def test_every_statement_of_the_store_compiles_on_this_database(store_url: str) -> None:
    from identityctl.store import compiled, db

    compiled.compile_statements()  # what connect() did: it would have raised
    kind = type(db.database.obj)
    assert len(compiled.CompiledQuery.every) >= 20
    for statement in compiled.CompiledQuery.every:
        assert any(key[0] is kind for key in statement._compiled), statement._build


def test_new_ids_are_random_version_4_uuids_in_their_usual_text_form() -> None:
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, 4, uuid.RFC_4122)
