"""Output paths checked before a command's work: a folder or a file that the run will write, made (with its
parent folders) and tried for writing up front, so a bad path is a one-line error before the simulation
and never a traceback, or a lost result, after it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from nvdla_sim.errors import NvdlaError


def _reason(e: OSError) -> str:
    return e.strerror or str(e)


def _blocking_file(path: Path) -> Path | None:
    """The first existing ancestor of `path` that is not a folder (a regular file in the way), if any."""
    for p in [*reversed(path.parents), path]:
        if p.exists() and not p.is_dir():
            return p
    return None


def _given(path: str | os.PathLike, flag: str) -> Path:
    if not str(path).strip():  # an unset $VAR: writing "nowhere" or into the current folder is refused
        raise NvdlaError(f"{flag}: an empty path; give a path")
    return Path(path)


def output_dir(path: str | os.PathLike, flag: str) -> Path:
    """The folder `flag` names, made if missing and tried for writing: its path."""
    out = _given(path, flag)
    block = _blocking_file(out)
    if block is not None:
        what = "it" if block == out else f"{block}"
        raise NvdlaError(f"{flag} {out}: {what} is a file, not a folder; give a folder path")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        raise NvdlaError(f"{flag} {out}: cannot write into this folder ({_reason(e)})") from None
    return out


def output_file(path: str | os.PathLike, flag: str) -> Path:
    """The file `flag` names, its folder made if missing and tried for writing (an existing file is kept
    until the run writes it): its path."""
    out = _given(path, flag)
    if out.is_dir():
        raise NvdlaError(f"{flag} {out}: is a folder; give a file path")
    block = _blocking_file(out.parent)
    if block is not None:
        raise NvdlaError(f"{flag} {out}: {block} is a file, not a folder")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        existed = out.exists()
        with open(out, "a"):
            pass
        if not existed:
            out.unlink()
    except OSError as e:
        raise NvdlaError(f"{flag} {out}: cannot write this file ({_reason(e)})") from None
    return out
