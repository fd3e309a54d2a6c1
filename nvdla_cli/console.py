"""What the CLI prints besides results: one-line warnings on stderr."""

from __future__ import annotations

import sys

from nvdla_sim.config import HwConfig


def warn_config(hw: HwConfig) -> None:
    """The config's notes (values the model does not take as given) as one-line warnings on stderr."""
    for note in hw.notes:
        print(f"nvdla: warning: {note}", file=sys.stderr)
