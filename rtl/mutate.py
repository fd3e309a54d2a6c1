"""Mutation testing of the RTL benches: does each bench kill a real bug planted in the datapath?

    python -m nvdla_rtl.mutate [--only ID,...] [--jobs 2] [--json out.json]

Each mutant is one edit of rtl/datapath.py or rtl/sdp_x1.py (an operator, a width, a pipeline depth, a
handshake condition, the rounding mode, a saturation bound, ...). It runs the default bench set against the
mutant: first the amaranth.sim tier (tests/rtl/test_datapath_amaranth.py), and if that passes, the cocotb
benches on Icarus (tests/rtl/test_cocotb_benches.py, slow runs excluded). A mutant is killed when a
bench fails; it survives when both pass. The script prints the kill rate and the survivors.

The mutant replaces `nvdla_rtl.datapath` in the pytest process (this module is loaded as a pytest
plugin with `-p nvdla_rtl.mutate`, which swaps the module in before any test imports it); the
Verilog the benches build comes from that module, in a cache folder of the mutant's own.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENV = "NVDLA_RTL_MUTANT"
TIER_TIMEOUT = 900  # seconds; the unmodified tiers take about 20 s and 120 s


@dataclass(frozen=True)
class Mutant:
    id: str
    what: str
    old: str
    new: str
    file: str = "datapath.py"  # in rtl/: datapath.py (CMAC + CACC) or sdp_x1.py (SDP X1)


MUTANTS = [
    # weights: shadow set and swap
    Mutant("shadow_full_early", "shadow set counted full one cell early", "full.eq(wt_count == K)", "full.eq(wt_count == K - 1)"),
    Mutant("wt_ready_always", "weights accepted while the shadow set is full", "self.wt.ready.eq(~full)", "self.wt.ready.eq(1)"),
    Mutant("wt_count_step", "weight counter steps by two", "wt_count.eq(wt_count + 1)", "wt_count.eq(wt_count + 2)"),
    Mutant("wt_load_no_ready", "a weight beat loads without the handshake", "with m.If(self.wt.valid & self.wt.ready):", "with m.If(self.wt.valid):"),
    Mutant("swap_count_reset", "swap leaves one cell counted", "m.d.sync += wt_count.eq(0)", "m.d.sync += wt_count.eq(1)"),
    Mutant("swap_without_fire", "swap on an offered, untaken atom", "with m.If(fire & dp.swap):", "with m.If(dp.swap):"),
    Mutant("swap_wires_crossed", "swap copies the next channel's weight", "active[k][c].eq(shadow[k][c]) for c in range(C)", "active[k][c].eq(shadow[k][(c + 1) % C]) for c in range(C)"),
    Mutant("swap_atom_old_weights", "the swap atom multiplies the old weights", "w = Mux(dp.swap, shadow[k][c], active[k][c])", "w = active[k][c]"),
    # handshake
    Mutant("advance_ignores_valid", "pipeline stalls whenever the sink is not ready", "advance.eq(~self.out.valid | self.out.ready)", "advance.eq(self.out.ready)"),
    Mutant("advance_always", "back-pressure ignored", "advance.eq(~self.out.valid | self.out.ready)", "advance.eq(1)"),
    Mutant("dat_ready_no_swap_wait", "a swap atom is taken before its weights are in", "self.dat.ready.eq(advance & (~dp.swap | full))", "self.dat.ready.eq(advance)"),
    Mutant("dat_ready_inverted_swap", "swap condition inverted", "(~dp.swap | full)", "(dp.swap | full)"),
    Mutant("ctrl_valid_no_ready", "an offered atom counts as taken", "ctrl[0].valid.eq(fire)", "ctrl[0].valid.eq(self.dat.valid)"),
    Mutant("out_valid_sticks", "out.valid never cleared", "m.d.sync += self.out.valid.eq(0)", "m.d.sync += self.out.valid.eq(self.out.valid)"),
    # arithmetic
    Mutant("mul_to_add", "product replaced by a sum", "prod[k][c].eq(dp.data[c] * w)", "prod[k][c].eq(dp.data[c] + w)"),
    Mutant("product_width", "product one bit narrow", "prod_bits = 2 * p.in_bits", "prod_bits = 2 * p.in_bits - 1"),
    Mutant("adder_tree_width", "adder tree without growth bits", "sum_bits = prod_bits + max(1, (C - 1).bit_length())", "sum_bits = prod_bits"),
    Mutant("adder_tree_drops_one", "adder tree skips one product", "for c in range(1, C):", "for c in range(2, C):"),
    Mutant("acc_subtracts", "accumulate subtracts", "summed = _saturate(m, cur + psum[k]", "summed = _saturate(m, cur - psum[k]"),
    Mutant("first_inverted", "first atom adds, later ones overwrite", "total.eq(Mux(last_ctrl.first, psum[k], summed))", "total.eq(Mux(last_ctrl.first, summed, psum[k]))"),
    Mutant("first_dropped", "first flag never reaches CACC", "ctrl[0].first.eq(dp.first)", "ctrl[0].first.eq(0)"),
    Mutant("acc_index", "every output point accumulates into entry 0", "cur = acc[last_ctrl.pix][k]", "cur = acc[0][k]"),
    Mutant("sat_upper_bound", "saturation upper bound off by one", "lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1", "lo, hi = -(1 << (bits - 1)), (1 << (bits - 1))"),
    Mutant("sat_no_lower", "no saturation towards negative", "Mux(value > hi, hi, Mux(value < lo, lo, value))", "Mux(value > hi, hi, value)"),
    Mutant("out_sat_width", "output saturates at INT33", "_saturate(m, signed_r, OUT_BITS,", "_saturate(m, signed_r, OUT_BITS + 1,"),
    Mutant("round_truncates", "rounding replaced by truncation", "half = (Const(1, p.acc_bits + 2) << self.truncate) >> 1", "half = Const(0, p.acc_bits + 2)"),
    Mutant("round_half_down", "ties rounded towards zero", "rounded.eq((mag + half) >> self.truncate)", "rounded.eq((mag + half - 1) >> self.truncate)"),
    Mutant("round_twos_complement", "rounds the two's complement value (half up, not away from zero)", "mag.eq(Mux(neg, -total, total))", "mag.eq(total)"),
    # pipeline depth and output tags
    Mutant("psum_pipeline_short", "partial sums one stage early", "if i < p.pipeline - 1:", "if i < p.pipeline - 2:"),
    Mutant("ctrl_pipeline_short", "control one stage shorter than the data", "for i in range(1, p.pipeline):", "for i in range(1, p.pipeline - 1):"),
    Mutant("emit_every_atom", "an output for every atom, not just `last`", "with m.If(last_ctrl.last):\n                    m.d.sync += [", "with m.If(last_ctrl.valid):\n                    m.d.sync += ["),
    Mutant("last_from_last", "out.last on every output point", "self.out.payload.last.eq(last_ctrl.end)", "self.out.payload.last.eq(last_ctrl.last)"),
    Mutant("end_from_last", "end tag taken from the last flag", "ctrl[0].end.eq(dp.end)", "ctrl[0].end.eq(dp.last)"),
    Mutant("out_pix_zero", "output pix always 0", "self.out.payload.pix.eq(last_ctrl.pix)", "self.out.payload.pix.eq(0)"),
    # SDP X1 (rtl/sdp_x1.py)
    Mutant("sdp_bias_en_inverted", "bias added when disabled", "Mux(self.bias_en, x + operand, x)", "Mux(self.bias_en, x, x + operand)", "sdp_x1.py"),
    Mutant("sdp_bias_unsaturated", "bias << alu_shift wraps instead of saturating", "operand = _sat(m, wide, STAGE_BITS, f\"bias_sat_{k}\")", "operand = wide[:STAGE_BITS].as_signed()", "sdp_x1.py"),
    Mutant("sdp_mul_en_inverted", "multiplier used when bypassed", "Mux(self.mul_en, alu[k] * self.mul[k], alu[k])", "Mux(self.mul_en, alu[k], alu[k] * self.mul[k])", "sdp_x1.py"),
    Mutant("sdp_relu_off", "ReLU never applied", "Mux(self.relu & (trunc < 0), 0, trunc)", "trunc", "sdp_x1.py"),
    Mutant("sdp_relu_le", "ReLU also zeroes zero (equivalent: 0 -> 0)", "Mux(self.relu & (trunc < 0), 0, trunc)", "Mux(self.relu & (trunc <= 0), 0, trunc)", "sdp_x1.py"),
    Mutant("sdp_offset_sign", "convertor adds its offset", "(x2[k] - self.cvt_offset) * self.cvt_scale", "(x2[k] + self.cvt_offset) * self.cvt_scale", "sdp_x1.py"),
    Mutant("sdp_round_truncates", "rounding shifts truncate", "Mux(shift == 0, 0, (Const(1, 65) << shift) >> 1)", "0", "sdp_x1.py"),
    Mutant("sdp_out_sat_width", "output saturates at INT9", "STAGE_BITS + 17, f\"cvt_rnd_{k}\"), self.out_bits,", "STAGE_BITS + 17, f\"cvt_rnd_{k}\"), self.out_bits + 1,", "sdp_x1.py"),
    Mutant("sdp_stage_skipped", "valid skips a register stage", "m.d.sync += [v2.eq(v1), pix2.eq(pix1), last2.eq(last1)]", "m.d.sync += [v2.eq(self.inp.valid), pix2.eq(pix1), last2.eq(last1)]", "sdp_x1.py"),
    Mutant("sdp_ready_always", "SDP accepts while stalled", "self.inp.ready.eq(advance)", "self.inp.ready.eq(1)", "sdp_x1.py"),
]  # fmt: skip

TIERS = [
    ["tests/rtl/test_datapath_amaranth.py", "--hypothesis-seed=0"],
    ["tests/rtl/test_cocotb_benches.py", "-m", "rtl and not slow and not verilator"],
]


CONTROL = Mutant("control", "the unmodified design (must pass every tier)", "", "")


def mutated_source(m: Mutant) -> str:
    path = HERE / m.file
    src = path.read_text()
    if m is CONTROL:
        return src
    if src.count(m.old) != 1:
        raise SystemExit(f"mutant {m.id}: the text to replace occurs {src.count(m.old)} times in {path} (needs 1)")
    return src.replace(m.old, m.new)


def run_mutant(m: Mutant, root: Path) -> dict:
    """Run the tiers against one mutant; killed by the first tier that fails."""
    work = Path(tempfile.mkdtemp(prefix=f"mutant_{m.id}_"))
    path = work / m.file
    path.write_text(mutated_source(m))
    env = {**os.environ, ENV: str(path), "NVDLA_RTL_CACHE": str(work / "verilog"), "PYTHONDONTWRITEBYTECODE": "1"}
    t0 = time.perf_counter()
    for tier, args in enumerate(TIERS, 1):
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "nvdla_rtl.mutate", "-p", "no:cacheprovider", *args]
        try:
            proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=TIER_TIMEOUT)
        except subprocess.TimeoutExpired:  # a hang the bench did not catch: counted, and listed as such
            return {"id": m.id, "what": m.what, "status": "killed (timeout)", "tier": tier, "by": "timeout",
                    "wall_s": round(time.perf_counter() - t0, 1)}  # fmt: skip
        if proc.returncode != 0:
            failed = [ln for ln in proc.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
            how = "killed" if proc.returncode == 1 else f"killed (pytest exit {proc.returncode})"
            return {"id": m.id, "what": m.what, "status": how, "tier": tier, "by": (failed or ["?"])[0],
                    "wall_s": round(time.perf_counter() - t0, 1)}  # fmt: skip
    return {"id": m.id, "what": m.what, "status": "survived", "tier": None, "by": "",
            "wall_s": round(time.perf_counter() - t0, 1)}  # fmt: skip


def _install_mutant() -> None:
    """As a pytest plugin: put the mutant in place of its module (nvdla_rtl.datapath or
    nvdla_rtl.sdp_x1) before anything imports it."""
    path = os.environ.get(ENV)
    if not path:
        return
    name = f"nvdla_rtl.{Path(path).stem}"
    if name in sys.modules:
        raise RuntimeError(f"{name} was imported before the mutant could replace it")
    from hypothesis import Phase, settings

    # a failing example kills the mutant: no shrinking (it would re-run the bench many times), no database
    settings.register_profile("mutant", phases=[Phase.explicit, Phase.generate], database=None, print_blob=False)
    settings.load_profile("mutant")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


if __name__ != "__main__":
    _install_mutant()


def main() -> None:
    ap = argparse.ArgumentParser(description="mutation testing of the RTL benches")
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--root", type=Path, default=HERE.parent, help="the project checkout (tests/rtl)")
    args = ap.parse_args()
    if not (args.root / "tests" / "rtl").is_dir():
        raise SystemExit(f"--root {args.root}: no tests/rtl there; mutation testing runs a project checkout's benches")
    unknown = sorted(set(args.only.split(",")) - {m.id for m in MUTANTS}) if args.only else []
    if unknown:
        raise SystemExit(f"--only {','.join(unknown)}: unknown mutant ids (see MUTANTS in rtl/mutate.py)")
    chosen = [m for m in MUTANTS if not args.only or m.id in args.only.split(",")]
    for m in chosen:
        mutated_source(m)  # every edit applies before anything runs
    t0 = time.perf_counter()
    control = run_mutant(CONTROL, args.root)
    if control["status"] != "survived":
        raise SystemExit(f"the unmodified datapath fails the benches ({control['by']}): fix that first")
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda m: run_mutant(m, args.root), chosen))
    for r in results:
        by = r["by"].split("::")[-1] if r["by"] else ""
        print(
            f"  {r['id']:<26} {r['status']:<10} {('tier ' + str(r['tier'])) if r['tier'] else '':<7} {r['what']:<62} {by}"
        )
    killed = sum(r["status"] != "survived" for r in results)
    print(f"\n{killed} of {len(results)} mutants killed ({100 * killed / max(len(results), 1):.0f}%) "
          f"in {time.perf_counter() - t0:.0f} s")  # fmt: skip
    survivors = [r["id"] for r in results if r["status"] == "survived"]
    print("survivors: " + (", ".join(survivors) if survivors else "none"))
    if args.json:
        args.json.write_text(json.dumps({"mutants": results, "killed": killed, "total": len(results)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
