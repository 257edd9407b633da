#!/usr/bin/env bash
# tests/store and bench/bench_pg_store.py run a throwaway PostgreSQL cluster (initdb + pg_ctl in a
# temporary directory; see src/picontext/testing/postgres.py). Install the server from Debian's
# packages when it is missing. No cluster is created or started by the package: the tests make
# their own, so a main cluster on port 5432 is disabled before installing.
set -euo pipefail
have_server() {
  command -v initdb >/dev/null 2>&1 && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}
# --check: is it here? If not, one line on what is missing and which tests need it (scripts/install/needs).
if [ "${1:-}" = --check ]; then
  have_server && exit 0
  echo "postgresql (Debian package): the PostgreSQL store tests in tests/pgstore/ skip (fail with CI=true)"
  exit 1
fi
if ! have_server && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  mkdir -p /etc/postgresql-common
  conf=/etc/postgresql-common/createcluster.conf
  if ! grep -q '^create_main_cluster' "$conf" 2>/dev/null; then
    echo 'create_main_cluster = false' >> "$conf"
  fi
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } >/dev/null 2>&1 \
    || echo "scripts/install/postgres.sh: could not install postgresql; the PostgreSQL store tests will fail" >&2
fi
# The Python driver comes with the package's `postgres` extra (the `test` extra includes it).
if [ -x .venv/bin/python ] && ! .venv/bin/python -c 'import psycopg, psycopg_pool' 2>/dev/null; then
  .venv/bin/python -m pip install --quiet -e '.[postgres]'
fi
