"""waitress's "Task queue depth is N" warning, at most one line per interval.

waitress warns, under its dispatcher's lock, for every request that finds no idle thread:
under steady load that is nearly every request, and the line (a log record formatted and
written to stderr) cost more of a token's server CPU than its audit insert. PERF: the
dispatcher's ``queue_logger`` is replaced by :class:`QueueDepthWarning`, which writes one
line per interval naming the deepest queue since the last line, and costs a clock read
otherwise.
"""

from __future__ import annotations

import logging
import time
from typing import Any

#: Seconds between two queue-depth lines.
INTERVAL_SECONDS = 10.0


class QueueDepthWarning:
    """Stands in for a waitress dispatcher's ``queue_logger`` (only ``warning`` is called,
    always under the dispatcher's lock, so calls never overlap)."""

    def __init__(self, logger: logging.Logger, *, interval: float = INTERVAL_SECONDS) -> None:
        self._logger = logger
        self._interval = interval
        self._deepest = 0
        self._last_line = -interval

    def warning(self, message: str, depth: int) -> None:
        """waitress's call: ``warning("Task queue depth is %d", depth)``."""
        self._deepest = max(self._deepest, depth)
        moment = time.monotonic()
        if moment - self._last_line < self._interval:
            return
        self._last_line = moment
        self._logger.warning("Task queue depth reached %d (requests waiting for a thread; "
                             "one line per %g s at most)", self._deepest, self._interval)
        self._deepest = 0


def rate_limit_queue_warning(server: Any) -> None:
    """Make ``server``'s (waitress) dispatcher warn about its queue through a
    :class:`QueueDepthWarning`."""
    dispatcher = server.task_dispatcher
    dispatcher.queue_logger = QueueDepthWarning(dispatcher.queue_logger)
