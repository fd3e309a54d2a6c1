"""Bring a committed RTL measurement up to the programs a suite makes now, without re-running the rest.

    python -m nvdla_validation.nvdla_rtl.merge_rows COMMITTED.json --suite SUITE [--new RUN.json ...]

When a change of the mapper changes some programs of a suite (the LayerNorm's steps, 2026-12-06) and leaves
the others byte for byte, only the changed ones need NVIDIA's RTL again: run_reference on them alone
(`--tests` globs) writes RUN.json. This makes the suite's programs (transformer_programs.generate), then
in COMMITTED.json replaces the rows RUN.json measured, drops the rows of programs the suite no longer makes,
and checks that every program it makes has a row whose expected CRCs are its own (else it stops: a
program changed that no run measured). Each merge is recorded in the document's "edits" (date, what was
replaced and dropped, the commands, RUN.json's source commit), so the rows keep their provenance.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
from pathlib import Path

from nvdla_validation.nvdla_rtl.compare import manifest_mismatches
from nvdla_validation.nvdla_rtl.transformer_programs import SUITES, generate


def merge(committed: dict, runs: list[dict], programs: list[dict], *, command: str) -> dict:
    """`committed` with the rows of `runs` in place of its own of the same names (or added), the rows of
    programs not among `programs` dropped, and the edit recorded; a program of `programs` whose row is
    missing or was measured on other bytes is an error."""
    names = {p["name"] for p in programs}
    new = {r["name"]: r for run in runs for r in run["rows"]}
    rows, replaced, dropped = [], [], []
    for r in committed["rows"]:
        if r["name"] in new:
            replaced.append(r["name"])
        elif r["name"] not in names:
            dropped.append(r["name"])
        else:
            rows.append(r)
    rows += [new[n] for n in sorted(new) if n in names]
    out = {**committed, "rows": rows}
    bad = manifest_mismatches(programs, out)
    if bad:
        raise SystemExit(f"merge_rows: no row measured on these programs' bytes: {', '.join(bad[:8])}")
    edit = {
        "date": datetime.date.today().isoformat(),
        "command": command,
        "replaced_or_added": sorted(set(new) & names),
        "dropped": dropped,
        "runs": [{"command": r["command"], "source_commit": r["source_commit"], "date": r["date"]} for r in runs],
    }
    out["edits"] = [*committed.get("edits", []), edit]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("committed", help="the committed measurement (rewritten in place)")
    ap.add_argument("--suite", required=True, choices=sorted(SUITES), help="the suite whose programs it measured")
    ap.add_argument("--new", nargs="*", default=[], help="run_reference outputs of the changed programs")
    ap.add_argument("--why", default="", help="a sentence on why the programs changed (recorded)")
    args = ap.parse_args(argv)
    path = Path(args.committed)
    programs = [r for r in generate(tempfile.mkdtemp(prefix="merge_rows_"), args.suite) if r["name"]]
    runs = [json.loads(Path(p).read_text()) for p in args.new]
    command = "python -m nvdla_validation.nvdla_rtl.merge_rows " + " ".join(argv if argv is not None else sys.argv[1:])
    out = merge(json.loads(path.read_text()), runs, programs, command=command)
    if args.why:
        out["edits"][-1]["why"] = args.why
    path.write_text(json.dumps(out, indent=1) + "\n")
    edit = out["edits"][-1]
    print(
        f"{path}: {len(out['rows'])} rows; replaced or added {len(edit['replaced_or_added'])}, dropped {len(edit['dropped'])}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
