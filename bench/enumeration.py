"""Can a stranger tell, from the flow's named passkey step, whether a username has an account?

WebAuthn L3 §14.6.2: the answer for an unknown username (and for a user without a passkey)
must be indistinguishable from a real user's in shape, size and timing. This script starts
`identityctl serve` on a fresh `identityctl init` deployment (or uses --url/--config), makes a
user with a passkey and one with only a password, then, interleaved, `--tries` times each:
starts an AUTHENTICATION execution of the default flow and times the `passkey` action with
each kind of username, over HTTP on 127.0.0.1. It prints per kind the median, mean and p90
latency, the answer sizes, and the difference of the medians; docs/security.md quotes it.

    .venv/bin/python bench/enumeration.py --tries 200
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.flow import create_application
from bench.hotpaths import allow_one_address_everything, free_port, started
from bench.passkey import Client, open_deployment
from identityctl.services.directory import users as directory
from identityctl.services.origin import RequestOrigin

KINDS = ("user with a passkey", "user without a passkey", "unknown username")


def timed_step(http: requests.Session, url: str, application_id: str,
               username: str) -> tuple[float, int]:
    """Seconds the `passkey` action took for ``username``, and the answer's size."""
    started_flow = http.post(url + "/flow/execute", json={
        "applicationId": application_id, "flowType": "AUTHENTICATION"}, timeout=30).json()
    began = time.perf_counter()
    answer = http.post(url + "/flow/execute", json={
        "executionId": started_flow["executionId"], "action": "passkey",
        "inputs": {"username": username}}, timeout=30)
    elapsed = time.perf_counter() - began
    if answer.status_code != 200 or "passkeyChallenge" not in answer.text:
        raise RuntimeError(f"{username}: {answer.status_code} {answer.text[:200]}")
    return elapsed, len(answer.content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=200)
    parser.add_argument("--url", default="", help="A running server (needs --config).")
    parser.add_argument("--config", default="", help="With --url: the server's config.toml.")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.url:
            url, config_path = args.url.rstrip("/"), Path(args.config)
        else:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="enum-")))
            subprocess.run([sys.executable, "-m", "identityctl", "init", "--dir",
                            str(folder / "deployment"), "--json"], check=True,
                           capture_output=True)
            config_path, port = folder / "deployment" / "config.toml", free_port()
            allow_one_address_everything(config_path)
            url = f"http://127.0.0.1:{port}"
            stack.enter_context(started(
                [sys.executable, "-m", "identityctl", "--config", str(config_path), "serve",
                 "--host", "127.0.0.1", "--port", str(port)], url, folder / "serve.log"))
        config, admin_token = open_deployment(config_path)
        run = uuid.uuid4().hex[:8]
        application_id = create_application(run, None)
        with_passkey = directory.create_user(username=f"enum-{run}-a",
                                             origin=RequestOrigin(actor="bench"))
        Client(url=url, origin=config.passkey.allowed_origins[0], rp_id=config.passkey.rp_id,
               admin_token=admin_token, user_ids=[with_passkey.id]).register()
        without = directory.create_user(username=f"enum-{run}-b", password="x" * 16,
                                        origin=RequestOrigin(actor="bench"))
        names = (with_passkey.username, without.username, f"enum-{run}-nobody")
        http = requests.Session()
        for name in names:  # warm up each path
            timed_step(http, url, application_id, name)
        times: dict[str, list[float]] = {kind: [] for kind in KINDS}
        sizes: dict[str, set[int]] = {kind: set() for kind in KINDS}
        for _ in range(args.tries):
            for kind, name in zip(KINDS, names, strict=True):
                elapsed, size = timed_step(http, url, application_id, name)
                times[kind].append(elapsed)
                sizes[kind].add(size)
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    for kind in KINDS:
        values = sorted(times[kind])
        print(f"{kind:24} median {medians[kind] * 1000:6.2f} ms  mean "
              f"{statistics.fmean(values) * 1000:6.2f} ms  p90 "
              f"{values[int(len(values) * 0.9)] * 1000:6.2f} ms  sizes {sorted(sizes[kind])}")
    base = medians[KINDS[0]]
    for kind in KINDS[1:]:
        print(f"median difference, {kind} - {KINDS[0]}: "
              f"{(medians[kind] - base) * 1e6:+.0f} us")


if __name__ == "__main__":
    main()
