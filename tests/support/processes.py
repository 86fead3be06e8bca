"""Stopping server subprocesses the way an operator would: SIGTERM, then wait."""

from __future__ import annotations

import signal
import subprocess


def stop(*processes: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM every process, then wait for each; one that does not stop in time is killed
    (its return code then says so)."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
