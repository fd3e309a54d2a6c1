"""Side by side with SCALE-Sim and ZigZag on the same matmuls, on the closest equivalents of NVDLA builds.

    python benchmarks/compare_peers.py --setup                      # make the peers' venvs (PyPI)
    python benchmarks/compare_peers.py --workload reduced            # one small BERT layer (minutes)
    python benchmarks/compare_peers.py --workload rtl                # nv_small shapes measured on NVIDIA's RTL
    python benchmarks/compare_peers.py --workload bert-base --timeout 3600 --json out.json

Each tool runs in a fresh process of its own (the peers in their own venvs, pinned in benchmarks/peers/;
they are not dependencies of the project) on the same list of distinct matmul shapes (m rows x k
reduction x n outputs, INT8); a shape that occurs several times in the model (heads, layers) is run once
and counted that many times by every tool alike. Per tool the table gives wall time of the simulation
(imports excluded), peak resident memory of its process, and per layer compute and total cycles with
their ratio to this project's. For the `rtl` workload the cycles NVIDIA's nv_small RTL took on the
same shapes (validation/data/nvdla_rtl_transformer.json) are the arbiter.

Hardware equivalents (from the project's configs): SCALE-Sim gets a weight-stationary array of atomic_c
rows x atomic_k columns, CBUF split evenly into its ifmap and filter SRAMs, the CACC assembly buffer as
its ofmap SRAM and the DRAM bytes per cycle as its interface bandwidth (1-byte words); ZigZag gets the
description in benchmarks/peers/run_zigzag.py (same array, CBUF, CACC and DRAM figures).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(__file__).resolve().parent / "peers"
PEER_NAMES = ("scalesim", "zigzag")
# CACC assembly buffer for direct convolution at INT8: 136 B x 128 entries on nv_full (atomic_k 32:
# 32 kernels x 34-bit partial sums), unit_description.rst "Convolution Accumulator"; other builds are
# scaled by atomic_k (an assumption: the document gives nv_full's figure only).
CACC_ENTRIES = 128
CACC_BITS_PER_KERNEL = 34


def workload(name: str) -> tuple[str, list[tuple[str, int, int, int, int]], dict[str, int]]:
    """(config names, [(layer, m, k, n, count)], RTL cycles by layer) of a named workload."""
    if name in ("bert-base", "reduced"):
        seq, hid, heads, ffn, layers = (128, 768, 12, 3072, 12) if name == "bert-base" else (32, 256, 4, 1024, 1)
        hd = hid // heads
        shapes = [
            ("proj", seq, hid, hid, 4 * layers),  # q, k, v, attention output
            ("ffn1", seq, hid, ffn, layers),
            ("ffn2", seq, ffn, hid, layers),
            ("qk", seq, hd, seq, heads * layers),  # one head's Q K^T
            ("pv", seq, seq, hd, heads * layers),
        ]
        return "nv_small,nv_full", shapes, {}
    if name == "rtl":
        data = json.loads((ROOT / "validation/data/nvdla_rtl_transformer.json").read_text())
        shapes, rtl = [], {}
        for row in data["rows"]:
            found = re.match(r"tf_(?:proj_m|attn_s)(\d+)_", row["name"])
            if not found:
                continue
            # a split layer is several hardware layers (bands x kernel tiles): M from the task's name, K its
            # input channels, N from the outputs all its hardware layers write (1x1, no padding)
            m, k = int(found.group(1)), row["layers"][0]["shape"]["in_c"]
            n = sum(ly["shape"]["in_w"] * ly["shape"]["in_h"] * ly["shape"]["out_k"] for ly in row["layers"]) // m
            label = f"m{m}_k{k}_n{n}"
            if label not in rtl:
                shapes.append((label, m, k, n, 1))
                rtl[label] = row["span_cycles"]
        return "nv_small_rtl_tb", shapes, rtl
    raise SystemExit(f"--workload {name}: choose bert-base, reduced or rtl")


def hw_job(cfg_name: str, shapes, workdir: Path) -> dict:
    from nvdla_sim import load_config

    hw = load_config(cfg_name)
    cbuf = hw.cbuf.bank_count * hw.cbuf.bank_depth * hw.cbuf.bank_width_bytes
    acc = math.ceil(hw.mac.atomic_k * CACC_BITS_PER_KERNEL / 8) * CACC_ENTRIES
    bpc = hw.dram_bytes_per_cycle
    return {
        "name": cfg_name,
        "array": [hw.mac.atomic_c, hw.mac.atomic_k],
        "cbuf_bytes": cbuf,
        "cbuf_entry_bytes": hw.cbuf.bank_width_bytes,
        "ifmap_kb": cbuf // 2 // 1024,
        "filter_kb": cbuf // 2 // 1024,
        "ofmap_kb": max(1, math.ceil(acc / 1024)),
        "acc_bytes": acc,
        "dram_bytes_per_cycle": max(1, round(bpc)),
        "workdir": str(workdir),
        "layers": [[n, m, k, nn] for n, m, k, nn, _ in shapes],
    }


def project_job(job: dict) -> dict:
    """This project on the job's matmuls (run in a child process: cold caches, own peak memory)."""
    from nvdla_mapper.lowering.rules import LoweringContext, matmul_layers
    from nvdla_mapper.passes import layer_cycles
    from nvdla_mapper.search.tiling_search import search_plan
    from nvdla_sim import Precision, load_config
    from nvdla_sim.engine.stats import Unit
    from nvdla_sim.layers import ConvLayer, SdpSpec

    hw = load_config(job["name"])
    ctx = LoweringContext.of(hw=hw, precision=Precision.INT8)
    out, t_all = {}, time.perf_counter()
    for name, m, k, n in job["layers"]:
        t0 = time.perf_counter()
        total = compute = candidates = 0
        for layer in matmul_layers(name, m, k, n, ctx, SdpSpec()):
            st, cycles = layer_cycles(layer, hw)
            total += cycles
            compute += st.units[Unit.CMAC].busy
            candidates += search_plan(layer, hw).candidates if isinstance(layer, ConvLayer) else 0  # cached
        out[name] = {"total": total, "compute": compute, "search_s": time.perf_counter() - t0,
                     "candidates": candidates}  # fmt: skip
    return {"layers": out, "wall_s": time.perf_counter() - t_all}


def whole_model_job() -> dict:
    """This project's whole BERT-base (seq 128) on nv_full, every op mapped and simulated (child process)."""
    from nvdla_mapper.frontends.presets import build_graph, preset
    from nvdla_mapper.passes import map_model
    from nvdla_sim import Precision, load_config

    t0 = time.perf_counter()
    hw = load_config("nv_full")
    res = map_model(build_graph(preset("bert-base"), batch=1, seq=128), hw, precision=Precision.INT8, batch=1, seq=128)
    return {"wall_s": time.perf_counter() - t0, "cycles": res.total_cycles, "tasks": len(res.results)}


def whole_model() -> dict:
    """In-process time of the whole-model map and the wall time of the CLI command (imports included)."""
    inner = run_child([sys.executable, __file__, "--whole-model"], 600)
    t0 = time.perf_counter()
    cmd = [
        sys.executable,
        "-m",
        "nvdla_cli.main",
        "map",
        "bert-base",
        "--hw",
        "nv_full",
        "--seq",
        "128",
        "--precision",
        "int8",
    ]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    inner["cli_wall_s"] = time.perf_counter() - t0
    return inner


def _peak_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_child(cmd: list[str], timeout: float) -> dict:
    """Run one tool's process; its JSON result with peak memory (MB) and process wall time added."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _peak_kb(proc.pid))
        if time.perf_counter() - t0 > timeout:
            proc.kill()
            proc.wait()
            return {"error": f"did not finish in {timeout:.0f} s", "peak_mb": peak / 1024,
                    "process_s": time.perf_counter() - t0}  # fmt: skip
        time.sleep(0.2)
    out, err = proc.communicate()
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        tail = (err.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {proc.returncode}: {tail}", "peak_mb": peak / 1024}
    res = json.loads(lines[-1])
    res["peak_mb"] = peak / 1024
    res["process_s"] = time.perf_counter() - t0
    return res


def peer_python(peers_dir: Path, peer: str) -> Path:
    return peers_dir / peer / "bin" / "python"


def setup(peers_dir: Path) -> None:
    for peer in PEER_NAMES:
        py = peer_python(peers_dir, peer)
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", str(peers_dir / peer)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-r", str(PEERS / f"{peer}.txt")], check=True)
        print(f"{peer}: {py}")


def compare(workload_name: str, configs: str | None, peers: list[str], peers_dir: Path, timeout: float) -> dict:
    default_cfgs, shapes, rtl = workload(workload_name)
    report = {"workload": workload_name, "shapes": [list(s) for s in shapes], "rtl_cycles": rtl, "configs": {}}
    tmp = Path(tempfile.mkdtemp(prefix="peers-"))
    for cfg in (configs or default_cfgs).split(","):
        runs = {}
        for tool in ("project", *peers):
            job = hw_job(cfg, shapes, tmp / cfg / tool)
            path = tmp / f"{cfg}-{tool}.json"
            path.write_text(json.dumps(job))
            if tool == "project":
                cmd = [sys.executable, __file__, "--project-job", str(path)]
            else:
                py = peer_python(peers_dir, tool)
                if not py.exists():
                    runs[tool] = {"error": f"no venv at {py.parent.parent}: run with --setup first"}
                    continue
                cmd = [str(py), str(PEERS / f"run_{tool}.py"), str(path)]
            print(f"  {cfg}: running {tool} ...", file=sys.stderr, flush=True)
            runs[tool] = run_child(cmd, timeout)
        report["configs"][cfg] = runs
    return report


def _fmt(v) -> str:
    return f"{v:,}" if isinstance(v, int) else str(v)


def print_report(rep: dict) -> None:
    shapes = rep["shapes"]
    for cfg, runs in rep["configs"].items():
        tools = list(runs)
        print(f"\n== {rep['workload']} on {cfg} (cycles per layer; ratio = tool / project)")
        head = ["layer", "m x k x n", "count"] + (["RTL"] if rep["rtl_cycles"] else [])
        for t in tools:
            head += [f"{t} total", f"{t} compute"] + ([] if t == "project" else [f"{t}/proj"])
        rows = []
        for name, m, k, n, count in shapes:
            row = [name, f"{m}x{k}x{n}", str(count)] + ([_fmt(rep["rtl_cycles"][name])] if rep["rtl_cycles"] else [])
            base = runs["project"].get("layers", {}).get(name, {}).get("total")
            for t in tools:
                lay = runs[t].get("layers", {}).get(name)
                if lay is None:
                    row += ["-", "-"] + ([] if t == "project" else ["-"])
                    continue
                row += [_fmt(lay["total"]), _fmt(lay["compute"])]
                if t != "project":
                    row.append(f"{lay['total'] / base:.2f}" if base else "-")
            rows.append(row)
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        print("  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)))
        for r in rows:
            print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
        if rep["rtl_cycles"]:
            for t in tools:
                errs = [abs(runs[t]["layers"][n]["total"] / rep["rtl_cycles"][n] - 1) for n, *_ in shapes
                        if n in runs[t].get("layers", {})]  # fmt: skip
                if errs:
                    errs.sort()
                    print(f"  {t}: |cycles/RTL - 1| median {errs[len(errs) // 2]:.1%}, worst {errs[-1]:.1%}")
        base_wall = runs["project"].get("wall_s")
        print(f"  {'tool':<9} {'wall s':>9} {'peak MB':>8} {'model cycles':>15} {'wall / project':>15}")
        for t in tools:
            r = runs[t]
            if "error" in r:
                print(f"  {t:<9} {r['error']} (peak {r.get('peak_mb', 0):.0f} MB)")
                continue
            total = sum(r["layers"][n]["total"] * c for n, _, _, _, c in shapes)
            ratio = f"{r['wall_s'] / base_wall:,.0f}x" if base_wall and t != "project" else "1x"
            print(f"  {t:<9} {r['wall_s']:>9.2f} {r['peak_mb']:>8.0f} {total:>15,} {ratio:>15}")


def print_whole_model(w: dict) -> None:
    print(
        f"\nproject: whole BERT-base seq 128 on nv_full ({w.get('tasks', '?')} tasks, {w.get('cycles', 0):,} cycles) mapped "
        f"and simulated in {w.get('wall_s', 0):.2f} s in-process (cold), {w.get('cli_wall_s', 0):.2f} s as "
        f"`nvdla map` (imports included); peak {w.get('peak_mb', 0):.0f} MB"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="reduced", help="bert-base | reduced | rtl")
    ap.add_argument("--configs", help="comma-separated config names (default: the workload's)")
    ap.add_argument("--peers", default=",".join(PEER_NAMES), help="comma-separated: scalesim,zigzag (or none)")
    ap.add_argument("--peers-dir", default=os.path.expanduser("~/.cache/nvdla-sim/peers"), type=Path)
    ap.add_argument("--setup", action="store_true", help="create the peers' venvs from benchmarks/peers/*.txt")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per tool and config")
    ap.add_argument("--json", type=Path, help="write the measurements here")
    ap.add_argument("--project-job", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--whole-model", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.project_job:
        print(json.dumps(project_job(json.loads(args.project_job.read_text()))))
        return
    if args.whole_model:
        print(json.dumps(whole_model_job()))
        return
    if args.setup:
        setup(args.peers_dir)
        return
    peers = [p for p in args.peers.split(",") if p and p != "none"]
    bad = [p for p in peers if p not in PEER_NAMES]
    if bad:
        raise SystemExit(f"--peers {','.join(bad)}: known peers are {', '.join(PEER_NAMES)}")
    from nvdla_sim import load_config
    from nvdla_sim.errors import NvdlaError

    try:
        for cfg in (args.configs or workload(args.workload)[0]).split(","):
            load_config(cfg)  # every config loads before any tool runs
    except NvdlaError as e:
        raise SystemExit(f"compare_peers: {e}") from None
    rep = compare(args.workload, args.configs, peers, args.peers_dir, args.timeout)
    rep["whole_model"] = whole_model()
    rep["command"] = "python benchmarks/compare_peers.py " + " ".join(sys.argv[1:])
    rep["date"] = time.strftime("%Y-%m-%d")
    print_report(rep)
    print_whole_model(rep["whole_model"])
    if args.json:
        args.json.write_text(json.dumps(rep, indent=1) + "\n")


if __name__ == "__main__":
    main()
