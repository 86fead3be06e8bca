"""client_credentials tokens asked for by wrk, a client written in C: the load of a bench
whose server should have the cores to itself.

The Python client (bench/hotpaths.py) spends about one of the 2 cores on its own requests,
so a server with two workers shares the other core with it and cannot show what a second
worker is worth. wrk keeps its connections open (all opened at its start, as a reverse
proxy's are) and asks on each as fast as answers come, for a few percent of a core.
Debian's package `wrk`; `available()` says whether it is on PATH.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.hotpaths import Phase, Target, cpu_seconds, process_tree

#: wrk's script: one POST of the grant with the client's Basic credentials, and in the end
#: its summary as one JSON line (counts, errors by kind, latency percentiles in µs).
SCRIPT = """
wrk.method = "POST"
wrk.body = "grant_type=client_credentials"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.headers["Authorization"] = "Basic %(credentials)s"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests": %%d, "microseconds": %%d, "not_2xx": %%d, ' ..
    '"socket_errors": %%d, "p50_us": %%d, "p99_us": %%d}\\n', summary.requests,
    summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


@dataclass
class Measured:
    """One timed load against one server: a wrk run, or hotpaths.py's Python client's phase
    (:func:`from_python`)."""

    requests: int
    seconds: float
    failures: int  # answers other than 2xx, and connections that failed
    cpu_seconds: float  # the server's processes, all of them
    p50_ms: float
    p99_ms: float

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms_per_request(self) -> float:
        return self.cpu_seconds * 1000 / max(1, self.requests)


def from_python(phase: Phase) -> Measured:
    """A phase of hotpaths.py's Python client, in the same figures."""
    latencies = sorted(phase.results.latencies)
    return Measured(requests=len(latencies), seconds=phase.seconds,
                    failures=sum(phase.results.failures.values()),
                    cpu_seconds=phase.cpu_seconds,
                    p50_ms=latencies[len(latencies) // 2] * 1000 if latencies else 0.0,
                    p99_ms=latencies[int(len(latencies) * 0.99)] * 1000 if latencies else 0.0)


def combined(phases: list[Measured]) -> dict[str, float | int | None]:
    """The rounds of one server as one line: all requests over all the time, server CPU per
    request, the median of the rounds' p50 and the highest of their p99."""
    requests = sum(phase.requests for phase in phases)
    seconds = sum(phase.seconds for phase in phases)
    return {"count": requests, "seconds": round(seconds, 2),
            "per_second": round(requests / seconds, 1) if seconds else 0.0,
            "p50_ms": round(sorted(phase.p50_ms for phase in phases)[len(phases) // 2], 1),
            "p99_ms": round(max(phase.p99_ms for phase in phases), 1),
            "cpu_ms": round(sum(phase.cpu_seconds for phase in phases) * 1000 / requests, 2)
            if requests else None,
            "errors": sum(phase.failures for phase in phases)}


def available() -> bool:
    return shutil.which("wrk") is not None


def token_phase(target: Target, *, connections: int, threads: int, seconds: float,
                warm_up: float = 1) -> Measured:
    """client_credentials tokens from ``target`` over ``connections`` kept-alive connections
    (wrk's ``threads`` share them) for ``seconds``, after a ``warm_up`` run of the same."""
    client_id, secret = target.m2m
    credentials = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        script.write(SCRIPT % {"credentials": credentials})
        script.flush()
        command = ["wrk", "--threads", str(threads), "--connections", str(connections),
                   "--script", script.name, target.url + "/oauth2/token"]
        if warm_up:
            _run([*command[:1], "--duration", _whole_seconds(warm_up), *command[1:]])
        pids = process_tree(target.pid)
        before = cpu_seconds(pids)
        summary = _run([*command[:1], "--duration", _whole_seconds(seconds), *command[1:]])
        cpu = cpu_seconds(pids) - before
    return Measured(requests=summary["requests"], seconds=summary["microseconds"] / 1e6,
                    failures=summary["not_2xx"] + summary["socket_errors"], cpu_seconds=cpu,
                    p50_ms=summary["p50_us"] / 1000, p99_ms=summary["p99_us"] / 1000)


def _whole_seconds(seconds: float) -> str:
    """wrk's --duration: whole seconds, at least one."""
    return f"{max(1, round(seconds))}s"


def _run(command: list[str]) -> dict[str, int]:
    """wrk's summary line (the last line its script writes)."""
    done = subprocess.run(command, check=True, capture_output=True, text=True,
                          cwd=Path(tempfile.gettempdir()))
    return json.loads(done.stdout.strip().splitlines()[-1])
