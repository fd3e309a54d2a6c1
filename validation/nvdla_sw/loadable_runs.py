"""Run NVIDIA's regression loadables through the model as the DLA firmware runs them; write
validation/data/loadable_runs.json.

    python -m nvdla_validation.nvdla_sw.loadable_runs SW_CHECKOUT

Each loadable of nvdla/sw `regression/flatbufs/kmd` runs on the build it was compiled for (`_small`:
nv_small, `_large`: nv_large, else nv_full; the RTL-testbench configs, whose memory is NVIDIA's testbench's)
through nvdla_sim.program.loadable.run: the firmware's register accesses, the replay with the [driver]
profile, the operations executed on the loadable's memories, and the output as NVIDIA's runtime dumps it,
whose md5 is compared with the golden's `lead.md5` (regression/golden/<test>_<hash>). A row says why when
an output is not computed (an operation the model times but does not execute bit-exactly) or a loadable
is refused (Rubik). Loadables absent from the checkout are listed as missing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nvdla_sim.config import load_config
from nvdla_sim.errors import NvdlaError
from nvdla_sim.program.loadable.container import Interface, read_loadable
from nvdla_sim.program.loadable.run import run_loadable
from nvdla_validation.nvdla_sw import write_rows
from nvdla_validation.nvdla_sw.loadables import find

OUT = Path(__file__).resolve().parents[2] / "validation" / "data" / "loadable_runs.json"


def build(name: str) -> str:
    """The config of the build a regression loadable was compiled for, by its name's suffix."""
    for suffix, hw in (("_small", "nv_small_rtl_tb"), ("_large", "nv_large_rtl_tb")):
        if name.endswith(suffix) or f"{suffix}_" in name:
            return hw
    return "nv_full_rtl_tb"


def row(name: str, path: Path, golden: Path | None) -> dict:
    hw_name = build(name)
    hw = load_config(hw_name)
    lo = read_loadable(path)
    task = next(t.id for t in lo.tasks if t.interface is Interface.DLA1)
    out = {"name": name, "hw": hw_name, "task": task, "golden": golden.name if golden else None}
    try:
        run = run_loadable(path, hw, task=task, golden=None)
    except NvdlaError as e:
        return {**out, "refused": str(e).replace(str(path), path.name)}
    seq = run.run
    out |= {
        "cycles": run.cycles,
        "firmware_operations": len(run.net.operations),
        "firmware_rounds": run.rounds,
        "register_writes": seq.writes,
        "register_reads": seq.reads,
        "register_access_cycles": round(seq.csb_cycles),
        "driver_wait_cycles": round(seq.wait_cycles),
        "operations": [
            {
                "processors": list(t.operation.processors),
                "start": round(t.start),
                "end": round(t.end),
                "cycles": t.cycles,
            }
            for t in seq.operations
        ],
        "outputs_not_computed": run.not_computed,
        "model_md5": run.outputs[0].md5 if len(run.outputs) == 1 else None,
    }
    if golden is not None and (golden / "dla" / "lead.md5").is_file():
        out["golden_md5"] = (golden / "dla" / "lead.md5").read_text().split()[0]
        out["match"] = out["model_md5"] == out["golden_md5"] if out["model_md5"] else None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sw", type=Path, help="a checkout of github.com/nvdla/sw")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    found, missing = find(args.sw)
    rows = []
    for name, path, golden in found:
        r = row(name, path, golden)
        rows.append(r)
        verdict = r.get("refused") or r.get("outputs_not_computed") or ("match" if r.get("match") else "MISMATCH")
        print(f"{name:<26} {r['hw']:<16} {r.get('cycles', '-'):>9}  {verdict}", file=sys.stderr)
    write_rows(
        args.out,
        what="NVIDIA's regression loadables (nvdla/sw regression/flatbufs/kmd) run by nvdla_sim.program.loadable.run "
        "as the DLA firmware runs them, each output's runtime-image md5 beside its golden's "
        "(docs/driver_programs.md)",
        command="python -m nvdla_validation.nvdla_sw.loadable_runs SW_CHECKOUT",
        missing=missing,
        rows=rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
