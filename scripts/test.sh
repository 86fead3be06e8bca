#!/usr/bin/env bash
# One command to install everything the tests need and run the whole suite:
#   ./scripts/test.sh [pytest args]
# - a venv with identityctl and its test and build extras (pex: the one-file smoke test)
# - Debian chromium for the hosted-UI browser tests, PostgreSQL (and PgBouncer) for the store
#   tests
#   (installed with apt-get when missing and we are root; otherwise those tests skip
#   and say why)
# - a throwaway PostgreSQL cluster on a private port, stopped when the run ends
# - what the container image test needs (apt's package lists; it says when it will skip)
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test,postgres,build]'

apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && \
           DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1; } \
      || echo "test.sh: could not install $* (the tests that need it will skip)"
  fi
}
command -v chromium >/dev/null || apt_install chromium
# Japanese and Chinese glyphs for the pages in those languages and their screenshots
# (Chromium's DejaVu Sans has Arabic); small fonts, not the whole of Noto CJK.
{ [ -n "$(fc-list :lang=ja 2>/dev/null)" ] && [ -n "$(fc-list :lang=zh-cn 2>/dev/null)" ]; } \
  || apt_install fonts-wqy-microhei fonts-ipafont-gothic
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || apt_install postgresql
[ -x /usr/sbin/pgbouncer ] || apt_install pgbouncer  # the PgBouncer start-up test
# The container image test (tests/test_image.py) builds the image from Debian's packages
# (apt-get download, dpkg-deb) and runs it in a chroot of its own: root only.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then
  command -v unshare >/dev/null || apt_install util-linux
  ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1 || apt-get update -qq >/dev/null 2>&1 \
    || echo "test.sh: apt-get update failed (the container image tests will skip)"
else
  echo "test.sh: the container image tests will skip (they need root, apt-get and dpkg-deb)"
fi
# The npm parts of the suite (tests/node): axe-core for the accessibility scan; Vite, React
# and react-oidc-context to build the React guide's apps.
if command -v npm >/dev/null; then
  (cd tests/node && npm ci --silent --no-audit --no-fund >/dev/null 2>&1) \
    || echo "test.sh: could not install the npm test tools" \
            "(the accessibility scan and the React guide apps will skip)"
else
  apt_install npm && (cd tests/node && npm ci --silent --no-audit --no-fund >/dev/null 2>&1) \
    || echo "test.sh: no npm (the accessibility scan and the React guide apps will skip)"
fi

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ]; then
  pg_dir=$(mktemp -d /tmp/identityctl-pg.XXXXXX)
  pg_port=$(( 20000 + RANDOM % 20000 ))
  as_pg=()
  if [ "$(id -u)" = 0 ]; then chown postgres "$pg_dir"; as_pg=(runuser -u postgres --); fi
  "${as_pg[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust >/dev/null
  "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w \
    -o "-p $pg_port -k $pg_dir -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null
  trap '"${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast stop >/dev/null 2>&1 || true' EXIT
  "$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres identityctl_test
  export IDENTITYCTL_TEST_PG_URL="postgresql://postgres@127.0.0.1:$pg_port/identityctl_test"
  echo "test.sh: PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on port $pg_port"
fi

.venv/bin/ruff check .
.venv/bin/lint-imports --no-cache >/dev/null || .venv/bin/lint-imports --no-cache  # the layering (pyproject), printed only when broken
# The package's byte code, written once: where PYTHONDONTWRITEBYTECODE is set, each of the
# many `identityctl` processes the tests start would compile what it imports again.
.venv/bin/python -m compileall -q identityctl >/dev/null
# One worker per core, a test file to one worker (its module fixtures are shared; the longest
# files start first: tests/conftest.py); the ten slowest tests are named at the end of the run.
.venv/bin/python -m pytest -n auto --dist loadfile --durations=10 "$@"
