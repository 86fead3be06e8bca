"""Which waitress thread serves the next request: the one that just finished, while it can.

waitress's own dispatcher wakes an idle thread for every request. Under load all its threads
then run at once in one interpreter, and on SQLite, whose statements run in this process and
wait for nothing, they only take turns on the GIL, handing it over at every SQLite call and
socket write: a client_credentials token cost 27 context switches with 4 threads against 6
with one, and about 0.9 ms of CPU against 0.6 ms.

:class:`FinishingThreadDispatcher` keeps a request queued for the thread that finishes the
current one, which takes it without sleeping, as long as that thread is working. Threads are
there to wait, so a queued request gets a thread of its own at once when every running
request has said that it waits (``identityctl.waits``: another server, an argon2id hash, the
MCP server), after ``spill_after`` when they have run that long without saying so, and
after ``max_queue_wait`` in any case, up to the pool's size. One thread stands by for that
with a timed wait; the others sleep until a request finds no thread working. On shutdown
the threads serve what is queued before they stop.

The event loop reads a connection only when a request read now could start now
(:meth:`FinishingThreadDispatcher.reads_resume_at`, server/batches.py), and a thread that
finishes a request with none running quickly beside it wakes the loop
(``wake_loop``). A request added while no thread works wakes one thread, not one per request.

It serves SQLite deployments only (runtime.py). On PostgreSQL every statement waits on the
network, and threads running at once fill those waits: there it halved the tokens per
second (446 against 980), so waitress's own dispatcher stays.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from waitress.task import ThreadedTaskDispatcher

from identityctl import waits

#: Seconds a running request may take before a queued one gets a thread of its own: over
#: what a token, a ceremony step or a page takes in CPU here (0.3-2 ms).
SPILL_AFTER_SECONDS = 0.005
#: The longest a queued request waits for the running ones, whatever they do: a wait that
#: nobody declared (a SQLite lock, a slow reader of a large answer) delays others this much
#: at most, and a long queue drains on every thread as waitress's own dispatcher drains it.
MAX_QUEUE_WAIT_SECONDS = 0.02


class FinishingThreadDispatcher(ThreadedTaskDispatcher):
    """waitress's dispatcher (same threads, queue, counts and shutdown) with the choice of
    thread above. ``active_count`` counts threads that are not waiting in the queue, as
    waitress's does."""

    def __init__(self, *, spill_after: float = SPILL_AFTER_SECONDS,
                 max_queue_wait: float = MAX_QUEUE_WAIT_SECONDS) -> None:
        super().__init__()
        self.spill_after = spill_after
        self.max_queue_wait = max_queue_wait
        self.started: dict[int, float] = {}  # thread id -> when its request began
        self.waits: set[int] = set()  # threads whose request said it waits (waits.py)
        self.enqueued: deque[float] = deque()  # when each queued request came, in order
        self.standing_by = False
        self.summoned = 0  # idle threads add_task has woken that have not yet woken
        #: Wakes the event loop; set by server/batches.py, which has it read in batches.
        self.wake_loop: Callable[[], None] | None = None

    @property
    def idle(self) -> int:
        """(Under the lock.) Threads waiting for a request."""
        return len(self.threads) - self.active_count

    def reads_resume_at(self) -> float | None:
        """When the event loop may read again, or None for now. A request read while one is
        being served quickly (began under ``spill_after`` ago, has not said that it waits)
        would wait for it, as the thread serving it takes the next request itself: until
        the youngest such request has run that long. One read while requests are queued
        would wait behind them, and they are about to start: look again after
        ``spill_after``."""
        with self.lock:
            return self._reads_resume_at()

    def _reads_resume_at(self) -> float | None:
        youngest, now = self._youngest_working(), time.monotonic()
        if youngest is not None and youngest + self.spill_after > now:
            return youngest + self.spill_after
        return now + self.spill_after if self.queue else None

    def _loop_should_read(self) -> bool:
        """(Under the lock.) The event loop, if it reads in batches, may read now."""
        return self.wake_loop is not None and self._reads_resume_at() is None

    def _youngest_working(self) -> float | None:
        """(Under the lock.) When the youngest request that has not said it waits began."""
        working = [began for thread, began in self.started.items() if thread not in self.waits]
        return max(working) if working else None

    def waiting(self, thread: int, waits: bool) -> None:
        """(waits.Dispatcher) ``thread``'s request starts or stops waiting."""
        with self.lock:
            if waits:
                self.waits.add(thread)
                if self.queue:
                    # The queue's head may start now: wake every waiting thread, so the one
                    # standing by recomputes when, and an idle one takes it if it is due.
                    self.queue_cv.notify_all()
                wake = self._loop_should_read()
            else:
                self.waits.discard(thread)
                wake = False
        if wake:
            self.wake_loop()  # reads resume

    def _wake_at(self) -> float:
        """When a waiting thread may take the queue's head (under the lock, queue not
        empty): once the youngest working request is spill_after old, or the head has
        waited max_queue_wait."""
        youngest = self._youngest_working()
        head_due = self.enqueued[0] + self.max_queue_wait
        return min(youngest + self.spill_after, head_due) if youngest is not None else 0.0

    def handler_thread(self, thread_no: int) -> None:
        me = threading.get_ident()
        waits.serve_for(self)
        while True:
            with self.lock:
                while True:
                    # Stopping: serve what is queued, then leave.
                    if self.stop_count > 0 or (self.queue
                                               and self._wake_at() <= time.monotonic()):
                        break
                    self.active_count -= 1
                    if self.queue and not self.standing_by:
                        self.standing_by = True
                        self.queue_cv.wait(max(0.0, self._wake_at() - time.monotonic()))
                        self.standing_by = False
                    else:
                        self.queue_cv.wait()
                    self.summoned = max(0, self.summoned - 1)
                    self.active_count += 1
                if not self.queue:  # stopping, with nothing left to serve
                    self.active_count -= 1
                    self.stop_count -= 1
                    self.threads.discard(thread_no)
                    self.thread_exit_cv.notify()
                    break
                task = self.queue.popleft()
                waited = time.monotonic() - self.enqueued.popleft()
                if waited >= self.max_queue_wait:
                    self.queue_logger.warning("Task queue depth is %d", len(self.queue) + 1)
                self.started[me] = time.monotonic()
                if self.queue and not self.standing_by:
                    self.queue_cv.notify()  # another thread stands by for what is left
            try:
                task.service()
            except BaseException:
                self.logger.exception("Exception when servicing %r", task)
            with self.lock:
                self.started.pop(me, None)
                self.waits.discard(me)
                # Every request read has been answered and none is being served quickly.
                wake = self._loop_should_read()
            if wake:
                self.wake_loop()

    def shutdown(self, cancel_pending: bool = True, timeout: float = 5) -> bool:
        """waitress's shutdown; the arrival times of the requests it cancels (the oldest,
        popped from the queue's head) go with them."""
        try:
            return super().shutdown(cancel_pending, timeout)
        finally:
            with self.lock:
                while len(self.enqueued) > len(self.queue):
                    self.enqueued.popleft()

    def add_task(self, task: Any) -> None:
        with self.lock:
            self.queue.append(task)
            self.enqueued.append(time.monotonic())
            if self.idle and not self.summoned and (
                    not self.standing_by or self._youngest_working() is None):
                # A thread starts it now, or stands by in case the running ones are slow;
                # one woken and on its way does either for every request added meanwhile.
                self.summoned += 1
                self.queue_cv.notify()
            if len(self.started) >= len(self.threads) - self.stop_count:
                # Every thread holds a request: these wait for one to finish.
                self.queue_logger.warning("Task queue depth is %d", len(self.queue))
