"""Every result file the project writes (reports, traces, tables, programs), written one way: whole or not at
all. Each goes to a temporary file beside its target and replaces it in one step, so an interrupted run
never leaves a half-written report over a good one, and a reader never sees one mid-write."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
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
