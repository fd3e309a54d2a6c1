"""The mapper's pass list, in one place:

    workload graph -> fusion -> lowering to tasks -> tiling search + simulation -> schedule -> result

Each pass takes explicit arguments and returns plain data; `map_model` runs them in order.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import networkx as nx

from nvdla_sim import cdma
from nvdla_sim.config import HwConfig
from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import ConvLayer
from nvdla_sim.precision import Precision
from nvdla_sim.simulate import fixed_latency, simulate
from nvdla_sim.stats import LayerStats, Unit, UnitStats
from nvdla_sim.trace import span_events, write_trace_doc

from .fusion import fuse
from .lowering import Choice, HostModel, LoweringContext, Resource, Task, WeightTreatment, lower
from .schedule import schedule
from .tiling_search import search_plan
from .workload import ops_in_order


@dataclass(frozen=True)
class TaskResult:
    task: Task
    cycles_per_instance: int
    start: int
    end: int
    stats: LayerStats | None  # per instance, for hardware layers
    duration: int  # all instances, with the prologue overlap between independent instances

    @property
    def cycles(self) -> int:
        return self.duration

    def to_row(self) -> dict[str, Any]:
        st = self.stats
        return {
            "name": self.task.name,
            "op": self.task.op,
            "group": self.task.group,
            "resource": self.task.resource,
            "count": self.task.count,
            "cycles": self.cycles,
            "cycles_per_instance": self.cycles_per_instance,
            "start": self.start,
            "end": self.end,
            "macs": st.macs * self.task.count if st else 0,
            "mac_utilization": round(st.mac_utilization, 4) if st else 0.0,
            "bound": st.bound.value if st else ("host" if self.task.resource == Resource.HOST else "dram"),
            "dram_read": (st.traffic.dram_read * self.task.count) if st else self.task.copy_bytes * self.task.count,
            "dram_write": (st.traffic.dram_write * self.task.count) if st else self.task.copy_bytes * self.task.count,
            "macs_per_cycle": round(st.macs / st.cycles, 3) if st and st.cycles else 0.0,
            "macs_per_dram_byte": round(st.macs / max(st.traffic.dram_total, 1), 3) if st else 0.0,
            "tiling": json.dumps(st.detail.get("plan")) if st and st.detail.get("plan") else "",
            "note": self.task.note,
        }


@dataclass
class MapResult:
    model: str
    hw: HwConfig
    precision: Precision
    batch: int
    seq: int
    results: list[TaskResult]
    notes: list[str] = field(default_factory=list)
    weights: WeightTreatment = field(default_factory=WeightTreatment)
    baseline_cycles: int | None = None  # the same model with dense, uncompressed weights
    accuracy: dict[str, Any] | None = None  # filled by the quantization run (nvdla_mapper.accuracy)
    model_macs: int = 0  # the model's own multiply-accumulates (no tile padding or ones-convolution sums)

    def weight_bytes(self) -> tuple[int, int]:
        """(dense, stored) weight bytes of all layers with static weights."""
        dense = stored = 0
        for r in self.results:
            lay = r.task.layer
            if isinstance(lay, ConvLayer) and r.task.group in ("matmul", "conv"):
                s = lay.shape
                d = cdma.weight_bytes(s.out_k, s.kernel_w * s.kernel_h * s.in_c * lay.precision.bytes) * r.task.count
                dense += d
                stored += (lay.weight_bytes * r.task.count) if lay.weight_bytes is not None else d
        return dense, stored

    @property
    def total_cycles(self) -> int:
        return max((r.end for r in self.results), default=0)

    @property
    def latency_ms(self) -> float:
        return self.total_cycles / self.hw.clock_mhz / 1e3

    @property
    def macs(self) -> int:
        return sum(r.stats.macs * r.task.count for r in self.results if r.stats)

    @property
    def mac_utilization(self) -> float:
        peak = self.hw.peak_macs_per_cycle(self.precision)
        return self.macs / (peak * self.total_cycles) if self.total_cycles else 0.0

    def host_tasks(self) -> list[TaskResult]:
        return [r for r in self.results if r.task.resource == Resource.HOST]

    def unit_busy(self) -> dict[str, UnitStats]:
        total: dict[Unit, UnitStats] = {}
        for r in self.results:
            if r.stats:
                for u, s in r.stats.units.items():
                    scaled = UnitStats(s.busy * r.task.count, s.stall * r.task.count)
                    total[u] = total.get(u, UnitStats()) + scaled
        return {u.value: s for u, s in total.items()}

    def by_group(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.task.group] = out.get(r.task.group, 0) + r.cycles
        return out

    def _weights_dict(self) -> dict[str, Any]:
        dense, stored = self.weight_bytes()
        w = self.weights
        return {
            "prune": w.prune or "none",
            "density": w.density,
            "compression": w.compression,
            "sparse_mac_whatif": w.sparse_mac,
            "sparse_mac_label": "what-if beyond NVDLA v1: a 2:4-sparse MAC array skips half the MACs"
            if w.sparse_mac
            else "",
            "dense_weight_bytes": dense,
            "stored_weight_bytes": stored,
            "saved_weight_bytes": dense - stored,
            "baseline_cycles": self.baseline_cycles,
            "cycles_saved": (self.baseline_cycles - self.total_cycles) if self.baseline_cycles is not None else None,
            "note": ""
            if w.compression or w.sparse_mac or not w.prune
            else "pruned zeros are still stored and multiplied: without --weight-compression NVDLA v1 gains nothing",
        }

    def by_block(self) -> dict[str, dict[str, int]]:
        """Cycles per model block (op-name prefix, e.g. layer3) and op group, in model order."""
        out: dict[str, dict[str, int]] = {}
        for r in self.results:
            block = r.task.op.split(".")[0]
            groups = out.setdefault(block, {})
            groups[r.task.group] = groups.get(r.task.group, 0) + r.cycles
        return out

    def to_dict(self) -> dict[str, Any]:
        host = self.host_tasks()
        busy = self.unit_busy()
        return {
            "model": self.model,
            "hw": self.hw.fingerprint,
            "hw_config": self.hw.to_dict(),
            "precision": self.precision.value,
            "batch": self.batch,
            "seq": self.seq,
            "total_cycles": self.total_cycles,
            "latency_ms": round(self.latency_ms, 6),
            "throughput_inferences_per_s": round(1e3 / self.latency_ms, 3) if self.latency_ms else 0,
            "macs": self.macs,
            "model_macs": self.model_macs,
            "mac_utilization": round(self.mac_utilization, 6),
            "peak_macs_per_cycle": self.hw.peak_macs_per_cycle(self.precision),
            "dram_bytes_per_cycle": self.hw.dram_bytes_per_cycle,
            "cycles_by_group": self.by_group(),
            "cycles_by_block": self.by_block(),
            "unit_busy": {u: s.to_dict() for u, s in busy.items()},
            "unit_utilization": {
                u: round(s.busy / self.total_cycles, 6) if self.total_cycles else 0.0 for u, s in busy.items()
            },
            "host_fallback": {
                "tasks": len(host),
                "cycles": sum(r.cycles for r in host),
                "ops": sorted({r.task.note for r in host}),
            },
            "notes": self.notes,
            "weights": self._weights_dict(),
            "accuracy": self.accuracy,
            "layers": [r.to_row() for r in self.results],
        }


# ---- passes -------------------------------------------------------------------------------------------


def lower_graph(g: nx.DiGraph, ctx: LoweringContext) -> tuple[list[Task], list[list[int]]]:
    """Lowering pass: tasks in dependency order and, per task, the indices of the tasks it waits for."""
    ctx.fused, absorbed = fuse(g, has_lut=ctx.has_lut)
    last_task: dict[str, list[int]] = {}
    tasks: list[Task] = []
    deps: list[list[int]] = []
    for op in ops_in_order(g):
        preds = [p for p in g.predecessors(op.name)]
        pred_tasks = sorted({t for p in preds for t in last_task.get(p, [])})
        if op.name in absorbed:
            last_task[op.name] = pred_tasks  # its work happens inside the producer's SDP
            continue
        lowered = lower(op, ctx)
        if isinstance(lowered, Choice):
            lowered = cheapest(lowered, ctx)
        extra = ctx.fused.get(op.name)
        if extra is not None and extra.residual_input:  # the residual operand is read by this layer's SDP
            pred_tasks = sorted({*pred_tasks, *last_task.get(extra.residual_input, [])})
        prev = pred_tasks
        for t in lowered:
            tasks.append(t)
            deps.append(list(prev))
            prev = [len(tasks) - 1]
        last_task[op.name] = prev
    return tasks, deps


def cheapest(choice: Choice, ctx: LoweringContext) -> list[Task]:
    """The option of a choice whose tasks take the fewest cycles back to back in this simulation (the
    layers are simulated once: the per-layer cache serves the final pass); its first task says what
    was chosen over what."""
    timed = [(tasks_cycles(tasks, ctx), label) for label, tasks in choice.options]
    best = min(range(len(timed)), key=lambda i: timed[i][0])
    tasks = list(choice.options[best][1])
    if len(timed) > 1:
        others = "; ".join(f"{lab}: {c:,}" for i, (c, lab) in enumerate(timed) if i != best)
        first = tasks[0]
        why = f"chosen: {timed[best][1]} ({timed[best][0]:,} cycles) over {others}"
        tasks[0] = dataclasses.replace(first, note=f"{first.note}; {why}" if first.note else why)
    return tasks


def tasks_cycles(tasks: tuple[Task, ...] | list[Task], ctx: LoweringContext) -> int:
    """Cycles of tasks run back to back, every instance counted (with the overlap between instances; the
    host takes all instances of a task in one hand-off)."""
    cycles, stats = simulate_tasks(list(tasks), ctx.hw, ctx.host)
    handoff = ctx.host.overhead_cycles(ctx.hw.clock_mhz)
    return sum(
        handoff + t.count * max(c - handoff, 0)
        if t.resource == Resource.HOST
        else instances_duration(c, t.count, st, ctx.hw)
        for c, t, st in zip(cycles, tasks, stats, strict=True)
    )


def simulate_tasks(tasks: list[Task], hw: HwConfig, host: HostModel) -> tuple[list[int], list[LayerStats | None]]:
    """Tiling + simulation pass: cycles per instance of every task (identical layers simulated once)."""
    cycles: list[int] = []
    stats: list[LayerStats | None] = []
    for t in tasks:
        if t.layer is not None:
            try:
                st, c = layer_cycles(t.layer, hw)
            except NvdlaError as e:
                raise type(e)(f"{t.name}: {e}".replace(": : ", ": ")) from None
            cycles.append(c)
            stats.append(dataclasses.replace(st, name=t.name))
        elif t.resource == Resource.BDMA:
            cycles.append(hw.memory.dram_latency_cycles + int(2 * t.copy_bytes / hw.dram_bytes_per_cycle))
            stats.append(None)
        else:
            cycles.append(host.cycles(flops=t.host_flops, nbytes=t.host_bytes, clock_mhz=hw.clock_mhz))
            stats.append(None)
    return cycles, stats


def layer_cycles(layer, hw: HwConfig) -> tuple[LayerStats, int]:
    """A hardware layer's stats (searched plan for convolutions, cached by value) and its cycles from op
    enable to interrupt, as on the RTL: launch, streaming, pipeline depth, completion."""
    st = dataclasses.replace(_simulate_cached(dataclasses.replace(layer, name=""), hw), name=layer.name, events=())
    return st, st.cycles + sum(fixed_latency(layer, hw))


@lru_cache(maxsize=4096)
def _simulate_cached(layer, hw: HwConfig) -> LayerStats:
    """Stats of an unnamed layer: conv layers through the tiling search, others directly."""
    if isinstance(layer, ConvLayer):
        return search_plan(layer, hw).stats
    return simulate(layer, hw, record_events=False)


def map_model(
    g: nx.DiGraph,
    hw: HwConfig,
    *,
    precision: Precision,
    batch: int,
    seq: int,
    host: HostModel | None = None,
    softmax: str = "auto",
    layernorm: str = "auto",
    weights: WeightTreatment | None = None,
) -> MapResult:
    """Run the whole pass list on a workload graph."""
    hw.check_precision(precision)
    host = host or HostModel()
    weights = weights or WeightTreatment()
    ctx = LoweringContext(hw=hw, precision=precision, host=host, softmax=softmax, layernorm=layernorm, weights=weights)
    tasks, deps = lower_graph(g, ctx)  # fusion + lowering
    per_instance, stats = simulate_tasks(tasks, hw, host)  # tiling search + simulation
    durations = [instances_duration(c, t.count, st, hw) for c, t, st in zip(per_instance, tasks, stats, strict=True)]
    handoff = host.overhead_cycles(hw.clock_mhz)
    sched = schedule(tasks, durations, per_instance, deps, [t.resource for t in tasks], host_overhead=handoff)
    results = [
        TaskResult(t, c, s.start, s.end, st, s.busy)
        for t, c, s, st in zip(tasks, per_instance, sched, stats, strict=True)
    ]
    notes = [
        "Concurrent resources (NVDLA core, BDMA, host) are scheduled without memory contention between them.",
        f"Host model: {host.gflops:g} GFLOP/s, {host.mem_gbs:g} GB/s, {host.overhead_us:g} us per fallback op.",
    ]
    fused = g.graph.get("onnx_fusions")
    if fused:
        notes.append("ONNX patterns fused before import: " + ", ".join(f"{k} x{v}" for k, v in sorted(fused.items())))
    baseline = None
    if weights.active:  # the dense, uncompressed run, to report what the treatment saves
        baseline = map_model(
            g, hw, precision=precision, batch=batch, seq=seq, host=host, softmax=softmax, layernorm=layernorm
        ).total_cycles
    model_macs = sum(int(op.attrs.get("model_macs", op.macs)) for op in ops_in_order(g))
    return MapResult(
        str(g.graph.get("name", "model")), hw, precision, batch, seq, results, notes, weights, baseline,
        model_macs=model_macs,
    )  # fmt: skip


def trace_spans(result: MapResult) -> list[tuple[str, str, int, int]]:
    """Timeline spans per resource (NVDLA core, BDMA, host) for the Perfetto trace."""
    return [(r.task.resource.upper(), r.task.name, r.start, r.end) for r in result.results]


def instances_duration(cycles: int, count: int, stats: LayerStats | None, hw: HwConfig | None = None) -> int:
    """Time for `count` independent instances of a hardware layer run back to back (heads, windows,
    groups, batch), each enabled in the other ping-pong register group while the previous one runs.

    Convolutions, as measured on nv_small's RTL (validation/data/nvdla_rtl_overlap.json): the next
    instance's CDMA fetches its weights as soon as the previous instance's reads end, but its input
    waits until the previous one releases the data ring. So each later instance hides its launch and
    weight fetch, at most the previous instance's time after its last read. Other layers (no weights)
    hide the prologue of their reads behind the previous one's work (not measured)."""
    if count <= 1 or stats is None:
        return cycles * count
    weights = stats.detail.get("weight_bytes_fetched")
    if weights is not None and hw is not None:
        t = hw.timing
        fetch = weights / hw.dram_bytes_per_cycle + hw.memory.dram_latency_cycles
        reads_end = t.conv_launch_cycles + stats.units[Unit.CDMA].busy + hw.memory.dram_latency_cycles
        hidden = min(t.conv_launch_cycles + fetch, cycles - reads_end)
    else:
        prologue = int(stats.detail.get("prologue_cycles", 0))
        hidden = min(prologue, cycles - prologue)
    return cycles + (count - 1) * (cycles - max(math.ceil(hidden), 0))


def output_folder(path: str | Path, flag: str) -> Path:
    """The folder a command writes into, created if missing; a one-line error if it cannot be."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise NvdlaError(f"{flag} {out}: exists and is not a folder; give a folder path")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise NvdlaError(f"{flag} {out}: cannot create the folder ({e.strerror})") from None
    return out


def write_results(result: MapResult, out_dir: str | Path) -> dict[str, Path]:
    """Write report.json, layers.csv and trace.json (and return their paths)."""
    out = output_folder(out_dir, "--report")
    d = result.to_dict()
    paths = {"json": out / "report.json", "csv": out / "layers.csv", "trace": out / "trace.json"}
    process = f"{result.model} on {result.hw.fingerprint}"
    write_trace_doc(paths["trace"], span_events(trace_spans(result), clock_mhz=result.hw.clock_mhz, process=process))
    tmp = paths["json"].with_suffix(".json.tmp")
    tmp.write_text(json.dumps(d, indent=2))
    tmp.replace(paths["json"])
    with paths["csv"].open("w", newline="") as f:
        rows = d["layers"]
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["name"])
        w.writeheader()
        w.writerows(rows)
    return paths
