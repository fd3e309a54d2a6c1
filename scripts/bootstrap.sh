#!/usr/bin/env bash
# Create .venv with the pinned packages and make sure Icarus Verilog is present.
# Sourced by ./nvdla and ./run-tests; safe to run repeatedly (it only does work that is missing).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
py="${PYTHON:-python3}"

if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "nvdla-sim needs Python >= 3.11 (found: $("$py" --version 2>&1)). Set PYTHON=/path/to/python3.11." >&2
  exit 1
fi
stamp="$venv/.lock-$(sha1sum "$root/requirements.lock" "$root/pyproject.toml" | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: creating $venv with pinned packages (requirements.lock)" >&2
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/requirements.lock"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -e "$root"
  rm -f "$venv"/.lock-*
  touch "$stamp"
fi

if [ "${NVDLA_NEED_IVERILOG:-0}" = 1 ] && ! command -v iverilog >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing Icarus Verilog (apt-get install -y iverilog)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iverilog >/dev/null
  else
    echo "bootstrap: Icarus Verilog (iverilog) is missing; the RTL tests need it." >&2
    echo "  install it with: sudo apt-get install -y iverilog   (Debian/Ubuntu)" >&2
    exit 1
  fi
fi

# Headless Chromium for the report-rendering test: best effort (the test skips, saying why, without it).
if [ "${NVDLA_WANT_CHROMIUM:-0}" = 1 ] && ! command -v chromium >/dev/null 2>&1 \
   && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "bootstrap: installing chromium for the HTML report test (apt-get install -y chromium)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 \
    || echo "bootstrap: chromium install failed; the report-rendering test will be skipped" >&2
fi
