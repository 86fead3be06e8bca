"""waitress's queue-depth warning comes at most once per interval, naming the deepest queue."""

from __future__ import annotations

import logging

import pytest

from identityctl.server import queue_depth
from identityctl.server.queue_depth import QueueDepthWarning


def test_one_line_per_interval_with_the_deepest_queue(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    clock = [100.0]
    monkeypatch.setattr(queue_depth.time, "monotonic", lambda: clock[0])
    warning = QueueDepthWarning(logging.getLogger("waitress.queue"), interval=10.0)
    with caplog.at_level(logging.WARNING, logger="waitress.queue"):
        for depth in (1, 5, 3):
            warning.warning("Task queue depth is %d", depth)
        clock[0] += 9.9
        warning.warning("Task queue depth is %d", 7)
        clock[0] += 0.2
        warning.warning("Task queue depth is %d", 2)
    assert [record.getMessage().split(" (")[0] for record in caplog.records] == [
        "Task queue depth reached 1", "Task queue depth reached 7"]


def test_the_server_warns_through_it(service: object) -> None:
    from identityctl.server.runtime import make_server

    config = service.config  # type: ignore[attr-defined]
    server = make_server(config, host="127.0.0.1", port=0, threads=1)
    try:
        assert isinstance(server.task_dispatcher.queue_logger, QueueDepthWarning)
    finally:
        server.close()
        server.close_app()
