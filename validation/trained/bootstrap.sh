#!/usr/bin/env bash
# The side venv that trains the accuracy study's models (issue 31): Python 3.11 (the CPU torch wheel on
# this machine type is built for it; PyPI's default torch would pull several GB of CUDA packages), torch
# and scikit-learn (its bundled digits data). Kept outside the checkout; evaluation needs numpy only.
#   bash validation/trained/bootstrap.sh [VENV]   (default ~/.cache/nvdla-sim/train-venv)
set -euo pipefail
venv="${1:-$HOME/.cache/nvdla-sim/train-venv}"
py="$(command -v python3.11 || true)"
[ -n "$py" ] || { echo "bootstrap.sh: python3.11 is missing (the CPU torch wheel needs it)" >&2; exit 1; }
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/pip" install -q "torch==2.13.0" "scikit-learn==1.9.1" "numpy>=2"
echo "$venv/bin/python"
