"""The PEX the tests run (tests/test_pex.py, tests/test_image.py): build_pex.sh's file for
the sources as they are. It is built once for each state of the sources (the package,
pyproject.toml, build_pex.sh) and kept in ~/.cache/identityctl-image/pex (or
$IDENTITYCTL_IMAGE_CACHE/pex), so a run with unchanged sources builds nothing, and two test
files that need it at once build it once. IDENTITYCTL_TEST_PEX=path/to/identityctl.pex names
a file to use instead."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PREBUILT_ENV = "IDENTITYCTL_TEST_PEX"
CACHE = Path(os.environ.get("IDENTITYCTL_IMAGE_CACHE")
             or Path.home() / ".cache" / "identityctl-image")


def sources_key() -> str:
    """What the PEX is built from, as a short digest."""
    sources = sorted(path for path in (REPO / "identityctl").rglob("*")
                     if path.is_file() and "__pycache__" not in path.parts)
    hasher = hashlib.sha256()
    for path in [REPO / "pyproject.toml", REPO / "build_pex.sh", *sources]:
        hasher.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return hasher.hexdigest()[:16]


def built_pex() -> Path:
    """The PEX for the sources as they are: IDENTITYCTL_TEST_PEX, the cached one, or one
    build_pex.sh builds now (one build at a time, whoever asks)."""
    if os.environ.get(PREBUILT_ENV):
        return Path(os.environ[PREBUILT_ENV])
    folder = CACHE / "pex"
    folder.mkdir(parents=True, exist_ok=True)
    cached = folder / f"identityctl-{sources_key()}.pex"
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not cached.exists():
            partial = folder / f"{cached.stem}.partial.pex"
            built = subprocess.run([str(REPO / "build_pex.sh"), str(partial)], cwd=REPO,
                                   capture_output=True, text=True, timeout=900)
            assert built.returncode == 0, built.stdout + built.stderr
            partial.rename(cached)
    return cached
