"""`identityctl serve --workers 2`: the supervisor accepts every connection and hands it to
the worker with the fewest open ones; a dead worker is replaced while its peers serve on;
the app sees each connection's own peer address; each process keeps to a core of its own.

Which worker holds a connection is read from Linux's /proc: the server side of the
connection (/proc/net/tcp) is a socket among that worker's open files.
"""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from identityctl.server.workers import MIN_WORKER_UPTIME
from tests.conftest import free_port
from tests.support.processes import stop, wait_for_health

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")


@dataclass
class Served:
    """A running `serve --workers 2`: its port, its supervisor and its log."""

    port: int
    process: subprocess.Popen[str]
    log: Path
    started: float

    def cores(self, pid: int) -> set[str]:
        """The cores each thread of process ``pid`` may run on, as /proc lists them."""
        return {_status(task / "status")["Cpus_allowed_list"]
                for task in Path(f"/proc/{pid}/task").iterdir()}

    def workers(self) -> list[int]:
        pid = self.process.pid
        return [int(child) for child in
                Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]

    def connect(self, source: str = "127.0.0.1") -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30,
                                                source_address=(source, 0))
        connection.connect()
        return connection

    def holder(self, connection: http.client.HTTPConnection) -> int | None:
        """The worker whose open files hold the server's side of ``connection``."""
        inode = self._server_side(connection.sock.getsockname()[1])
        for pid in self.workers():
            if inode in self._sockets_of(pid):
                return pid
        return None

    def holds_any(self, pid: int) -> bool:
        """Whether worker ``pid`` still holds a connection to the port."""
        return bool(self._sockets_of(pid) & self._server_sides())

    def wait_until_closed(self, *pids: int) -> None:
        """Until the workers ``pids`` (all by default) hold no connection: each reported
        its closings to the supervisor before it closed the socket."""
        while any(self.holds_any(pid) for pid in pids or self.workers()):
            time.sleep(0.05)

    def _server_sides(self) -> set[str]:
        return {fields[9] for fields in self._tcp() if _port(fields[1]) == self.port
                and _port(fields[2]) != 0}

    def _server_side(self, client_port: int) -> str:
        [inode] = [fields[9] for fields in self._tcp()
                   if _port(fields[1]) == self.port and _port(fields[2]) == client_port]
        return inode

    @staticmethod
    def _tcp() -> list[list[str]]:
        return [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]

    @staticmethod
    def _sockets_of(pid: int) -> set[str]:
        held = set()
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:  # closed meanwhile
                continue
            if target.startswith("socket:["):
                held.add(target[len("socket:["):-1])
        return held


def _status(path: Path) -> dict[str, str]:
    return dict(line.split(":\t", 1) for line in path.read_text().splitlines() if ":\t" in line)


#: The cores this process (the test) may use, as /proc lists them.
USABLE_CORES = _status(Path("/proc/self/status"))["Cpus_allowed_list"]
needs_two_cores = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                     reason="a process may use one core only: nothing to pin")


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1], 16)


def answer(connection: http.client.HTTPConnection, headers: dict[str, str] | None = None) -> int:
    connection.request("GET", "/health", headers=headers or {})
    response = connection.getresponse()
    response.read()
    return response.status


@contextmanager
def served(tmp_path: Path, *, workers: int = 2, **settings: str) -> Iterator[Served]:
    """`identityctl serve --workers N` on a fresh deployment whose config.toml has
    ``settings`` (a line of the sample config -> its replacement); stopped with SIGTERM."""
    made = subprocess.run([sys.executable, "-m", "identityctl", "init", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    config = tmp_path / "config.toml"
    text = config.read_text()
    for line, replacement in settings.items():
        assert line in text, line
        text = text.replace(line, replacement)
    config.write_text(text)
    port, log = free_port(), tmp_path / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "identityctl", "--config", str(config), "serve", "--host",
             "127.0.0.1", "--port", str(port), "--workers", str(workers)],
            stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_health(f"http://127.0.0.1:{port}/health", process, log)
        yield Served(port=port, process=process, log=log, started=time.monotonic())
    finally:
        stop(process)
    assert process.returncode == 0, log.read_text()
    assert "Traceback" not in log.read_text()


def test_connections_go_to_the_worker_with_the_fewest_open(tmp_path: Path) -> None:
    with served(tmp_path) as server:
        workers = server.workers()
        server.wait_until_closed()  # wait_for_health's connection
        proxy = [server.connect() for _ in range(4)]  # a reverse proxy's 4, opened at once
        assert [answer(connection) for connection in proxy] == [200] * 4
        holders = [server.holder(connection) for connection in proxy]
        assert Counter(holders) == {workers[0]: 2, workers[1]: 2}

        # One worker's connections close: it tells the supervisor, so the next two go to it.
        emptied = holders[0]
        for connection, holder in zip(proxy, holders, strict=True):
            if holder == emptied:
                connection.close()
        server.wait_until_closed(emptied)
        later = [server.connect() for _ in range(2)]
        assert [answer(connection) for connection in later] == [200] * 2
        assert [server.holder(connection) for connection in later] == [emptied, emptied]


def test_a_dead_worker_is_replaced_and_its_peer_keeps_serving(tmp_path: Path) -> None:
    with served(tmp_path) as server:
        server.wait_until_closed()  # wait_for_health's connection
        kept = [server.connect() for _ in range(2)]
        assert [answer(connection) for connection in kept] == [200] * 2
        victim, peer = (server.holder(connection) for connection in kept)
        assert victim != peer
        victims_cores = server.cores(victim)
        # A worker that dies sooner than this after starting stops the service (crash loop).
        time.sleep(max(0.0, server.started + MIN_WORKER_UPTIME + 1 - time.monotonic()))

        os.kill(victim, signal.SIGKILL)
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            answer(kept[0])  # its connections went with it
        assert answer(kept[1]) == 200  # the peer's did not
        while victim in server.workers() or len(server.workers()) < 2:
            time.sleep(0.05)

        replacement = next(pid for pid in server.workers() if pid != peer)
        fresh = [server.connect() for _ in range(3)]
        assert [answer(connection) for connection in fresh] == [200] * 3
        assert {server.holder(connection) for connection in fresh} == {peer, replacement}
        assert server.cores(replacement) == victims_cores  # serving: on the victim's core
    assert f"worker {victim} stopped (killed by signal 9)" in server.log.read_text()


def test_the_app_sees_each_connections_own_peer_address(tmp_path: Path) -> None:
    """REMOTE_ADDR is the client's address though the supervisor accepted the connection;
    X-Forwarded-For counts only from a trusted proxy's connection (the access log says)."""
    with served(tmp_path, **{"access_log = false": "access_log = true",
                             "trusted_proxies = []": 'trusted_proxies = ["127.0.0.3"]'}) as server:
        forwarded = {"X-Forwarded-For": "203.0.113.9"}
        for source in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
            connection = server.connect(source)
            assert answer(connection, {**forwarded, "X-Request-ID": f"from-{source}"}) == 200
            connection.close()
    lines = [line for line in server.log.read_text().splitlines() if " GET /health 200 " in line]
    assert any(line.endswith(" 127.0.0.2 from-127.0.0.2") for line in lines), lines
    assert any(line.endswith(" 203.0.113.9 from-127.0.0.3") for line in lines), lines
    assert any(line.endswith(" 127.0.0.4 from-127.0.0.4") for line in lines), lines


@needs_two_cores
def test_each_worker_keeps_to_a_core_of_its_own(tmp_path: Path) -> None:
    """All of a worker's threads run on one core, and no two workers share one; the
    supervisor, which only hands connections over, may run anywhere."""
    with served(tmp_path) as server:
        server.wait_until_closed()  # wait_for_health's connection
        both = [server.connect() for _ in range(2)]  # one to each worker: both serving
        assert [answer(connection) for connection in both] == [200] * 2
        cores = [server.cores(pid) for pid in server.workers()]
        assert all(len(threads) == 1 for threads in cores), cores
        assert all("," not in core and "-" not in core for [core] in cores), cores
        assert cores[0] != cores[1]
        assert server.cores(server.process.pid) == {USABLE_CORES}
    assert "on cores " in server.log.read_text()


@needs_two_cores
def test_a_single_process_uses_every_core_unless_pinned_with_all_its_threads(
        tmp_path: Path) -> None:
    with served(tmp_path / "free", workers=1) as server:
        assert server.cores(server.process.pid) == {USABLE_CORES}
    with served(tmp_path / "pinned", workers=1, **{'pin_cores = "auto"': "pin_cores = true"}
                ) as server:
        [core] = server.cores(server.process.pid)  # waitress's threads, the outbox's
        assert "," not in core and "-" not in core
        assert len(list(Path(f"/proc/{server.process.pid}/task").iterdir())) > 1


def test_processes_go_where_the_scheduler_puts_them_without_pin_cores(tmp_path: Path) -> None:
    with served(tmp_path, **{'pin_cores = "auto"': "pin_cores = false"}) as server:
        for pid in (server.process.pid, *server.workers()):
            assert server.cores(pid) == {USABLE_CORES}
    assert "on cores " not in server.log.read_text()
