"""Which waitress thread serves the next request: the one that just finished, while it can.

waitress's own dispatcher wakes an idle thread for every request. Under load all its threads
then run at once in one interpreter, and on SQLite, whose statements run in this process and
wait for nothing, they only take turns on the GIL, handing it over at every SQLite call and
socket write: a client_credentials token cost 27 context switches with 4 threads against 6
with one, and about 1.1 ms of CPU against 0.7 ms.

:class:`FinishingThreadDispatcher` keeps a request queued for the thread that finishes the
current one, which takes it without sleeping, as long as that thread is quick. Threads are
there to wait: for an argon2id hash, another server, a lock. So a second thread takes a
queued request only when every running request has run for ``spill_after`` seconds (it is
probably waiting, not working), and so on up to the pool's size. One thread stands by for
that with a timed wait, waking at most once per ``spill_after`` while requests are queued;
the others sleep until a request finds no thread running.

It serves SQLite deployments only (runtime.py). On PostgreSQL every statement waits on the
network, and threads running at once fill those waits: there it halved the tokens per
second (446 against 980), so waitress's own dispatcher stays.
"""

from __future__ import annotations

import time
from typing import Any

from waitress.task import ThreadedTaskDispatcher

#: Seconds a running request may take before a queued one gets a thread of its own: over
#: what a token, a ceremony step or a page takes in CPU here (0.3-2 ms), well under what
#: waiting for an argon2id hash or another server takes.
SPILL_AFTER_SECONDS = 0.005


class FinishingThreadDispatcher(ThreadedTaskDispatcher):
    """waitress's dispatcher (same threads, queue, counts and shutdown) with the choice of
    thread above. ``active_count`` counts threads that are not waiting in the queue, as
    waitress's does."""

    def __init__(self, *, spill_after: float = SPILL_AFTER_SECONDS) -> None:
        super().__init__()
        self.spill_after = spill_after
        self.started: dict[int, float] = {}  # thread number -> when its request began
        self.standing_by = False

    def _may_take(self, moment: float) -> bool:
        """Whether a waiting thread may take the queue's head now (under the lock)."""
        return not self.started or all(moment - began >= self.spill_after
                                       for began in self.started.values())

    def handler_thread(self, thread_no: int) -> None:
        while True:
            with self.lock:
                self.started.pop(thread_no, None)
                while self.stop_count == 0:
                    if self.queue and self._may_take(time.monotonic()):
                        break
                    self.active_count -= 1
                    if self.queue and not self.standing_by:
                        # Wake when the newest running request has run for spill_after.
                        self.standing_by = True
                        latest = max(self.started.values())
                        self.queue_cv.wait(max(0.0, latest + self.spill_after
                                               - time.monotonic()))
                        self.standing_by = False
                    else:
                        self.queue_cv.wait()
                    self.active_count += 1
                if self.stop_count > 0:
                    self.active_count -= 1
                    self.stop_count -= 1
                    self.threads.discard(thread_no)
                    self.thread_exit_cv.notify()
                    break
                task = self.queue.popleft()
                self.started[thread_no] = time.monotonic()
                if self.queue and not self.standing_by:
                    self.queue_cv.notify()  # another thread stands by for what is left
            try:
                task.service()
            except BaseException:
                self.logger.exception("Exception when servicing %r", task)

    def add_task(self, task: Any) -> None:
        with self.lock:
            self.queue.append(task)
            if not self.started or not self.standing_by:
                # A thread starts it now, or stands by in case the running ones are slow.
                self.queue_cv.notify()
            queue_size = len(self.queue)
            if len(self.started) >= len(self.threads) - self.stop_count:
                # Every thread holds a request: these wait for one to finish.
                self.queue_logger.warning("Task queue depth is %d", queue_size)
