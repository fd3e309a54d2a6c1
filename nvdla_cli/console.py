"""What the CLI prints besides results: one-line warnings on stderr."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from nvdla_sim.config import HwConfig


def warn_config(hw: HwConfig) -> None:
    """The config's notes (values the model does not take as given) as one-line warnings on stderr."""
    for note in hw.notes:
        print(f"nvdla: warning: {note}", file=sys.stderr)


class TerminalProgress:
    """A study's progress (mapper.studies.progress.Progress) as one line redrawn on a terminal: what, how
    many of how many, the time so far. Silent when the stream is not a terminal (piped, redirected, a test),
    so results printed on stdout and files written stay free of it. Use as a context manager: the line
    is cleared at the end."""

    def __init__(self, stream: TextIO | None = None, *, min_interval_s: float = 0.1) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.on = bool(getattr(self.stream, "isatty", lambda: False)())
        self.min_interval_s = min_interval_s
        self.start = time.monotonic()
        self._last = 0.0
        self._width = 0

    def __call__(self, what: str, done: int, total: int | None) -> None:
        if not self.on:
            return
        now = time.monotonic()
        if now - self._last < self.min_interval_s and (total is None or done < total):
            return
        self._last = now
        count = f"{done:,}" if total is None else f"{done:,}/{total:,} ({done / max(total, 1):.0%})"
        line = f"{what}: {count}, {now - self.start:,.1f} s"
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)

    def __enter__(self) -> TerminalProgress:
        return self

    def __exit__(self, *exc) -> None:
        if self.on and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
