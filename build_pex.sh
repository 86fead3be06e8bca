#!/usr/bin/env bash
# Build dist/identityctl.pex: identityctl and every dependency in one executable file.
#   ./build_pex.sh            -> dist/identityctl.pex (runs wherever CPython >= 3.11 is)
#   ./build_pex.sh OUT.pex    -> OUT.pex (the tests build into a temporary directory)
# Reproducible: pex pins zip timestamps and orders entries, and this tree's wheel is built with
# SOURCE_DATE_EPOCH (the last commit's time), so the same sources and the same resolved wheels
# give the same bytes; the script prints the sha256 to compare (docs/deployment.md).
# The wheels are those of this machine's platform (glibc, x86_64); see the docs for others.
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-dist/identityctl.pex}"
# pex itself: the development venv's (pip install -e '.[build]'), else a private build venv;
# an existing .venv is never modified.
if [ -x .venv/bin/pex ]; then
  tools=.venv
else
  tools=build/pex-venv
  [ -x "$tools/bin/pex" ] || { python3 -m venv "$tools" &&
    "$tools/bin/python" -m pip install --quiet 'pex>=2.20'; }
fi
mkdir -p "$(dirname "$out")"
# identityctl's own wheel is built here, in place: given the folder, pex's pip would first copy
# the whole tree (.git, .venv) and trip over files that change meanwhile.
# A fixed folder named relative to this one: the wheel's path is recorded in the PEX.
wheels=build/pex-wheel
mkdir -p build
exec 9>build/.pex-lock
flock 9  # one build at a time in this checkout
rm -rf "$wheels"
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 315532800)}" \
  "$tools/bin/python" -m pip wheel --quiet --no-deps --wheel-dir "$wheels" .
wheel="$(echo "$wheels"/identityctl-*.whl)"
# [postgres]: the driver for several instances on one PostgreSQL database is inside too.
# --venv: on first run the PEX unpacks into ~/.cache/pex once; later starts skip zip imports,
# which makes `identityctl --help` start in well under a second.
# --python-path: the wheels are resolved for the Python pex runs on, once. Searching PATH
# instead finds each copy of that Python (pyenv's, the system's, every venv's) and resolves
# the same wheels again for each: the same file, at several times the cost.
# --pip-version: a pip whose resolver backtracks (pex's own pip 20.3 takes the newest release
# of each package and fails when another package caps it, as pyOpenSSL caps cryptography);
# 25.2, as 26.x is not served to the pip that fetches it.
"$tools/bin/pex" "./$wheel[postgres]" \
  --console-script identityctl \
  --output-file "$out" \
  --venv prepend \
  --interpreter-constraint 'CPython>=3.11,<4' \
  --python-path "$tools/bin" \
  --pip-version 25.2 \
  --python-shebang '/usr/bin/env python3' \
  --no-pre-install-wheels
# The package data (hosted UI, default flows, password list, sample config) must be inside:
# check every file pyproject.toml's package-data patterns match here against the built file.
PEX_OUT="$out" "$tools/bin/python" - <<'PY'
import hashlib, io, os, sys, tomllib, zipfile
from pathlib import Path

path = os.environ["PEX_OUT"]
patterns = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["setuptools"][
    "package-data"]["identityctl"]
expected = {str(p) for pattern in patterns for p in Path("identityctl").glob(pattern)
            if p.is_file()}
with zipfile.ZipFile(path) as pex:
    wheel = next(n for n in pex.namelist() if n.startswith(".deps/identityctl-"))
    with zipfile.ZipFile(io.BytesIO(pex.read(wheel))) as inner:
        missing = sorted(expected - set(inner.namelist()))
if missing:
    sys.exit(f"build_pex.sh: package data missing from {path}: {', '.join(missing)}")
digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
print(f"built {path}: {os.path.getsize(path) / 1e6:.1f} MB, {len(expected)} data files, "
      f"sha256 {digest}")
PY
