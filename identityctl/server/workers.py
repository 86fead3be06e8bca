"""`identityctl serve --workers N`: N waitress processes sharing one listening socket.

One CPython process runs Python code on one core at a time (the GIL), so a single `serve`
leaves the other cores of a machine idle. The supervisor binds the listening socket once,
then forks N workers that each run an ordinary waitress server on that socket: the kernel
hands every new connection to whichever worker accepts it first, so a busy worker takes
fewer. Nothing a request needs lives in a worker (challenges, sessions, codes and throttles
are in the store), so any worker can finish what another started.

The supervisor forwards SIGTERM/SIGINT to the workers and waits for them; a worker that dies
is replaced, unless it died right after starting (a broken deployment), which stops the
whole service with an error instead of forking forever.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import time
from collections.abc import Callable

from identityctl import logs
from identityctl.config import Config
from identityctl.errors import IdentityError
from identityctl.server import runtime
from identityctl.store import db

log = logging.getLogger("identityctl.workers")

#: A worker that exits sooner than this after its start is crashing, not wearing out.
MIN_WORKER_UPTIME = 5.0
#: prctl(2)'s option that sends the caller a signal when its parent thread ends.
_PR_SET_PDEATHSIG = 1
#: Queued connections the kernel holds for the workers (waitress's own default is 1024).
LISTEN_BACKLOG = 1024


class WorkerCrashed(IdentityError):
    """A worker exited right after starting; the deployment needs fixing."""

    status = 500
    code = "worker_crashed"
    message = "A worker process exited right after starting."


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port that forked workers can all accept on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(LISTEN_BACKLOG)
    listener.setblocking(False)
    return listener


def _end_with_supervisor(supervisor: int) -> None:
    """(In a worker.) End when the supervisor ends, even killed with SIGKILL, so no orphan
    keeps serving the port: Linux's PR_SET_PDEATHSIG; elsewhere the check below only."""
    with contextlib.suppress(OSError, AttributeError):  # no libc prctl: not Linux
        if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            log.warning("worker %d: prctl(PR_SET_PDEATHSIG) failed (errno %d); it may outlive "
                        "a killed supervisor", os.getpid(), ctypes.get_errno())
    if os.getppid() != supervisor:  # it died before prctl took effect
        os._exit(0)


def _run_worker(config: Config, listener: socket.socket, *, host: str, threads: int,
                supervisor: int) -> None:
    """Body of a forked worker: serve until SIGTERM, then leave without running atexit hooks."""
    _end_with_supervisor(supervisor)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)  # the supervisor's handlers are not the worker's
    status = 0
    try:
        port = listener.getsockname()[1]
        runtime.serve(config, host=host, port=port, threads=threads,
                      on_ready=lambda address: None, sockets=[listener])
    except BaseException as exc:  # a worker must never fall back into the supervisor's code
        if not (isinstance(exc, SystemExit) and not exc.code):
            log.exception("worker %d failed", os.getpid())
            status = 1
    finally:
        os._exit(status)


class Supervisor:
    """Forks the workers, replaces those that die, stops them all on SIGTERM/SIGINT."""

    def __init__(self, config: Config, listener: socket.socket, *, host: str, threads: int,
                 workers: int) -> None:
        self.config, self.listener = config, listener
        self.host, self.threads, self.workers = host, threads, workers
        #: pid -> time.monotonic() of its start
        self.running: dict[int, float] = {}
        self.stopping = False
        #: why the service stops on its own (a crashing worker), raised once all have exited
        self.crash = ""

    def _spawn(self) -> None:
        supervisor = os.getpid()
        pid = os.fork()
        if pid == 0:
            _run_worker(self.config, self.listener, host=self.host, threads=self.threads,
                        supervisor=supervisor)
        self.running[pid] = time.monotonic()

    def _stop(self, signum: int, frame: object) -> None:
        self.stopping = True
        self._signal_workers(signal.SIGTERM)

    def _signal_workers(self, signum: int) -> None:
        for pid in self.running:
            with contextlib.suppress(ProcessLookupError):  # exited, not reaped yet
                os.kill(pid, signum)

    def run(self) -> None:
        """Start the workers and supervise them until they have all stopped."""
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            for _ in range(self.workers):
                self._spawn()
            while self.running:
                pid, status = os.wait()  # retried after a signal handler ran (PEP 475)
                started = self.running.pop(pid, None)
                if started is None or self.stopping:
                    continue
                uptime = time.monotonic() - started
                code = os.waitstatus_to_exitcode(status)
                exited = f"exit status {code}" if code >= 0 else f"killed by signal {-code}"
                if uptime < MIN_WORKER_UPTIME:
                    # stop the others and wait for them, then report
                    self.stopping = True
                    self.crash = (f"worker {pid} stopped {uptime:.1f}s after starting "
                                  f"({exited}); run `identityctl serve --workers 1` "
                                  f"to see why")
                    self._signal_workers(signal.SIGTERM)
                    continue
                log.warning("worker %d stopped (%s) after %.0fs; starting a replacement",
                            pid, exited, uptime)
                self._spawn()
            if self.crash:
                raise WorkerCrashed(self.crash)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def serve_workers(config: Config, *, host: str, port: int, threads: int, workers: int,
                  on_ready: Callable[[str], None]) -> None:
    """Serve with ``workers`` processes of ``threads`` threads each until SIGTERM/SIGINT.

    The store must be migrated already; its connection is closed here before forking so no
    worker inherits (and shares) the supervisor's database connection.
    """
    logs.configure(config.server.log_format)
    listener = bind_listener(host, port)
    db.close()
    on_ready(f"http://{host}:{listener.getsockname()[1]}")
    try:
        Supervisor(config, listener, host=host, threads=threads, workers=workers).run()
    finally:
        listener.close()
