#!/usr/bin/env bash
# tests/viewer/ load the exported HTML in a real headless Chromium (Debian's chromium and its
# chromedriver; selenium comes with the test extras and downloads nothing).
set -euo pipefail
have_browser() {
  command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1
}
# --check: is it here? If not, one line on what is missing and which tests need it (scripts/install/needs).
if [ "${1:-}" = --check ]; then
  have_browser && exit 0
  echo "chromium + chromium-driver (Debian packages): the browser tests in tests/viewer/ skip (fail with CI=true)"
  exit 1
fi
if ! have_browser && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } >/dev/null 2>&1 \
    || echo "scripts/install/chromium.sh: could not install chromium; the browser tests will fail" >&2
fi
