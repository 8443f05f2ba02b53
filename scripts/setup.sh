#!/usr/bin/env bash
# Sets up everything a fresh machine needs: system packages (bubblewrap for the
# sandbox), a virtualenv in .venv with the CPU torch wheel, and evolve itself.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! command -v bwrap >/dev/null 2>&1 || ! ldconfig -p | grep -q libseccomp.so; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap libseccomp2 >/dev/null) \
      || echo "setup: could not install bubblewrap; the sandbox falls back to its weaker mode" >&2
  fi
fi
# Debian's chromium: the browser tests of `evolve ui` drive it headless (Playwright, no browser download).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "setup: could not install chromium; the evolve ui browser tests will be skipped" >&2
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.evolve-setup
want=$(cat pyproject.toml constraints/cpu.txt | sha256sum | cut -c1-16)
if [ "$(cat $stamp 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # The CPU wheel first: an unpinned torch would pull a multi-GB CUDA build.
  .venv/bin/python -m pip install -q torch==2.13.0
  .venv/bin/python -m pip install -q -c constraints/cpu.txt -e '.[dev]'
  echo "$want" > $stamp
fi
