"""Which core each `serve` process keeps to (server/affinity.py): one each from the cores the
process may use, counted from one its process id picks, and none when there is nothing to
choose or a container's CPU quota time-shares the cores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from identityctl.server import affinity

Machine = Callable[..., None]


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    """Set the cores the process may use and the container's CPU limit (cpu.max text)."""

    def set_up(cores: list[int], cpu_max: str = "max 100000\n") -> None:
        monkeypatch.setattr(affinity, "usable_cores", lambda: cores)
        limit = tmp_path / "cpu.max"
        limit.write_text(cpu_max)
        monkeypatch.setattr(affinity, "CPU_MAX", limit)

    return set_up


def test_processes_that_cover_the_cores_evenly_get_one_each_in_turn(machine: Machine) -> None:
    machine([0, 1, 2, 3])
    assert affinity.cores_for(4, "auto") == [0, 1, 2, 3]
    assert affinity.cores_for(8, "auto") == [0, 1, 2, 3, 0, 1, 2, 3]
    machine([2, 5])  # a cpuset: the cores themselves, not 0 and 1
    assert affinity.cores_for(2, "auto") == [2, 5]


def test_processes_that_leave_cores_over_stay_free_unless_asked(machine: Machine) -> None:
    """A lone process hashes passwords on the other cores; 3 on 2 cores would crowd one."""
    machine([0, 1])
    assert affinity.cores_for(1, "auto") == []
    assert affinity.cores_for(3, "auto") == []
    assert affinity.cores_for(1, True) == [0]
    assert affinity.cores_for(3, True) == [0, 1, 0]
    assert affinity.cores_for(2, False) == []


def test_one_usable_core_is_nothing_to_choose(machine: Machine) -> None:
    machine([3])
    assert affinity.cores_for(1, "auto") == affinity.cores_for(1, True) == []


def test_a_quota_below_the_cores_leaves_the_processes_to_the_scheduler(machine: Machine) -> None:
    machine([0, 1, 2, 3], "200000 100000\n")  # 2 CPUs of time on 4 cores
    assert affinity.cores_for(4, "auto") == []
    machine([0, 1], "150000 100000\n")  # 1.5 CPUs on 2 cores: two workers, time shared
    assert affinity.worker_count("auto") == (2, "one per core of the container's CPU limit")
    assert affinity.cores_for(2, "auto") == []
    machine([0, 1], "200000 100000\n")  # a quota of all the cores limits nothing
    assert affinity.cores_for(2, "auto") == [0, 1]


def test_auto_workers_are_the_cores_or_the_quota_whichever_is_less(machine: Machine) -> None:
    machine([0, 1, 2, 3], "150000 100000\n")
    assert affinity.worker_count("auto") == (2, "one per core of the container's CPU limit")
    machine([0, 1, 2, 3])
    assert affinity.worker_count("auto") == (4, "one per core")
    assert affinity.worker_count(3) == (3, "as configured")


def test_a_refused_pinning_is_a_warning_and_the_process_runs_anywhere(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def refuse(pid: int, cores: set[int]) -> None:
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(affinity.os, "sched_setaffinity", refuse)
    assert affinity.keep_to(1) is False
    assert "could not keep to core 1" in caplog.text
