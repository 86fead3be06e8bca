#!/usr/bin/env bash
# One command to try identityctl on this machine: venv, install, demo deployment, serve.
#   ./scripts/run.sh            -> http://localhost:8090
# Re-running reuses .venv and the demo/ deployment (delete demo/ to start over). The install
# (editable: code changes need none) runs again only when pyproject.toml changed since.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.installed-pyproject
wanted=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -x .venv/bin/identityctl ] || [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e .
  echo "$wanted" > "$stamp"
fi
if [ ! -f demo/config.toml ]; then
  .venv/bin/identityctl init --dir demo --base-url http://localhost:8090
  # The demo only: anyone may create an account on the account page ("Try signing in").
  .venv/bin/identityctl --config demo/config.toml app update identityctl-account \
    --allow-sign-up >/dev/null
fi
echo "Open http://localhost:8090/ in a browser: what is running, and a sign-in to try."
exec .venv/bin/identityctl --config demo/config.toml serve
