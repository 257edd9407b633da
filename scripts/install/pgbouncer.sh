#!/usr/bin/env bash
# tests/pgstore/test_pg_pgbouncer.py runs the PostgreSQL store through a real PgBouncer in
# transaction-pooling mode (started by the test on a private port, see
# src/picontext/testing/pgbouncer.py). Install it from Debian's package when it is missing; the
# package's own service is not wanted (the tests start their own), so it is not left running.
set -euo pipefail
have_pgbouncer() {
  command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]
}
# --check: is it here? If not, one line on what is missing and which tests need it (scripts/install/needs).
if [ "${1:-}" = --check ]; then
  have_pgbouncer && exit 0
  echo "pgbouncer (Debian package): tests/pgstore/test_pg_pgbouncer.py skips (fails with CI=true)"
  exit 1
fi
if ! have_pgbouncer && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  # Keep the package's init script from starting a server during installation.
  policy=/usr/sbin/policy-rc.d
  added_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && added_policy=1
  fi
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer; } >/dev/null 2>&1 \
    || echo "scripts/install/pgbouncer.sh: could not install pgbouncer; the PgBouncer store test will fail" >&2
  if [ "$added_policy" = 1 ]; then rm -f "$policy"; fi
fi
