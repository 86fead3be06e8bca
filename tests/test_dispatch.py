"""The request dispatcher on SQLite: the thread that finishes a quick request takes the next
one; a request that waits lets a queued one have a thread of its own: at once when it says
so, after a while when it does not, and a queued request never waits long. The event loop
reads while no request is being served quickly, and is woken when that becomes so."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from identityctl import waits
from identityctl.server.dispatch import FinishingThreadDispatcher

SPILL_AFTER = 0.02
NEVER = 60.0  # a bound no step below reaches
WAIT = 5.0  # the longest any step below may take before the test fails


class Task:
    """A waitress task: ``service()`` runs ``work`` and notes the thread that ran it."""

    def __init__(self, work: Callable[[], None] = lambda: None) -> None:
        self.work = work
        self.thread: str | None = None
        self.done = threading.Event()
        self.cancelled = False

    def service(self) -> None:
        self.thread = threading.current_thread().name
        self.work()
        self.done.set()

    def cancel(self) -> None:
        self.cancelled = True


@pytest.fixture
def dispatcher() -> Iterator[FinishingThreadDispatcher]:
    made = FinishingThreadDispatcher(spill_after=SPILL_AFTER, max_queue_wait=NEVER)
    made.set_thread_count(4)
    yield made
    made.shutdown(timeout=WAIT)


def dispatcher_with(*, spill_after: float, max_queue_wait: float) -> FinishingThreadDispatcher:
    made = FinishingThreadDispatcher(spill_after=spill_after, max_queue_wait=max_queue_wait)
    made.set_thread_count(4)
    return made


def idle(dispatcher: FinishingThreadDispatcher) -> FinishingThreadDispatcher:
    """``dispatcher`` once every one of its threads waits for a request."""
    for _ in range(int(WAIT / 0.01)):
        with dispatcher.lock:
            if dispatcher.idle == len(dispatcher.threads):
                return dispatcher
        time.sleep(0.01)
    raise AssertionError("the threads did not start")


def test_quick_requests_queued_behind_one_are_served_by_the_thread_that_finished_it() -> None:
    """Added at once while every thread waits, as the event loop adds what it read in one
    pass: one thread is woken for them all, not one each."""
    dispatcher = idle(dispatcher_with(spill_after=NEVER, max_queue_wait=NEVER))
    release = threading.Event()
    first = Task(lambda: release.wait(WAIT))
    queued = [Task() for _ in range(20)]
    for task in [first, *queued]:
        dispatcher.add_task(task)
    release.set()
    for task in queued:
        assert task.done.wait(WAIT)
    dispatcher.shutdown(timeout=WAIT)
    assert {task.thread for task in queued} == {first.thread}


def test_the_loop_is_woken_once_every_request_read_is_answered() -> None:
    dispatcher = dispatcher_with(spill_after=NEVER, max_queue_wait=NEVER)
    wakes: list[float] = []
    dispatcher.wake_loop = lambda: wakes.append(time.monotonic())
    release, began = threading.Event(), threading.Event()
    first = Task(lambda: (began.set(), release.wait(WAIT)))
    queued = [Task() for _ in range(3)]
    for task in [first, *queued]:
        dispatcher.add_task(task)
    assert began.wait(WAIT)
    assert dispatcher.reads_resume_at() is not None  # one is being served quickly
    assert wakes == []
    release.set()
    dispatcher.shutdown(timeout=WAIT)  # every thread has finished what it served
    assert all(task.done.is_set() for task in queued)
    assert len(wakes) == 1  # after the last, not after each
    assert dispatcher.reads_resume_at() is None


def test_a_request_that_says_it_waits_wakes_the_loop_to_read() -> None:
    dispatcher = dispatcher_with(spill_after=NEVER, max_queue_wait=NEVER)
    woken = threading.Event()
    dispatcher.wake_loop = woken.set
    release, computing = threading.Event(), threading.Event()

    def compute_then_wait() -> None:
        computing.set()
        release.wait(WAIT)
        with waits.waiting():
            release.wait(WAIT)

    holder = Task(compute_then_wait)
    dispatcher.add_task(holder)
    try:
        assert computing.wait(WAIT)
        assert dispatcher.reads_resume_at() is not None and not woken.is_set()
        release.set()
        assert woken.wait(WAIT)
    finally:
        release.set()
        dispatcher.shutdown(timeout=WAIT)


def test_reads_resume_once_the_request_being_served_has_run_spill_after() -> None:
    dispatcher = dispatcher_with(spill_after=SPILL_AFTER, max_queue_wait=NEVER)
    release = threading.Event()
    holder = Task(lambda: release.wait(WAIT))
    began = time.monotonic()
    dispatcher.add_task(holder)
    try:
        resume_at = dispatcher.reads_resume_at()
        assert resume_at is None or began < resume_at <= time.monotonic() + SPILL_AFTER
        time.sleep(SPILL_AFTER * 2)
        assert dispatcher.reads_resume_at() is None
    finally:
        release.set()
        dispatcher.shutdown(timeout=WAIT)


def assert_served_while_the_first_holds(dispatcher: FinishingThreadDispatcher,
                                       hold: Callable[[threading.Event], None]) -> None:
    """A request that runs ``hold(release)``, then a quick one queued behind it: the quick
    one is served while the first still holds."""
    release = threading.Event()
    holder = Task(lambda: hold(release))
    dispatcher.add_task(holder)
    quick = Task()
    dispatcher.add_task(quick)
    try:
        assert quick.done.wait(WAIT)
        assert not holder.done.is_set()
    finally:
        release.set()
        dispatcher.shutdown(timeout=WAIT)


def test_a_request_that_says_it_waits_lets_a_queued_one_start_at_once() -> None:
    def wait_on_another_server(release: threading.Event) -> None:
        with waits.waiting():
            release.wait(WAIT)

    assert_served_while_the_first_holds(
        dispatcher_with(spill_after=NEVER, max_queue_wait=NEVER), wait_on_another_server)


def test_a_queued_request_waits_for_a_silent_one_no_longer_than_the_bound() -> None:
    def wait_without_saying_so(release: threading.Event) -> None:
        release.wait(WAIT)

    assert_served_while_the_first_holds(
        dispatcher_with(spill_after=NEVER, max_queue_wait=SPILL_AFTER), wait_without_saying_so)


def test_a_request_that_runs_long_lets_a_queued_one_have_another_thread(
        dispatcher: FinishingThreadDispatcher) -> None:
    release = threading.Event()
    waiting = Task(lambda: release.wait(WAIT))
    dispatcher.add_task(waiting)
    quick = Task()
    dispatcher.add_task(quick)
    try:
        assert quick.done.wait(WAIT)  # served while the first still waits
        assert not waiting.done.is_set()
        assert quick.thread != waiting.thread
    finally:
        release.set()


def test_each_waiting_request_gets_a_thread_up_to_the_pool_and_then_the_queue_is_reported(
        dispatcher: FinishingThreadDispatcher, caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()
    started = threading.Semaphore(0)

    def wait() -> None:
        started.release()
        release.wait(WAIT)

    holders = [Task(wait) for _ in range(4)]
    try:
        for task in holders:
            dispatcher.add_task(task)
        for _ in holders:
            assert started.acquire(timeout=WAIT)  # all four run at once
        assert len({task.thread for task in holders}) == 4
        with caplog.at_level(logging.WARNING, logger="waitress.queue"):
            late = Task()
            dispatcher.add_task(late)
        assert [record.getMessage() for record in caplog.records] == ["Task queue depth is 1"]
        assert not late.done.wait(SPILL_AFTER * 5)  # every thread is held
    finally:
        release.set()
    assert late.done.wait(WAIT)
    later = Task()
    dispatcher.add_task(later)  # every thread idle again: one is woken for it
    assert later.done.wait(WAIT)


def one_thread_held_until(release: threading.Event) -> tuple[FinishingThreadDispatcher, Task]:
    """A dispatcher of one thread, serving a request that holds it until ``release``."""
    dispatcher = FinishingThreadDispatcher(spill_after=NEVER, max_queue_wait=NEVER)
    dispatcher.set_thread_count(1)
    running = Task(lambda: release.wait(WAIT))
    dispatcher.add_task(running)
    return dispatcher, running


def test_shutdown_serves_what_is_queued_then_stops_every_thread() -> None:
    release = threading.Event()
    dispatcher, running = one_thread_held_until(release)
    queued = Task()
    dispatcher.add_task(queued)
    threading.Timer(0.1, release.set).start()
    dispatcher.shutdown(timeout=WAIT)
    assert running.done.is_set()
    assert queued.done.is_set() and not queued.cancelled
    assert dispatcher.threads == set()


def test_requests_a_shutdown_cancels_leave_no_arrival_time_behind() -> None:
    release = threading.Event()
    dispatcher, _ = one_thread_held_until(release)
    queued = [Task() for _ in range(3)]
    for task in queued:
        dispatcher.add_task(task)
    try:
        dispatcher.shutdown(timeout=0.05)  # the running request outlasts it: the rest cancelled
    finally:
        release.set()
    assert all(task.cancelled for task in queued)
    assert len(dispatcher.enqueued) == len(dispatcher.queue) == 0
