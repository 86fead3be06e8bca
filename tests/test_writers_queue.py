"""A `serve` worker's SQLite writes take turns with its siblings' on ``<database>-writers``
(store/writers.py): a write transaction holds the lock file until it ends however it ends, a
write waits for a sibling's and then goes ahead, a write that cannot have it within the busy
timeout is 503 database_busy, reads never wait for it, and a process that does not queue
its writes ignores it.

Each thread has its own connection, so two threads here are two siblings."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import peewee
import pytest

from identityctl.errors import ServiceUnavailable
from identityctl.store import db, migrations, writers
from identityctl.store import throttle as counters
from identityctl.store.db import transaction


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Path]:
    """A migrated SQLite store whose connections queue their writes, busy timeout 0.5 s."""
    path = tmp_path / "store.db"
    db.connect(f"sqlite:///{path}", busy_timeout=0.5)
    migrations.upgrade()
    db.close()
    db.queue_writes()
    yield path
    db.close()


@contextlib.contextmanager
def lock_file_held(database: Path) -> Iterator[None]:
    """The writers' lock file held by someone else: a sibling stuck in its write."""
    fd = os.open(f"{database}-writers", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def lock_file_is_free(database: Path) -> bool:
    fd = os.open(f"{database}-writers", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def count(key: str) -> None:
    counters.count(key, now=time.time(), window=60)


def in_thread(work: Callable[[], None]) -> tuple[threading.Event, list[BaseException]]:
    done, errors = threading.Event(), []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # handed to the test
            errors.append(exc)
        finally:
            db.release_connection()
            done.set()

    threading.Thread(target=run, daemon=True).start()
    return done, errors


def a_write_under_way(key: str) -> tuple[threading.Event, threading.Event, list[BaseException]]:
    """A sibling's write transaction, in a thread, under way once this returns: set the
    first event to commit it; the second is set when it has."""
    began, commit = threading.Event(), threading.Event()

    def write() -> None:
        with transaction():
            count(key)
            began.set()
            commit.wait(10)

    done, errors = in_thread(write)
    assert began.wait(10)
    return commit, done, errors


def test_a_write_transaction_holds_the_lock_file_until_it_commits(database: Path) -> None:
    commit, done, errors = a_write_under_way("first")
    assert not lock_file_is_free(database)
    commit.set()
    assert done.wait(10) and not errors
    assert lock_file_is_free(database)
    assert "first" in counters.counters(["first"])


def test_a_write_waits_for_a_siblings_turn_then_goes_ahead(database: Path) -> None:
    commit, first_done, first_errors = a_write_under_way("first")
    second_done, second_errors = in_thread(lambda: count("second"))
    assert not second_done.wait(0.2)  # the sibling's write is under way: its turn waits
    commit.set()
    assert first_done.wait(10) and second_done.wait(10)
    assert not first_errors and not second_errors
    assert set(counters.counters(["first", "second"])) == {"first", "second"}


def test_a_write_that_cannot_have_its_turn_within_the_busy_timeout_is_503(
        database: Path) -> None:
    with lock_file_held(database):
        with pytest.raises(ServiceUnavailable) as refused, transaction():
            count("never")
        assert refused.value.code == "database_busy"
        with pytest.raises(peewee.OperationalError, match="locked"):
            count("never either")  # outside a transaction: the store's error, mapped above it
    assert counters.counters(["never", "never either"]) == {}


def test_reads_do_not_wait_for_a_siblings_write(database: Path) -> None:
    count("there")
    with lock_file_held(database):
        assert set(counters.counters(["there"])) == {"there"}


def test_the_lock_file_is_let_go_however_a_write_ends(database: Path) -> None:
    with pytest.raises(RuntimeError), transaction():
        count("rolled back")
        raise RuntimeError("the transaction's work failed")
    assert lock_file_is_free(database)
    assert counters.counters(["rolled back"]) == {}

    with pytest.raises(peewee.IntegrityError):
        db.database.execute_sql("INSERT INTO throttle (key) VALUES (NULL)")
    assert lock_file_is_free(database)

    began, hold = threading.Event(), threading.Event()

    def closed_in_a_transaction() -> None:
        db.database.execute_sql("BEGIN IMMEDIATE")
        count("left open")
        began.set()
        hold.wait(10)
        db.close()  # every connection, this thread's open transaction with it

    done, errors = in_thread(closed_in_a_transaction)
    assert began.wait(10)
    assert not lock_file_is_free(database)
    hold.set()
    assert done.wait(10) and not errors
    assert lock_file_is_free(database)


def test_a_process_that_does_not_queue_its_writes_ignores_the_lock_file(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    db.connect(f"sqlite:///{path}", busy_timeout=0.5)
    try:
        migrations.upgrade()
        with lock_file_held(path):
            count("a command's write")
        assert set(counters.counters(["a command's write"])) == {"a command's write"}
    finally:
        db.close()


def test_a_part_of_no_transaction_takes_its_turn_too(database: Path) -> None:
    """A savepoint outside a transaction (a spent DPoP proof id, say) is one: it waits for
    the lock file as every write does."""
    with lock_file_held(database), pytest.raises(ServiceUnavailable), db.savepoint():
        count("never")
    with db.savepoint():
        count("once free")
    assert set(counters.counters(["never", "once free"])) == {"once free"}


def test_the_connections_own_commit_and_execute_take_and_let_go_of_the_lock_file(
        database: Path) -> None:
    connection = db.database.connection()
    connection.execute("BEGIN IMMEDIATE")
    assert not lock_file_is_free(database)
    connection.commit()
    assert lock_file_is_free(database)
    with lock_file_held(database), pytest.raises(sqlite3.OperationalError, match="locked"):
        connection.execute("DELETE FROM throttle")


def test_a_worker_checkpoints_after_letting_go_of_the_lock_file_not_inside_a_commit(
        database: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoints: list[bool] = []
    monkeypatch.setattr(writers, "CHECKPOINT_EVERY", 1)
    connection = db.database.connection()
    original = type(connection).checkpoint

    def recorded(self: Any) -> None:
        checkpoints.append(lock_file_is_free(database))
        original(self)

    monkeypatch.setattr(type(connection), "checkpoint", recorded)
    assert connection.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    count("written")
    assert checkpoints == [True]


def test_a_lock_file_that_cannot_be_opened_leaves_the_writes_to_sqlites_waits(
        database: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    Path(f"{database}-writers").unlink(missing_ok=True)
    Path(f"{database}-writers").symlink_to(tmp_path / "elsewhere")
    count("still written")  # this thread's first connection: it cannot open the file
    assert set(counters.counters(["still written"])) == {"still written"}
    assert "cannot open" in caplog.text and "-writers" in caplog.text
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can create a file for another user")
def test_root_creates_the_lock_file_for_the_databases_owner(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    db.connect(f"sqlite:///{path}", busy_timeout=0.5)
    try:
        migrations.upgrade()
        db.close()
        os.chown(path, 65534, 65534)  # the service's user, say
        db.queue_writes()
        count("by root")
        assert os.stat(f"{path}-writers").st_uid == 65534
    finally:
        db.close()


def test_siblings_writing_and_reading_at_once_keep_the_wal_small(database: Path) -> None:
    """A checkpoint copies the WAL into the database, and the WAL starts over only when a
    write begins with all of it copied and no reader in it: with siblings writing in turn,
    one always began first, and the WAL grew by every page written (24 KB a token)."""
    def write_and_read(name: str) -> None:
        for number in range(3000):
            count(f"{name}-{number % 50}")
            counters.counters([f"{name}-{number % 50}"])

    siblings = [in_thread(lambda name=name: write_and_read(name)) for name in ("a", "b", "c")]
    for done, errors in siblings:
        assert done.wait(120)
        assert errors == []
    assert Path(f"{database}-wal").stat().st_size < 16 * 1024 * 1024  # 37 MB it was
