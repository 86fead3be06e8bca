"""Which cores `serve` may use, how many processes it runs on them, and which core each
process keeps to.

A CPython process's threads take turns on one interpreter lock. When the scheduler runs them
on different cores, every hand-over of the lock (waitress's event loop to the request's
thread, at every socket write and SQLite call) wakes a thread on another core, and the
request's data moves between the cores' caches with it. PERF: when `serve`'s processes cover
the cores evenly (the default: one per core), each keeps to one (``server.pin_cores``); on
the 2-core machine the default two workers served 3,150-3,400 client_credentials tokens a
second pinned against 2,520-2,830 unpinned (docs/performance.md, "Workers"). A process that
has the machine to itself is not kept to one core unless asked: its work outside the lock
(an argon2id hash, SQLite's C code, its event loop's socket calls) runs on the other cores.
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


def quota_cpus() -> float | None:
    """The container's CPU limit in CPUs (1.5: one and a half), from cgroup v2's ``cpu.max``
    (what a Kubernetes ``cpu`` limit sets); None without one."""
    try:
        quota, period = CPU_MAX.read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        return None  # no cgroup v2 limit to read


def worker_count(setting: int | str) -> tuple[int, str]:
    """How many processes ``serve`` runs for ``--workers`` / ``server.workers``, and why:
    "auto" is one per core this process may use: its CPU affinity (a cpuset), and its
    container's CPU quota, whichever is less; one where processes cannot be forked."""
    if setting != "auto":
        return int(setting), "as configured"
    if not hasattr(os, "fork"):
        return 1, "this system cannot fork workers"
    cores, limit = len(usable_cores()), quota_cpus()
    if limit is not None and limit < cores:
        return max(1, math.ceil(limit)), "one per core of the container's CPU limit"
    return cores, "one per core"


def cores_for(processes: int, setting: bool | str) -> list[int]:
    """The core each of ``processes`` processes keeps to (process i: the i-th usable core, in
    turn), or none to keep to, for ``server.pin_cores`` = ``setting``.

    "auto" pins when the processes cover the usable cores evenly (as many, or a multiple) and
    no container CPU quota is below them: then every core has its share whoever else runs
    processes like them, and no process needs another core for its work outside the lock.
    Fewer processes than cores (``--workers 1`` on a larger machine) stay unpinned: their
    argon2id hashes and SQLite's C code run on the cores left, and several instances would
    otherwise crowd the first cores. Cores time shared under a quota stay unpinned too: a
    process kept to one could not go where the scheduler finds room. True pins whenever
    there is more than one core to choose from; False never does.
    """
    cores = usable_cores()
    if setting is False or len(cores) < 2 or not hasattr(os, "sched_setaffinity"):
        return []
    if setting == "auto":
        limit = quota_cpus()
        if processes % len(cores) or (limit is not None and limit < len(cores)):
            return []
    return [cores[index % len(cores)] for index in range(processes)]


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
