#!/usr/bin/env bash
# tests/viewer/ load the exported HTML in a real headless Chromium (Debian's chromium and its
# chromedriver; selenium comes with the test extras and downloads nothing).
set -euo pipefail
if { ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; } \
    && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } >/dev/null 2>&1 \
    || echo "scripts/install/chromium.sh: could not install chromium; the browser tests will fail" >&2
fi
