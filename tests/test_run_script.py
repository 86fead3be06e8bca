"""./scripts/run.sh run again: the venv that has this pyproject.toml installed is used as it
is (no pip), and a changed pyproject.toml installs again."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

RUN = Path(__file__).resolve().parent.parent / "scripts" / "run.sh"


def _stub(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _run(checkout: Path, calls: Path) -> list[str]:
    environment = {**os.environ, "PATH": f"{checkout / 'bin'}:{os.environ['PATH']}"}
    subprocess.run(["bash", str(checkout / "scripts" / "run.sh")], check=True, timeout=60,
                   env=environment, capture_output=True)
    return calls.read_text().splitlines()


def test_a_second_run_skips_the_install_until_pyproject_changes(tmp_path: Path) -> None:
    checkout, calls = tmp_path / "checkout", tmp_path / "calls"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(RUN, checkout / "scripts" / "run.sh")
    (checkout / "pyproject.toml").write_text('[project]\nname = "identityctl"\n')
    (checkout / "demo").mkdir()
    (checkout / "demo" / "config.toml").write_text("")
    # python3 makes the venv (its python records each pip run); identityctl records serving.
    venv_python = f'echo "pip $*" >> {calls}'
    _stub(checkout / "bin" / "python3", f"mkdir -p .venv/bin\n"
          f"printf '#!/bin/sh\\n{venv_python}\\n' > .venv/bin/python\n"
          f"chmod +x .venv/bin/python\n"
          f"printf '#!/bin/sh\\necho \"identityctl $*\" >> {calls}\\n' > .venv/bin/identityctl\n"
          f"chmod +x .venv/bin/identityctl")

    first = _run(checkout, calls)
    assert any("install --quiet -e ." in line for line in first)
    calls.write_text("")
    assert _run(checkout, calls) == ["identityctl --config demo/config.toml serve"]

    (checkout / "pyproject.toml").write_text('[project]\nname = "identityctl"\nversion = "2"\n')
    calls.write_text("")
    assert any("install --quiet -e ." in line for line in _run(checkout, calls))
