"""Server subprocesses: waiting until one answers, stopping it the way an operator would
(SIGTERM, then wait)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests


def wait_for_health(url: str, server: subprocess.Popen[str], log: Path | None = None
                    ) -> requests.Response:
    """Poll until the server answers (it starts in its own process), or fail with what it
    wrote (its ``log`` file, else its stderr) if it died or never answered."""
    def output() -> str:
        return log.read_text() if log is not None else server.communicate()[1]

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"serve exited early ({server.returncode}):\n{output()}")
        try:
            return requests.get(url, timeout=5)
        except requests.ConnectionError:
            time.sleep(0.05)
    pytest.fail(f"serve did not answer {url}" + (f":\n{log.read_text()}" if log else ""))


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
