"""The `nvdla` command line. Environment variables and argument parsing live here and nowhere else."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from nvdla_cli.console import warn_config
from nvdla_cli.flags import Needs, check_needs, given, show_defaults
from nvdla_cli.map_commands import add_commands as add_mapper
from nvdla_cli.paths import output_dir, output_file
from nvdla_cli.rtl_commands import add_commands as add_rtl
from nvdla_sim.config import HwConfig, builtin_configs, load_config
from nvdla_sim.energy.model import Energy, area, dram_priced_as, layer_energy, run_energy
from nvdla_sim.engine.bounds import port_rates
from nvdla_sim.engine.stats import ConvDetail, LayerStats, Unit
from nvdla_sim.engine.trace import write_trace
from nvdla_sim.errors import NvdlaError
from nvdla_sim.files import write_json
from nvdla_sim.layers import MAX_DIM, ConvLayer, ConvShape, OperandMode, PdpLayer, PoolMode, PoolSpec, SdpLayer, SdpSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors import simulate
from nvdla_sim.program.sequence import SequenceRun

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def _command(name: str):
    def deco(fn):
        _COMMANDS[name] = fn
        return fn

    return deco


def _precision(text: str) -> Precision:
    try:
        return Precision.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="nvdla", description="NVDLA v1 cycle-approximate simulator and transformer mapper"
    )
    sub = ap.add_subparsers(dest="command", required=True)

    c = sub.add_parser("configs", help="list hardware configs with peak MACs/cycle and CBUF size")
    c.add_argument("--json", action="store_true", help="print JSON instead of a table")

    s = sub.add_parser("simulate", help="simulate one hardware layer, or an NVDLA register program")
    s.add_argument(
        "--hw",
        default=None,
        help="config name or path to a .toml (see `nvdla configs`; default nv_full, or nv_small_rtl_tb "
        "with --trace-test)",
    )
    s.add_argument(
        "--trace-test",
        metavar="DIR",
        help="run an NVDLA register program (a trace-test folder or .cfg; nv_full's traceplayer input.txn) through the model",
    )
    s.add_argument(
        "--loadable",
        metavar="FILE",
        help="run an NVIDIA compiler loadable (.nvdla; nvdla/sw regression/flatbufs/*_fbuf) as the DLA firmware "
        "runs it: its register program timed with the [driver] costs, its outputs computed",
    )
    s.add_argument("--task", type=int, help="with --loadable: the DLA task to run (default: the loadable's only one)")
    s.add_argument(
        "--registers",
        metavar="FILE",
        help="with --loadable: write the firmware's register accesses as a driver's log (.txn: write_reg/read_reg "
        "at the build's byte addresses, which --trace-test replays)",
    )
    s.add_argument(
        "--golden",
        metavar="DIR",
        help="with --loadable: compare the output with a regression golden (nvdla/sw regression/golden/<test>)",
    )
    s.add_argument(
        "--allow-unknown-registers",
        action="store_true",
        help="with --trace-test: time the program even if it writes registers the model does not decode",
    )
    s.add_argument("--op", choices=["matmul", "conv", "sdp", "pdp"], default="matmul")
    s.add_argument("--m", type=_positive, help="matmul rows (tokens)")
    s.add_argument("--k", type=_positive, help="matmul reduction dim (input channels)")
    s.add_argument("--n", type=_positive, help="matmul columns (output channels)")
    s.add_argument("--row", type=_positive,
                   help="matmul: tokens per row of the data cube (default: the mapper's layout, as nvdla map uses)")  # fmt: skip
    s.add_argument("--width", type=_positive, help="conv/sdp/pdp input width")
    s.add_argument("--height", type=_positive, help="conv/sdp/pdp input height")
    s.add_argument("--channels", type=_positive, help="conv/sdp/pdp input channels")
    s.add_argument("--kernels", type=_positive, help="conv output channels")
    s.add_argument("--kernel-size", type=_positive, default=1, help="conv/pdp square kernel size")
    s.add_argument("--stride", type=_positive, default=1)
    s.add_argument("--pad", type=int, default=0)
    s.add_argument("--precision", type=_precision, default=Precision.INT8)
    s.add_argument("--bias", action="store_true", help="fuse a per-channel bias in SDP")
    s.add_argument("--relu", action="store_true", help="fuse ReLU in SDP")
    s.add_argument("--lut", action="store_true", help="fuse an SDP LUT activation (e.g. GELU)")
    s.add_argument("--eltwise", action="store_true", help="fuse an SDP per-element add (residual)")
    s.add_argument("--plan", choices=["search", "default"], default="search", help="tiling: searched or heuristic")
    s.add_argument("--trace", help="write the unit timeline as a Chrome/Perfetto trace JSON")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.add_argument(
        "--report",
        metavar="DIR",
        help="with a driver's log (--trace-test) or --loadable: write report.html (where the time goes, each "
        "operation, the timeline), report.json and trace.json (Perfetto) into DIR",
    )

    lo = sub.add_parser(
        "loadable", help="read an NVIDIA compiler loadable (.nvdla flatbuffer): its tasks, memories and operations"
    )
    lo.add_argument("file", help="the loadable (nvdla_compiler's .nvdla; nvdla/sw regression/flatbufs/*_fbuf)")
    lo.add_argument("--task", type=int, help="the DLA task to show (default: the loadable's only one)")
    lo.add_argument("--json", action="store_true", help="print every descriptor field as JSON")

    dr = sub.add_parser(
        "dram", help="time a stream of DRAM requests on a DRAM device and its controller, cycle by cycle"
    )
    dr.add_argument(
        "stream",
        help="a request stream: one request a line, 'CYCLE ADDRESS R|W [MASTER]' (memory clocks); with masters "
        "named, each one's slowdown against running alone (the masters share one port, offered in order: a "
        "master may also wait behind another's request the controller cannot take yet)",
    )
    dr.add_argument(
        "--device",
        default="LPDDR4-2400",
        help="the device set (default LPDDR4-2400; see nvdla_sim.system.dram.DEVICES)",
    )
    dr.add_argument("--json", action="store_true", help="print the figures as JSON")

    sy = sub.add_parser(
        "system",
        help="several NVDLA instances on one DRAM: each instance's network mapped alone, then run together on the "
        "shared memory; each one's slowdown against running alone",
    )
    sy.add_argument("file", help="a system TOML: dram = CONFIG and [[instance]] tables (see examples/system_*.toml)")
    sy.add_argument("--json", default=None, help="also write the figures to this JSON file")

    add_mapper(sub, _COMMANDS)  # map, zoo, sweep
    add_rtl(sub, _COMMANDS)  # rtl emit / verify / bench
    show_defaults(ap)
    return ap


@_command("system")
def _system(args: argparse.Namespace) -> int:
    from nvdla_mapper.studies.system import load_system, run_system

    out = output_file(args.json, "--json") if args.json is not None else None  # checked before the work
    spec = load_system(args.file)
    res = run_system(spec)
    print(f"{res.name}: {len(res.instances)} NVDLA instances on one DRAM ({res.memory.summary()})")
    print(f"  DRAM at most      {res.peak_gbs:.2f} GB/s, shared max-min fairly at its rate for what they ask together")
    print("  instance         hw                      workload                           alone ms  shared ms  slowdown"
          "  DRAM MB  GB/s alone / shared")  # fmt: skip
    for i in res.instances:
        d = i.as_dict()
        print(f"  {i.name:<16} {i.hw:<23} {i.workload:<33} {d['alone_ms']:>9.3f} {d['shared_ms']:>10.3f} "
              f"{i.slowdown:>8.3f}x {i.dram_bytes / 1e6:>8.1f}  {d['alone_dram_gbs']:.2f} / {d['shared_dram_gbs']:.2f}")  # fmt: skip
    print(f"  together          {res.makespan_ns / 1e6:.3f} ms until the last instance ends; NVDLA silicon "
          f"{res.area_mm2:.3f} mm2 (" + ", ".join(f"{i.name} {i.area_mm2:.3f}" for i in res.instances) + ")")  # fmt: skip
    print(f"  energy            {res.total_uj:,.1f} uJ: NVDLA cores {sum(i.core_uj for i in res.instances):,.1f} "
          f"(" + ", ".join(f"{i.name} {i.core_uj:,.1f}" for i in res.instances) + f"), DRAM {res.dram_uj:,.1f} "
          f"({dram_priced_as(spec.dram)}; standby and refresh {res.dram_background_uj:,.1f})")  # fmt: skip
    if out is not None:
        write_json(out, res.as_dict())
        print(f"wrote json: {out}")
    return 0


@_command("dram")
def _dram(args: argparse.Namespace) -> int:
    import dataclasses

    from nvdla_sim.system.dram import StreamFigures, device, master_figures, read_requests, run_requests

    dev = device(args.device)
    stream = read_requests(args.stream, dev)
    requests = list(stream.requests)
    times = run_requests(dev, requests)
    f = StreamFigures.of(dev, requests, times)
    masters = master_figures(dev, stream, times) if len(stream.master_names) > 1 else []
    e = f.energy
    if args.json:
        doc = dataclasses.asdict(f) | {
            "energy": dataclasses.asdict(e) | {"total": round(e.total, 1)},
            "masters": [dataclasses.asdict(m) | {"slowdown": round(m.slowdown, 4)} for m in masters],
        }
        print(json.dumps(doc, indent=1))
        return 0
    print(f"{args.stream} on {dev.name} (one channel, {dev.bus_bits}-bit bus, tCK {dev.tck_ns} ns; {dev.source})")
    print(f"  requests          {f.requests:,} ({f.reads:,} reads, {f.writes:,} writes) of {dev.request_bytes} bytes")
    print(f"  time              {f.cycles:,} memory clocks = {f.ns:,.1f} ns (to the last request completed)")
    print(
        f"  bandwidth         requests served {f.served_gbs:.2f} GB/s (a write as the controller buffers it); the "
        f"bus carried {f.bus_gbs:.2f} of its {f.peak_gbs:.2f}"
    )
    if f.reads:
        print(
            f"  read latency      mean {f.read_latency_mean:,.1f}, p90 {f.read_latency_p90:,.0f}, "
            f"max {f.read_latency_max:,} clocks (from the controller taking the request to its data)"
        )
    print(f"  commands          {f.activates:,} activates, {f.refreshes:,} refreshes")
    print(
        f"  energy            {e.total / 1e3:,.1f} nJ, {f.energy_pj_per_bus_byte:.1f} pJ a byte the bus carried: "
        f"activates {e.activate / 1e3:,.1f}, reads {e.read / 1e3:,.1f}, writes {e.write / 1e3:,.1f}, "
        f"refreshes {e.refresh / 1e3:,.1f}, standby {e.background / 1e3:,.1f} nJ (the device's IDD currents)"
    )
    if masters:
        print("  master            requests    GB/s shared / alone    read latency, clocks: shared / alone   slowdown")
        for m in masters:
            print(
                f"  {m.name:<16}{m.requests:>10,}  {m.shared_gbs:>9.2f} / {m.alone_gbs:<9.2f}"
                f"  {m.shared_read_latency:>22,.1f} / {m.alone_read_latency:<13,.1f} {m.slowdown:>8.2f}x"
            )
    return 0


@_command("loadable")
def _loadable(args: argparse.Namespace) -> int:
    import dataclasses

    from nvdla_sim.program.loadable.container import MemoryFlags, read_loadable
    from nvdla_sim.program.loadable.network import dla_network

    lo = read_loadable(args.file)
    net = dla_network(lo, args.task)
    if args.json:
        doc = {
            "file": lo.path,
            "loadable_version": str(lo.version),
            "tasks": [dataclasses.asdict(t) for t in lo.tasks],
            "submits": [list(s.task_ids) for s in lo.submits],
            "memories": [dataclasses.asdict(m) for m in lo.memories],
            "tensors": [dataclasses.asdict(t) for t in lo.tensors],
            "dla_task": net.task.id,
            "network": dataclasses.asdict(net.desc),
            "operations": [
                {
                    "index": o.index,
                    "type": o.op_type.name,
                    "common": dataclasses.asdict(o.common),
                    "op": dataclasses.asdict(o.op),
                    "surface": dataclasses.asdict(o.surface),
                }
                for o in net.operations
            ],
            "luts": len(net.luts),
        }
        print(json.dumps(doc, indent=1, default=str))
        return 0
    tasks = ", ".join(f"{t.interface.name} {t.id}" for t in lo.tasks)
    print(f"{lo.path}: loadable {lo.version}, {len(lo.tasks)} task(s): {tasks}")
    print(f"  submitted in turn: {' '.join('[' + ' '.join(map(str, s.task_ids)) + ']' for s in lo.submits) or '-'}")
    total = sum(m.size for m in lo.memories)
    filled = sum(1 for m in lo.memories if MemoryFlags.SET in m.flags)
    print(
        f"  memories: {len(lo.memories)} ({total:,} bytes; {filled} filled from blobs; inputs "
        f"{', '.join(f'mem{i}' for i in net.inputs()) or 'none'}; outputs {', '.join(f'mem{i}' for i in net.outputs()) or 'none'})"
    )
    for t in lo.tensors:
        n, c, h, w = t.nchw
        print(f"  tensor {t.name!r}: mem{t.mem_id}+{t.offset}, {w}x{h}x{c} (n {n}), {t.data_type.name.lower()}")
    d = net.desc
    interface = ".".join(map(str, net.interface))
    print(
        f"DLA task {net.task.id}: {d.num_operations} operations, {d.num_luts} LUTs, {d.num_rois} ROI(s); "
        f"firmware interface {interface} descriptors"
    )
    rows = [("op", "reads", "writes", "what", "then")]
    for o in net.operations:
        then = " ".join(
            f"{net.operations[i].name}({e.name.lower()})" for i, e in o.consumers() if i < len(net.operations)
        )
        rows.append((o.name, net.cube_text(o.source), net.cube_text(o.destination), o.op.describe(), then or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  " + "  ".join(f"{v:<{widths[i]}}" for i, v in enumerate(r[:4])) + "  " + r[4])
    return 0


@_command("configs")
def _configs(args: argparse.Namespace) -> int:
    rows = []
    for name, path in builtin_configs().items():
        hw = load_config(path)
        rows.append(
            {
                "name": name,
                "fingerprint": hw.fingerprint,
                "precisions": [p.value for p in hw.precisions],
                "peak_macs_per_cycle": {p.value: hw.peak_macs_per_cycle(p) for p in hw.precisions},
                "cbuf_kib": hw.cbuf_bytes // 1024,
                "cbuf_banks": hw.cbuf.bank_count,
                "dram_bytes_per_cycle": port_rates(hw)[1],  # the memory model's most (its device's, its path's)
                "clock_mhz": hw.clock_mhz,
                # the components x the area overhead fitted on NVIDIA's table (docs/energy.md)
                "area_mm2": round(area(hw).total_um2 * 1e-6, 4),
                "tech_node_nm": hw.tech.node_nm,
                "file": str(path),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    w = max(16, *(len(r["name"]) + 2 for r in rows))
    print(f"{'config':<{w}}{'MACs/cycle':<28}{'CBUF':>9}{'banks':>7}{'DRAM B/cyc':>12}{'clock':>10}{'area mm2':>17}")
    for r in rows:
        macs = " ".join(f"{k}:{v}" for k, v in r["peak_macs_per_cycle"].items())
        print(
            f"{r['name']:<{w}}{macs:<28}{r['cbuf_kib']:>7}Ki{r['cbuf_banks']:>7}"
            f"{r['dram_bytes_per_cycle']:>12g}{r['clock_mhz']:>7g}MHz{r['area_mm2']:>9.3f} @{r['tech_node_nm']:g}nm"
        )
    print("area: the components (MACs, SRAMs, adders) x the overhead fitted on NVIDIA's primer table; docs/energy.md")
    return 0


def _need(args: argparse.Namespace, names: Sequence[str], op: str) -> None:
    missing = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n) is None]
    if missing:
        raise NvdlaError(f"--op {op} needs {' '.join(missing)}")


_LAYER_FLAGS = ("op", "m", "k", "n", "row", "width", "height", "channels", "kernels", "kernel_size", "stride",
                "pad", "precision", "bias", "relu", "lut", "eltwise", "plan", "trace")  # fmt: skip
_OPS = {  # which layer flags each --op reads
    "matmul": {"m", "k", "n", "row", "precision", "bias", "relu", "lut", "eltwise", "plan"},
    "conv": {"width", "height", "channels", "kernels", "kernel_size", "stride", "pad", "precision", "bias", "relu",
             "lut", "eltwise", "plan"},
    "sdp": {"width", "height", "channels", "precision", "bias", "relu", "lut", "eltwise"},
    "pdp": {"width", "height", "channels", "kernel_size", "stride", "precision"},
}  # fmt: skip
_SIMULATE_NEEDS = [
    Needs("allow_unknown_registers", lambda a: a.trace_test is not None, "goes with --trace-test"),
    Needs("loadable", lambda a: a.trace_test is None, "and --trace-test each run a program: give one"),
    Needs("task", lambda a: a.loadable is not None, "goes with --loadable"),
    Needs("golden", lambda a: a.loadable is not None, "goes with --loadable"),
    Needs("registers", lambda a: a.loadable is not None, "goes with --loadable"),
    Needs("report", lambda a: a.loadable is not None or a.trace_test is not None,
          "reports a driver's log (--trace-test) or a loadable (--loadable); `nvdla map --report` a model"),
    *(
        Needs(f, lambda a: a.trace_test is None and a.loadable is None,
              "describes a layer; --trace-test and --loadable run the program's own layers")
        for f in _LAYER_FLAGS
        if f not in ("trace",)
    ),
    *(
        Needs(f, lambda a, f=f: f in _OPS[a.op], lambda a: f"is not read by --op {a.op}, which takes "
              + " ".join("--" + x.replace("_", "-") for x in sorted(_OPS[a.op])))
        for f in sorted(set().union(*_OPS.values()))
    ),
]  # fmt: skip


@_command("simulate")
def _simulate(args: argparse.Namespace) -> int:
    check_needs(args, _SIMULATE_NEEDS)
    if args.trace is not None:
        output_file(args.trace, "--trace")
    if args.report is not None:
        output_dir(args.report, "--report")
    if args.trace_test is not None:
        return _simulate_trace_test(args)
    if args.loadable is not None:
        return _simulate_loadable(args)
    hw = load_config(args.hw or "nv_full")
    warn_config(hw)
    prec = args.precision
    hw.check_precision(prec)
    spec = SdpSpec(
        bias=OperandMode.PER_KERNEL if args.bias else OperandMode.NONE,
        relu=args.relu,
        lut=args.lut,
        eltwise=OperandMode.PER_ELEMENT if args.eltwise else OperandMode.NONE,
    )
    if args.op in ("matmul", "conv"):
        if args.op == "matmul":
            _need(args, ["m", "k", "n"], "matmul")
            name = f"matmul_{args.m}x{args.k}x{args.n}"
            if max(args.m, args.k, args.n) > MAX_DIM:
                if args.row is not None:
                    raise NvdlaError(f"--row: a matmul past {MAX_DIM} in a dimension is split by the mapper's layout")
                return _simulate_split_matmul(args, hw, spec, name)
            if args.row is not None:
                if args.m % args.row or args.row > MAX_DIM:
                    raise NvdlaError(f"--row {args.row} must divide --m {args.m} (tokens per row of the data cube)")
                shape = ConvShape.matmul(args.m, args.k, args.n, row=args.row)
            else:  # the layout `nvdla map` gives this matmul
                from nvdla_mapper.lowering.rules import LoweringContext, matmul_layout

                ctx = LoweringContext.of(hw=hw, precision=prec)
                shape = matmul_layout(args.m, args.k, args.n, ctx)
        else:
            _need(args, ["width", "height", "channels", "kernels"], "conv")
            ks = args.kernel_size
            shape = ConvShape.square(
                args.width, args.height, args.channels, args.kernels, kernel=ks, stride=args.stride, pad=args.pad
            )
            name = f"conv_{args.width}x{args.height}x{args.channels}_{ks}x{ks}x{args.kernels}"
        layer = ConvLayer(name, shape, prec, spec)
        plan = None
        if args.plan == "search":
            from nvdla_mapper.search.tiling_search import search_plan

            plan = search_plan(layer, hw).plan
        stats = simulate(layer, hw, plan)
    elif args.op == "sdp":
        _need(args, ["width", "height", "channels"], "sdp")
        layer = SdpLayer("sdp", args.width, args.height, args.channels, prec, spec)
        stats = simulate(layer, hw)
    else:
        _need(args, ["width", "height", "channels"], "pdp")
        ks = args.kernel_size
        pool = PoolSpec(PoolMode.MAX, ks, ks, args.stride, args.stride)
        layer = PdpLayer("pdp", args.width, args.height, args.channels, prec, pool)
        stats = simulate(layer, hw)
    energy = _layer_energy(layer, stats, hw)
    if args.trace is not None:
        path = write_trace(
            args.trace, stats.events, clock_mhz=hw.clock_mhz, process=f"{stats.name} on {hw.fingerprint}"
        )
        print(f"trace: {path}", file=sys.stderr)
    if args.json:
        print(json.dumps({"hw": hw.fingerprint, **stats.to_dict(), "energy": energy}, indent=2))
    else:
        print(format_layer(stats, hw.clock_mhz, hw.fingerprint))
        print(_energy_line(energy, hw))
    return 0


def _layer_energy(layer, stats: LayerStats, hw) -> dict:
    """One layer's energy (nJ) as `nvdla simulate` reports it: its units, the always-on power and leakage
    over its cycles, the DRAM's apart (nvdla_sim.energy; docs/energy.md)."""
    return _energy_dict(run_energy(layer_energy(layer, stats, hw), hw, stats.cycles))


def _energy_line(energy: dict, hw) -> str:
    by_unit = ", ".join(f"{u} {v:,.1f}" for u, v in energy["by_unit_nj"].items() if v)
    return (
        f"  energy            {energy['core_nj']:,.1f} nJ in NVDLA ({by_unit}),"
        f" DRAM {energy['dram_nj']:,.1f} nJ ({dram_priced_as(hw)}); docs/energy.md"
    )


def _energy_dict(run) -> dict:
    return {
        "core_nj": round(run.core * 1e-3, 3),
        "by_unit_nj": {u: round(v * 1e-3, 3) for u, v in run.by_unit().items()},
        "leakage_nj": round(run.leakage * 1e-3, 3),
        "dram_nj": round(run.dram * 1e-3, 3),
        "calibrated": True,
    }


def _simulate_split_matmul(args: argparse.Namespace, hw, spec: SdpSpec, name: str) -> int:
    """A matmul past the 8192 register fields: the mapper's split into hardware layers, each simulated
    with its searched plan and charged its launch, pipeline and completion; they run one after another."""
    from nvdla_mapper.lowering.rules import LoweringContext, matmul_layers
    from nvdla_mapper.passes import layer_cycles

    ctx = LoweringContext.of(hw=hw, precision=args.precision)
    rows = []
    dynamic = Energy()
    for layer in matmul_layers(name, args.m, args.k, args.n, ctx, spec):
        st, cycles = layer_cycles(layer, hw)
        rows.append((layer.name, cycles, st.macs))
        dynamic = dynamic + layer_energy(layer, st, hw)
    total = sum(c for _, c, _ in rows)
    energy = _energy_dict(run_energy(dynamic, hw, total))
    if args.json:
        layers = [{"name": n, "cycles": c, "macs": m} for n, c, m in rows]
        doc = {"hw": hw.fingerprint, "name": name, "cycles": total, "layers": layers, "energy": energy}
        print(json.dumps(doc, indent=2))
        return 0
    print(f"{name} on {hw.fingerprint}: split into {len(rows)} hardware layers (8192-per-dimension register fields)")
    print(
        f"  cycles            {total:,}  ({total / hw.clock_mhz:,.2f} us at {hw.clock_mhz:g} MHz), op enable to interrupt, in sequence"
    )
    print(f"  MACs              {sum(m for _, _, m in rows):,}")
    print(_energy_line(energy, hw))
    for n, c, _ in rows[:12]:
        print(f"    {n:<52}{c:>14,}")
    if len(rows) > 12:
        print(f"    ... {len(rows) - 12} more")
    return 0


def _simulate_trace_test(args: argparse.Namespace) -> int:
    from nvdla_sim.program.decode import describe
    from nvdla_sim.program.run import run_program, unit_cycles

    hw = load_config(args.hw or "nv_small_rtl_tb")
    run = run_program(args.trace_test, hw, strict=not args.allow_unknown_registers)
    if run.sequence is None:
        for flag, value in (("--trace", args.trace), ("--report", args.report)):
            if value is not None:
                raise NvdlaError(
                    f"{flag} with --trace-test writes the timeline of a driver's log; a trace test's operations "
                    "are timed together (its cycles are printed; --json has each operation's)"
                )
    if args.trace is not None:
        from nvdla_sim.engine.trace import span_events, write_trace_doc

        write_trace_doc(args.trace, span_events(run.sequence.spans(), clock_mhz=hw.clock_mhz, process=run.name))
        print(f"wrote trace: {args.trace}", file=sys.stderr)
    dynamic = Energy()
    for o in run.operations:
        dynamic = dynamic + layer_energy(o.layer, o.stats, hw)
    energy = _energy_dict(run_energy(dynamic, hw, run.cycles))
    if args.json or args.report is not None:
        doc = {
            "test": run.name,
            "hw": hw.fingerprint,
            "cycles": run.cycles,
            "chained": run.span is not None,  # cycles: first op enable -> last interrupt of the chain
            # a driver's log: cycles from its first register access to the last end, replayed (sequence)
            **({"sequence": run.sequence.to_dict()} if run.sequence is not None else {}),
            "operations": [
                {
                    "kind": o.kind,
                    "cycles": o.cycles,
                    "launch": o.launch,
                    "pipeline": o.pipeline,
                    "completion": o.completion,
                    "stats": o.stats.to_dict(),
                }
                for o in run.operations
            ],
            "layers": [describe(op) for op in run.decoded.operations],
            "unknown_registers": run.decoded.unknown,
            "checks": run.checks,
            "energy": energy,
        }
        if args.report is not None:
            _sequence_report(args.report, run.name, hw, doc, run.sequence)
        if args.json:
            print(json.dumps(doc, indent=2))
            return 0 if all(c["match"] is not False for c in run.checks) else 1  # exit 1 on a difference
    print(f"{run.name} on {hw.fingerprint}")
    if run.sequence is not None:
        _print_sequence(run.sequence, hw)
    elif run.span is not None:  # convolutions in sequence, timed as one chain of hardware layers
        n = len(run.operations)
        print(f"  cycles (first op enable -> last interrupt, {n} hardware layers in sequence)  {run.cycles:,}")
        print("  each hardware layer alone:")
    else:
        print(f"  cycles (op enable -> interrupt)  {run.cycles:,}")
    for o in run.operations if run.sequence is None else ():
        print(
            f"  {o.kind:<5} {o.cycles:>10,} = launch {o.launch} + stream {o.stats.cycles:,} + pipeline {o.pipeline}"
            f" + completion {o.completion}   bound by {o.stats.bound.value}"
        )
    units = unit_cycles(run)
    print("  unit busy cycles  " + ", ".join(f"{u} {c:,}" for u, c in units.items()))
    t = sum((o.stats.traffic for o in run.operations[1:]), run.operations[0].stats.traffic)
    print(f"  memory read/write {t.dram_read:,} / {t.dram_write:,} bytes")
    print(_energy_line(energy, hw))
    if run.decoded.unknown:
        print("  registers not understood (ignored): " + ", ".join(run.decoded.unknown))
    for c in run.checks:
        verdict = "match" if c["match"] else "MISMATCH"
        if c["kind"] == "memory transfers":  # a virtual platform's log: every byte it wrote, against the model's
            if c["match"] is None:
                print(
                    f"  check memory    {c['bytes_written']:,} bytes the log wrote; not computed: {c['not_computed']}"
                )
                continue
            print(f"  check memory    {c['bytes_written']:,} bytes the log wrote, {c['mismatched_bytes']:,} differ"
                  f"{'' if c['match'] else ' (first at ' + c['first_mismatch'] + ')'}  {verdict}")  # fmt: skip
            continue
        print(
            f"  check {c['kind']:<5} 0x{c['base']:08x} + 0x{c['size']:x}: golden CRC 0x{c['golden_crc']:08x}, "
            f"model CRC 0x{c['model_crc']:08x}  {verdict}"
        )
    return 0 if all(c["match"] is not False for c in run.checks) else 1


def _simulate_loadable(args: argparse.Namespace) -> int:
    from nvdla_sim.program.loadable.run import run_loadable

    hw = load_config(args.hw or "nv_full")
    if args.registers is not None:
        output_file(args.registers, "--registers")
    run = run_loadable(args.loadable, hw, task=args.task, golden=args.golden)
    if args.registers is not None:
        from nvdla_sim.files import write_text
        from nvdla_sim.registers.trace_io import txn_text

        write_text(args.registers, txn_text(run.program.commands, hw.driver.address_map))
        print(f"wrote the firmware's register accesses: {args.registers}", file=sys.stderr)
    if args.trace is not None:
        from nvdla_sim.engine.trace import span_events, write_trace_doc

        write_trace_doc(args.trace, span_events(run.run.spans(), clock_mhz=hw.clock_mhz, process=run.name))
        print(f"wrote trace: {args.trace}", file=sys.stderr)
    checks = [
        {"golden": c.folder, "golden_md5": c.golden_md5, "model_md5": c.model_md5, "elements": c.elements,
         "mismatched_elements": c.mismatched, "match": c.match}
        for c in run.checks
    ]  # fmt: skip
    if args.json or args.report is not None:
        doc = {
            "loadable": str(run.net.loadable.path),
            "task": run.net.task.id,
            "hw": hw.fingerprint,
            "cycles": run.cycles,  # the firmware's first register access -> the last operation's end
            "firmware_rounds": run.rounds,
            "sequence": run.run.to_dict(),
            "outputs": [{"tensor": o.tensor, "dimg_md5": o.md5} for o in run.outputs],
            "outputs_not_computed": run.not_computed,
            "checks": checks,
        }
        if args.report is not None:
            _sequence_report(args.report, f"{run.name} task {run.net.task.id}", hw, doc, run.run)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"{run.name} task {run.net.task.id} on {hw.fingerprint}: {len(run.net.operations)} firmware operations "
              f"as the DLA firmware programs them")  # fmt: skip
        _print_sequence(run.run, hw)
        for o in run.outputs:
            print(f"  output {o.tensor}: runtime image (o_000000.dimg) md5 {o.md5}")
        if run.not_computed:
            print(f"  outputs not computed: {run.not_computed}")
        for c in checks:
            verdict = "match" if c["match"] else f"MISMATCH ({c['mismatched_elements']} of {c['elements']} elements)"
            print(f"  golden {c['golden']}: md5 {c['golden_md5']}, model {c['model_md5']}  {verdict}")
    return 0 if all(c["match"] for c in checks) else 1


def _sequence_report(out: str, name: str, hw: HwConfig, doc: dict, seq: SequenceRun) -> None:
    """--report of a replayed program: report.json (the --json document), report.html and trace.json."""
    from nvdla_mapper.reports.html import write_sequence_html
    from nvdla_sim.engine.trace import span_events, write_trace_doc
    from nvdla_sim.files import write_json

    folder = Path(out)
    write_json(folder / "report.json", doc)
    page = write_sequence_html({"name": name, "hw": hw.fingerprint, "clock_mhz": hw.clock_mhz, **doc}, folder)
    write_trace_doc(folder / "trace.json", span_events(seq.spans(), clock_mhz=hw.clock_mhz, process=name))
    print(f"wrote {page}, report.json and trace.json", file=sys.stderr)


def _print_sequence(seq, hw) -> None:
    """A driver's log replayed (program.sequence.SequenceRun): the network's cycles and where they went."""
    write, read, interrupt = seq.costs
    print(f"  cycles (first register access -> last operation's end, as the driver ran it)  {seq.cycles:,}")
    print(
        f"  driver            profile {seq.profile} ({write:g} cycles a register write, {read:g} a read, "
        f"{interrupt:g} an interrupt; [driver])"
    )
    print(
        f"  register accesses {seq.writes:,} writes, {seq.reads:,} reads: {seq.csb_cycles:,.0f} cycles; the driver "
        f"waited {seq.wait_cycles:,.0f} cycles for operations to end"
    )
    busy = seq.busy_by_processor()
    print("  processor busy    " + ", ".join(f"{k} {v:,} ({v / max(seq.cycles, 1):.1%})" for k, v in busy.items()))
    print(
        f"  overlap           {seq.overlap_cycles():,} cycles with two or more operations at once (each is timed "
        "alone: the memory they share is not modelled there)"
    )
    print(f"  {len(seq.operations)} operations (log line of the enable, start -> end in cycles):")
    for t in seq.operations[:40]:
        op = t.operation
        print(f"    {op.name:<22} {'+'.join(op.processors):<10} line {op.line:>6}  {t.start:>12,.0f} -> {t.end:>12,.0f}"
              f"  ({t.cycles:,})")  # fmt: skip
    if len(seq.operations) > 40:
        print(f"    ... {len(seq.operations) - 40} more (--json lists them all)")


def format_layer(stats: LayerStats, clock_mhz: float, fingerprint: str) -> str:
    us = stats.cycles / clock_mhz
    t = stats.traffic
    lines = [
        f"{stats.name} on {fingerprint}",
        f"  cycles            {stats.cycles:,}  ({us:,.2f} us at {clock_mhz:g} MHz)",
        f"  roofline floor    {stats.lower_bound_cycles:,} cycles ({stats.lower_bound_cycles / max(stats.cycles, 1):.1%} of simulated)",
        *(
            [f"  re-fetch          {stats.detail.refetch_factor:.2f}x the compulsory reads (input, weights once)"]
            if isinstance(stats.detail, ConvDetail)
            else []
        ),
        f"  MACs              {stats.macs:,} on the hardware",
        f"  MAC utilization   {stats.mac_utilization:.1%} (hardware MACs over the peak x cycles)",
        f"  bound by          {stats.bound.value}",
        *(
            [
                "  time made of      "
                + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in stats.detail.time_breakdown.to_dict().items())
            ]
            if isinstance(stats.detail, ConvDetail)
            else []
        ),
        f"  DRAM read/write   {t.dram_read:,} / {t.dram_write:,} bytes",
    ]
    if t.sram_read or t.sram_write:
        lines.append(f"  SRAM read/write   {t.sram_read:,} / {t.sram_write:,} bytes")
    lines.append("  unit              busy      stall   busy%")
    for u in Unit:
        s = stats.units.get(u)
        if s is not None:
            lines.append(f"  {u.value:<12}{s.busy:>10,} {s.stall:>10,}  {stats.unit_utilization(u):6.1%}")
    if stats.plan:
        lines.append("  tiling            " + ", ".join(f"{k}={v}" for k, v in stats.plan.to_dict().items()))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parser.parse_args(argv)  # an option's type may refuse its value (--prune: options.Pruning)
        args.given = given(parser, argv)
        return _COMMANDS[args.command](args)
    except NvdlaError as e:
        print(f"nvdla: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # pragma: no cover
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
