#!/usr/bin/env bash
# tests/cli/test_cli_interactive.py drives the chat in a real terminal through tmux.
set -euo pipefail
# --check: is it here? If not, one line on what is missing and which tests need it (scripts/install/needs).
if [ "${1:-}" = --check ]; then
  command -v tmux >/dev/null 2>&1 && exit 0
  echo "tmux (Debian package): tests/cli/test_cli_interactive.py and tests/viewer/test_chat_export.py fail without it"
  exit 1
fi
if ! command -v tmux >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux; } >/dev/null 2>&1 \
    || echo "scripts/install/tmux.sh: could not install tmux; the terminal test will fail" >&2
fi
