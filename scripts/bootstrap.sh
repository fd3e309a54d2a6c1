#!/usr/bin/env bash
# Create .venv with the pinned packages and make sure Icarus Verilog is present.
# Sourced by ./nvdla and ./run-tests; safe to run repeatedly (it only does work that is missing).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"

# Python >= 3.12 (hwcomponents, the energy and area models' component library, needs it): $PYTHON, else
# the first of python3.12/3.13/3.14/python3 on PATH, pyenv's installs, or (root, apt) Debian/Ubuntu's
# python3.12 package.
new_enough() { "$1" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }
find_python() {
  local c
  for c in ${PYTHON:-} python3.12 python3.13 python3.14 python3 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 && new_enough "$(command -v "$c")"; then command -v "$c"; return 0; fi
  done
  return 1
}
if [ -n "${PYTHON:-}" ] && ! new_enough "$PYTHON"; then
  echo "bootstrap: PYTHON=$PYTHON is not Python >= 3.12 with venv ($("$PYTHON" --version 2>&1))" >&2
  exit 1
fi
if ! py="$(find_python)"; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
     && apt-cache show python3.12-venv >/dev/null 2>&1; then
    echo "bootstrap: installing Python 3.12 (apt-get install -y python3.12 python3.12-venv)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.12 python3.12-venv >/dev/null
    py="$(find_python)"
  else
    echo "bootstrap: nvdla-sim needs Python >= 3.12 with venv (found: $(python3 --version 2>&1));" \
      "install it (Ubuntu 24.04: apt-get install python3.12-venv; elsewhere pyenv or uv) or set PYTHON=/path/to/python3.12" >&2
    exit 1
  fi
fi
# One bootstrap at a time: two commands started together on a fresh checkout (./nvdla and ./run-tests, or
# two ./nvdla) would otherwise both clear and fill the same venv. The lock is a file beside .venv (which
# `venv --clear` empties), held until this script ends.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$root/.bootstrap.lock"
  flock 9
fi
stamp="$venv/.lock-$( (cat "$root/requirements.lock" "$root/pyproject.toml"; "$py" --version) | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: creating $venv with $("$py" --version) and the pinned packages (requirements.lock)" >&2
  "$py" -m venv --clear "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/requirements.lock"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -e "$root"
  rm -f "$venv"/.lock-* "$venv/.cacti-ok"
  touch "$stamp"
fi

# CACTI (the SRAM models of hwcomponents-cacti): the package ships a binary for glibc >= 2.38; where it does
# not run (Debian 12), build it from the package's own sources with its makefile (~25 s, g++).
if [ ! -f "$venv/.cacti-ok" ]; then
  "$venv/bin/python" -m nvdla_sim.energy.cacti_build && touch "$venv/.cacti-ok"
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
