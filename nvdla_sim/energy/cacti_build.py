"""Make hwcomponents-cacti's CACTI binary run here.

The package ships CACTI built for glibc >= 2.38 (and object files built with it); on older systems
(Debian 12 has 2.36) the binary does not start, and every SRAM model fails with a bare TypeError. Its
CACTI sources build with the package's own makefile in about 25 s with the system g++, once the shipped
object files are removed. `ensure_cacti()` does that when needed; scripts/bootstrap.sh runs it for the
project's .venv, and the energy model calls it before its first SRAM query (a wheel install elsewhere).

    python -m nvdla_sim.energy.cacti_build [--quiet]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

from nvdla_sim.errors import NvdlaError


def cacti_dir() -> Path:
    spec = importlib.util.find_spec("hwcomponents_cacti")
    if spec is None or spec.origin is None:
        raise NvdlaError(
            "energy and area need the hwcomponents-cacti package (pip install hwcomponents-cacti; "
            "the project's ./nvdla bootstraps it)"
        )
    return Path(spec.origin).parent / "cacti"


def cacti_runs(folder: Path) -> bool:
    """CACTI started with no arguments prints its usage; a binary for another glibc fails to load."""
    binary = folder / "cacti"
    if not binary.is_file():
        return False
    res = subprocess.run([str(binary)], cwd=folder, capture_output=True, text=True)
    return "how to use CACTI" in res.stdout + res.stderr


def ensure_cacti(*, quiet: bool = False) -> Path:
    """The folder of a CACTI binary that runs here, building it from the package's sources if needed."""
    folder = cacti_dir()
    if cacti_runs(folder):
        return folder
    for tool in ("make", "g++"):
        if shutil.which(tool) is None:
            raise NvdlaError(
                f"CACTI (hwcomponents-cacti) does not run on this system and building it needs {tool}: "
                "apt-get install -y build-essential"
            )
    if not quiet:
        print(f"nvdla-sim: building CACTI in {folder} (its shipped binary does not run here; ~25 s)", file=sys.stderr)
    for objs in ("obj_dbg", "obj_opt"):  # object files built against the shipped binary's glibc
        shutil.rmtree(folder / objs, ignore_errors=True)
    (folder / "cacti").unlink(missing_ok=True)
    res = subprocess.run(["make", "-j2"], cwd=folder, capture_output=True, text=True)
    if res.returncode or not cacti_runs(folder):
        tail = (res.stdout + res.stderr).strip().splitlines()[-1:] or ["no output"]
        raise NvdlaError(f"building CACTI in {folder} failed: {tail[0]}")
    return folder


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quiet", action="store_true", help="print nothing when it builds")
    args = ap.parse_args(argv)
    try:
        ensure_cacti(quiet=args.quiet)
    except NvdlaError as e:
        print(f"nvdla-sim: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
