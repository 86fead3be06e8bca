#!/usr/bin/python3
"""The container's entrypoint (deploy/image.py puts it in the image).

    identityctl-entrypoint [IDENTITYCTL ARGS]   default: serve
    identityctl-entrypoint health               the HEALTHCHECK: exit 0 when /health is ok

On the first start, when /data holds no config.toml, it runs `identityctl init --dir /data`,
which reads IDENTITYCTL_BASE_URL, IDENTITYCTL_DATABASE_URL and IDENTITYCTL_ADMIN_EMAIL.
Then it becomes `identityctl ARGS` (same process, so SIGTERM from the runtime stops serve);
serve listens on IDENTITYCTL_HOST:IDENTITYCTL_PORT (0.0.0.0:8090 in the image).
Only the standard library: it runs on the image's Python, outside identityctl's venv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

IDENTITYCTL = "/usr/local/bin/identityctl"
DATA = Path("/data")


def healthy() -> bool:
    url = f"http://127.0.0.1:{os.environ.get('IDENTITYCTL_PORT', '8090')}/health"
    try:
        with urllib.request.urlopen(url, timeout=4) as answer:
            return answer.status == 200 and json.load(answer).get("status") == "ok"
    except (OSError, ValueError):
        return False


def main() -> int:
    arguments = sys.argv[1:] or ["serve"]
    if arguments == ["health"]:
        return 0 if healthy() else 1
    config = DATA / "config.toml"  # where `init --dir /data` writes it
    if not config.exists():
        made = subprocess.run([IDENTITYCTL, "init", "--dir", str(config.parent)])
        if made.returncode != 0:
            return made.returncode
    os.environ["IDENTITYCTL_CONFIG"] = str(config)
    os.execv(IDENTITYCTL, [IDENTITYCTL, *arguments])
    return 0  # not reached: execv replaced this process


if __name__ == "__main__":
    sys.exit(main())
