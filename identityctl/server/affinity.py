"""Which cores `serve` may use, how many processes it runs on them, and which core each
process keeps to.

A CPython process's threads take turns on one interpreter lock. When the scheduler runs them
on different cores, every hand-over of the lock (waitress's event loop to the request's
thread, at every socket write and SQLite call) wakes a thread on another core, and the
request's data moves between the cores' caches with it. PERF: each `serve` process keeps to
one core (``server.pin_cores``): on the 2-core machine a client_credentials token cost
0.43-0.46 ms of CPU on one pinned process against 0.50-0.55 ms unpinned, which also served
15% more tokens a second, and the default two workers, each on its own core, served
3,150-3,400 tokens/s against 2,500-2,800 (docs/performance.md, "Workers").
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path

log = logging.getLogger("identityctl.workers")

#: cgroup v2's CPU limit of this process's container ("max 100000" or "<quota> <period>").
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def usable_cores() -> list[int]:
    """The cores this process may run on (its affinity: a cpuset, taskset), in order."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def quota_cores() -> int | None:
    """The container's CPU limit in whole cores, rounded up (cgroup v2 ``cpu.max``, what a
    Kubernetes ``cpu`` limit sets); None without one."""
    try:
        quota, period = CPU_MAX.read_text().split()[:2]
        return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        return None  # no cgroup v2 limit to read


def worker_count(setting: int | str) -> tuple[int, str]:
    """How many processes ``serve`` runs for ``--workers`` / ``server.workers``, and why:
    "auto" is one per core this process may use: its CPU affinity (a cpuset), and its
    container's CPU quota, whichever is less; one where processes cannot be forked."""
    if setting != "auto":
        return int(setting), "as configured"
    if not hasattr(os, "fork"):
        return 1, "this system cannot fork workers"
    cores, limited = len(usable_cores()), quota_cores()
    if limited is not None and limited < cores:
        return limited, "one per core of the container's CPU limit"
    return cores, "one per core"


def cores_for(processes: int, *, pid: int) -> list[int]:
    """The core each of ``processes`` processes keeps to, or none to keep to.

    None when this process may use a single core (nothing to choose), when the system cannot
    pin, or when a container's CPU quota is below the cores it may use: such cores are time
    shared with other containers, and a process kept to one of them could not go where the
    scheduler finds room. Otherwise process i gets the i-th usable core counted from one
    picked by ``pid`` (the supervisor's, or the single process's), so that several instances
    on one machine spread over its cores instead of all starting at the first.
    """
    cores = usable_cores()
    if len(cores) < 2 or not hasattr(os, "sched_setaffinity"):
        return []
    limited = quota_cores()
    if limited is not None and limited < len(cores):
        return []
    first = pid % len(cores)
    return [cores[(first + index) % len(cores)] for index in range(processes)]


def keep_to(core: int) -> bool:
    """Run this process, and the threads it starts from now on, on ``core`` only; False (and
    a warning) when the system refuses, and the process runs wherever it is put."""
    try:
        os.sched_setaffinity(0, {core})
    except OSError as exc:  # the core left the cpuset meanwhile; a sandbox forbids it
        log.warning("process %d could not keep to core %d (%s); it runs on any core",
                    os.getpid(), core, exc)
        return False
    return True
