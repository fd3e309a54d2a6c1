"""Every result file the project writes (reports, traces, tables, programs), written one way: whole or not at
all. Each goes to a temporary file beside its target and replaces it in one step, so an interrupted run
never leaves a half-written report over a good one, and a reader never sees one mid-write."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` to `path` atomically (a sibling temporary file, then os.replace)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # one per process: writers never share one
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_json(path: str | Path, doc: Any, *, indent: int | None = 1, newline: bool = True) -> Path:
    """`doc` as JSON (written atomically)."""
    return write_text(path, json.dumps(doc, indent=indent) + ("\n" if newline else ""))


def write_table(path: str | Path, fieldnames: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> Path:
    """Rows of named columns as CSV, a header first (written atomically)."""
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=list(fieldnames))
    w.writeheader()
    w.writerows(rows)
    return write_text(path, buf.getvalue())


def write_rows(path: str | Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    """Rows of values as CSV under a header (written atomically)."""
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(rows)
    return write_text(path, buf.getvalue())


class DiskCache:
    """Values computed once and kept between processes in `$XDG_CACHE_HOME/nvdla-sim/<name>.json` (outside
    any checkout): JSON values by string key, the key naming everything the value depends on (the versions
    of what computed it). The file is read once a process and rewritten whole after each new value; a cache
    that cannot be read or written only costs the computing."""

    def __init__(self, name: str) -> None:
        self.path = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nvdla-sim" / f"{name}.json"
        self._values: dict[str, Any] | None = None

    def get(self, key: str, compute: Callable[[], Any]) -> Any:
        """The value kept under `key`, computed (and kept) if there is none."""
        if self._values is None:
            self._values = {}
            with contextlib.suppress(OSError, ValueError):
                kept = json.loads(self.path.read_text())
                self._values = kept if isinstance(kept, dict) else {}
        if key not in self._values:
            self._values[key] = compute()
            with contextlib.suppress(OSError):
                self.path.parent.mkdir(parents=True, exist_ok=True)
                write_json(self.path, self._values, indent=None, newline=False)
        return self._values[key]
