"""`identityctl serve --workers N`: N waitress processes behind one listening socket.

One CPython process runs Python code on one core at a time (the GIL), so a single `serve`
leaves the other cores of a machine idle. The supervisor binds the listening socket, forks
N workers, and accepts every connection itself: it hands each to the worker with the fewest
open connections (the next in turn among equals) over that worker's Unix socket pair, where
the worker's waitress adopts it as if it had accepted it (server/handoff.py), and each
worker reports its connections as they close. So 4 long-lived connections from a reverse
proxy land on 2 workers 2 and 2, every time; when workers simply shared the listening
socket, which one accepted a connection was chance, and one could get none. Nothing a
request needs lives in a worker (challenges, sessions, codes and throttles are in the
store), so any worker can finish what another started.

Each worker keeps to a core of its own when ``cores`` names them (server/affinity.py), and
its replacement to the same core. The supervisor forwards SIGTERM/SIGINT to the workers and
waits for them; a worker that dies is replaced (its connections end with it), unless it died
right after starting (a broken deployment), which stops the whole service with an error
instead of forking forever.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import selectors
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from identityctl import logs
from identityctl.config import Config
from identityctl.errors import IdentityError
from identityctl.server import runtime
from identityctl.server.handoff import closed_total, hand_off, handoff_pair
from identityctl.server.heap import settle_heap
from identityctl.store import db

log = logging.getLogger("identityctl.workers")

#: A worker that exits sooner than this after its start is crashing, not wearing out.
MIN_WORKER_UPTIME = 5.0
#: prctl(2)'s option that sends the caller a signal when its parent thread ends.
_PR_SET_PDEATHSIG = 1
#: Queued connections the kernel holds for the supervisor (waitress's own default is 1024).
LISTEN_BACKLOG = 1024
#: Connections one wake of the supervisor accepts at most, so reports and signals keep
#: their turn.
ACCEPT_PER_WAKE = 64
#: mallopt(3)'s M_MMAP_THRESHOLD, and the size from which a block of memory is mapped apart.
_M_MMAP_THRESHOLD = -3
LARGE_BLOCK = 1 << 20
#: Signals the supervisor handles: stopping (SIGTERM, SIGINT) and a worker's end (SIGCHLD).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class WorkerCrashed(IdentityError):
    """A worker exited right after starting; the deployment needs fixing."""

    status = 500
    code = "worker_crashed"
    message = "A worker process exited right after starting."


def bind_listener(host: str, port: int) -> socket.socket:
    """The supervisor's listening TCP socket on host:port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(LISTEN_BACKLOG)
    listener.setblocking(False)
    return listener


def _map_large_blocks_apart() -> None:
    """PERF (memory): glibc raises its mmap threshold each time a mapped block is freed, so
    after the first argon2id verification (19 MiB) such blocks come from each thread's arena
    and stay there: 8 waitress threads kept ~150 MiB per worker. A fixed threshold maps
    every block above 1 MiB apart and unmaps it when freed. Inherited by the workers."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: its own rules
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK)


def _end_with_supervisor(supervisor: int) -> None:
    """(In a worker.) End when the supervisor ends, even killed with SIGKILL, so no orphan
    keeps serving the port: Linux's PR_SET_PDEATHSIG; elsewhere the check below only."""
    with contextlib.suppress(OSError, AttributeError):  # no libc prctl: not Linux
        if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            log.warning("worker %d: prctl(PR_SET_PDEATHSIG) failed (errno %d); it may outlive "
                        "a killed supervisor", os.getpid(), ctypes.get_errno())
    if os.getppid() != supervisor:  # it died before prctl took effect
        os._exit(0)


def _run_worker(config: Config, handoff: socket.socket, *, host: str, port: int, threads: int,
                supervisor: int, core: int | None) -> None:
    """Body of a forked worker: serve the connections handed to it until SIGTERM (on
    ``core`` only, when given), then leave without running atexit hooks."""
    db.queue_writes()  # the siblings' writes take turns without SQLite's busy sleeps
    signal.set_wakeup_fd(-1)
    for sig in (*STOP_SIGNALS, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)  # the supervisor's handlers are not the worker's
    _end_with_supervisor(supervisor)
    status = 0
    try:
        runtime.serve(config, host=host, port=port, threads=threads,
                      on_ready=lambda address: None, handoff=handoff, core=core)
    except BaseException as exc:  # a worker must never fall back into the supervisor's code
        if not (isinstance(exc, SystemExit) and not exc.code):
            log.exception("worker %d failed", os.getpid())
            status = 1
    finally:
        os._exit(status)


@dataclass
class Worker:
    """A worker as the supervisor sees it."""

    pid: int
    #: which of the supervisor's workers it is (0 to N-1): its core, and its replacement's
    slot: int
    #: the supervisor's end of the worker's socket pair (server/handoff.py)
    channel: socket.socket
    #: time.monotonic() of its start
    started: float
    #: connections handed to it, and those it has reported closed
    handed: int = 0
    closed: int = 0

    @property
    def open(self) -> int:
        return self.handed - self.closed


class Supervisor:
    """Forks the workers, hands them the connections, replaces those that die, stops them all
    on SIGTERM/SIGINT."""

    def __init__(self, config: Config, listener: socket.socket, *, host: str, threads: int,
                 workers: int, cores: list[int]) -> None:
        self.config, self.listener = config, listener
        self.host, self.threads, self.workers = host, threads, workers
        #: the core each worker keeps to, by slot (none: the scheduler places them)
        self.cores = cores
        self.port = listener.getsockname()[1]
        self.running: dict[int, Worker] = {}
        self.selector = selectors.DefaultSelector()
        #: where the search for the least busy worker starts: ties go round in turn
        self.turn = 0
        self.stopping = False
        #: why the service stops on its own (a crashing worker), raised once all have exited
        self.crash = ""
        #: written by the C-level signal handler (signal.set_wakeup_fd): wakes the selector
        self.wake_up, self.woken = socket.socketpair()

    def _spawn(self, slot: int) -> None:
        ours, theirs = handoff_pair()
        supervisor = os.getpid()
        pid = os.fork()
        if pid == 0:
            for inherited in (ours, self.listener, self.wake_up, self.woken,
                              *(worker.channel for worker in self.running.values())):
                inherited.close()
            self.selector.close()
            _run_worker(self.config, theirs, host=self.host, port=self.port,
                        threads=self.threads, supervisor=supervisor,
                        core=self.cores[slot] if self.cores else None)
        theirs.close()
        ours.setblocking(False)
        worker = self.running[pid] = Worker(pid=pid, slot=slot, channel=ours,
                                            started=time.monotonic())
        self.selector.register(ours, selectors.EVENT_READ, functools.partial(self._reports, worker))

    def _stop(self, signum: int, frame: object) -> None:
        self.stopping = True
        self._signal_workers(signal.SIGTERM)

    def _signal_workers(self, signum: int) -> None:
        for pid in self.running:
            with contextlib.suppress(ProcessLookupError):  # exited, not reaped yet
                os.kill(pid, signum)

    def _accept(self) -> None:
        if self.stopping:  # woken with the workers' ends: they may all be gone already
            return
        for _ in range(ACCEPT_PER_WAKE):
            try:
                connection, peer = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:  # out of file descriptors, a connection aborted
                log.warning("accepting a connection failed: %s", exc)
                return
            with connection:  # the supervisor's copy closes once the worker holds its own
                if not self._hand_off(connection):
                    log.warning("no worker took the connection from %s; closed it", peer[0])

    def _hand_off(self, connection: socket.socket) -> bool:
        """To the worker with the fewest open connections; among equals, the next in turn."""
        workers = list(self.running.values())
        self.turn = (self.turn + 1) % len(workers)
        for worker in sorted(workers[self.turn:] + workers[:self.turn],
                             key=lambda worker: worker.open):
            try:
                hand_off(worker.channel, connection)
            except OSError:  # at its connection limit, stuck, or gone: the next one
                continue
            worker.handed += 1
            return True
        return False

    def _reports(self, worker: Worker) -> None:
        if self.running.get(worker.pid) is not worker:  # reaped in this same wake
            return
        try:
            closed = closed_total(worker.channel)
        except (EOFError, ConnectionResetError):  # it has ended: SIGCHLD says how
            self.selector.unregister(worker.channel)
            return
        if closed is not None:
            worker.closed = closed

    def _reap(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self.woken.recv(512):
                pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            worker = self.running.pop(pid, None)
            if worker is None:
                continue
            with contextlib.suppress(KeyError):  # unregistered at its end of file already
                self.selector.unregister(worker.channel)
            worker.channel.close()
            if not self.stopping:
                self._replace(worker, os.waitstatus_to_exitcode(status))

    def _replace(self, worker: Worker, code: int) -> None:
        uptime = time.monotonic() - worker.started
        exited = f"exit status {code}" if code >= 0 else f"killed by signal {-code}"
        if uptime < MIN_WORKER_UPTIME:
            # stop the others and wait for them, then report
            self.stopping = True
            self.crash = (f"worker {worker.pid} stopped {uptime:.1f}s after starting "
                          f"({exited}); run `identityctl serve --workers 1` to see why")
            self._signal_workers(signal.SIGTERM)
            return
        log.warning("worker %d stopped (%s) after %.0fs with %d connections; starting a "
                    "replacement", worker.pid, exited, uptime, worker.open)
        self._spawn(worker.slot)

    def run(self) -> None:
        """Start the workers and supervise them until they have all stopped."""
        for end in (self.wake_up, self.woken):
            end.setblocking(False)
        previous = {sig: signal.signal(sig, self._stop) for sig in STOP_SIGNALS}
        previous[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        previous_wake_up = signal.set_wakeup_fd(self.wake_up.fileno(), warn_on_full_buffer=False)
        self.selector.register(self.woken, selectors.EVENT_READ, self._reap)
        try:
            for slot in range(self.workers):
                self._spawn(slot)
            self.selector.register(self.listener, selectors.EVENT_READ, self._accept)
            while self.running:
                if self.stopping and self.listener in self.selector.get_map():
                    self.selector.unregister(self.listener)
                for key, _ in self.selector.select():
                    key.data()
            if self.crash:
                raise WorkerCrashed(self.crash)
        finally:
            signal.set_wakeup_fd(previous_wake_up)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.selector.close()
            self.wake_up.close()
            self.woken.close()


def serve_workers(config: Config, *, host: str, port: int, threads: int, workers: int,
                  cores: list[int], on_ready: Callable[[str], None]) -> None:
    """Serve with ``workers`` processes of ``threads`` threads each until SIGTERM/SIGINT,
    worker i on ``cores[i]`` only (``cores`` empty: wherever the scheduler puts them).

    The store must be migrated already; its connection is closed here before forking so no
    worker inherits (and shares) the supervisor's database connection.
    """
    logs.configure(config.server.log_format)
    listener = bind_listener(host, port)
    db.close()
    on_ready(f"http://{host}:{listener.getsockname()[1]}")
    # PERF: the supervisor's objects (the modules every worker runs) leave the cyclic
    # collector's reach before the fork, so no worker's collection writes to their pages:
    # they stay shared between the workers instead of being copied into each.
    settle_heap()
    _map_large_blocks_apart()
    try:
        Supervisor(config, listener, host=host, threads=threads, workers=workers,
                   cores=cores).run()
    finally:
        listener.close()
