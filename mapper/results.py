"""The result model of a map: one TaskResult per scheduled task, and MapResult with the figures derived
from them (latency, throughput, MACs, utilization, weight bytes). Reports render these; they compute nothing."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nvdla_mapper.lowering.rules import Resource, Task
from nvdla_mapper.numerics.accuracy_report import AccuracyReport
from nvdla_mapper.options import WeightTreatment
from nvdla_sim.config import HwConfig
from nvdla_sim.energy.model import Energy, area, dram_priced_as, layer_energy, peak_power_mw, run_energy
from nvdla_sim.engine import bounds
from nvdla_sim.engine.stats import Bound, LayerStats, Unit, UnitStats
from nvdla_sim.layers import Memory
from nvdla_sim.precision import Precision
from nvdla_sim.system.host import HostModel, host_model
from nvdla_sim.system.memory import memory_model
from nvdla_sim.system.shared_memory import Demand, Profile


@dataclass(frozen=True)
class TaskResult:
    task: Task
    cycles_per_instance: int
    start: int
    end: int
    stats: LayerStats | None  # per instance, for hardware layers
    duration: int  # all instances, with the prologue overlap between independent instances

    @classmethod
    def of(
        cls, task: Task, cycles_per_instance: int, start: int, end: int, stats: LayerStats | None, duration: int
    ) -> TaskResult:
        """TaskResult(...) with its fields set directly: a frozen dataclass's __init__ sets each through
        object.__setattr__, about three times slower, and a decode step makes one per task (660 for
        TinyLlama) at every token. Equal to the constructor's (tests/unit/test_schedule.py)."""
        new = object.__new__(cls)
        new.__dict__.update(
            task=task, cycles_per_instance=cycles_per_instance, start=start, end=end, stats=stats, duration=duration
        )
        return new

    @property
    def cycles(self) -> int:
        return self.duration

    @property
    def bound(self) -> Bound:
        """What the task's time is made of: a hardware layer's (a copy's: its memory, Bound.DRAM), or the host's."""
        if self.stats is not None:
            return self.stats.bound
        if self.task.resource is not Resource.HOST:
            raise ValueError(f"{self.task.name}: a task of {self.task.resource.value} without its stats")
        return Bound.HOST

    def to_row(self) -> dict[str, Any]:
        st = self.stats
        return {
            "name": self.task.name,
            "op": self.task.op,
            "group": self.task.group,
            "resource": self.task.resource.value,
            "count": self.task.count,
            "cycles": self.cycles,
            "cycles_per_instance": self.cycles_per_instance,
            "start": self.start,
            "end": self.end,
            "hardware_macs": st.macs * self.task.count if st else 0,
            "hardware_mac_utilization": round(st.mac_utilization, 4) if st else 0.0,
            "bound": self.bound.value,
            "dram_read": st.traffic.dram_read * self.task.count if st else 0,
            "dram_write": st.traffic.dram_write * self.task.count if st else 0,
            "macs_per_cycle": round(st.macs / st.cycles, 3) if st and st.cycles else 0.0,
            "macs_per_dram_byte": round(st.macs / max(st.traffic.dram_total, 1), 3) if st else 0.0,
            "refetch_factor": st.refetch_factor if st else 1.0,
            "tiling": json.dumps(st.plan.to_dict()) if st and st.plan else "",
            "note": self.task.note,
        }


@dataclass(frozen=True)
class ZeroGating:
    """What-if for pruned weights on the dense array: zero weights gate their multipliers (MapResult._zero_gating)."""

    label: str
    density: float
    batch_core_uj: float  # the batch's NVDLA energy if they did
    batch_saved_uj: float


@dataclass(frozen=True)
class EnergyReport:
    """A map's energy, power and area (MapResult.energy): uJ of the whole batch (batch_*) or per inference;
    NVDLA's core apart from DRAM and the host (system figures)."""

    batch_core_uj: float
    batch_dram_uj: float
    core_uj_per_inference: float
    dram_uj_per_inference: float
    batch_host_uj: float  # the host's work at its active power over its busy time (system.host; not NVDLA's)
    host_uj_per_inference: float
    host_active_power_w: float
    by_unit_uj: dict[str, float]  # the core's energy by unit and always-on part
    by_layer_uj: tuple[float, ...]  # each task's dynamic NVDLA energy over its instances, in the results' order
    average_core_power_mw: float
    peak_core_power_mw: float
    tops_per_w: float  # on the model's MACs
    edp_uj_ms: float
    area_mm2: float
    area_by_block_mm2: dict[str, float]
    tech_node_nm: float
    dram_device: str
    calibrated: bool
    zero_gating_whatif: ZeroGating | None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["by_layer_uj"] = list(self.by_layer_uj)
        return d


@dataclass(frozen=True)
class HostFallback:
    """The tasks a map leaves to the host: how many, their cycles, and the ops they are (their notes)."""

    tasks: int
    cycles: int
    ops: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "cycles": self.cycles, "ops": list(self.ops)}


@dataclass(frozen=True)
class WeightsReport:
    """The weight treatment of a map and what it stored and saved (MapResult.weights_report)."""

    prune: str  # the --prune spelling, or "none"
    density: float
    compression: bool
    sparse_mac_whatif: bool
    sparse_mac_label: str
    dense_weight_bytes: int
    stored_weight_bytes: int
    saved_weight_bytes: int
    baseline_cycles: int | None
    cycles_saved: int | None
    note: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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
    accuracy: AccuracyReport | None = None  # filled by the quantization run (nvdla_mapper.studies.accuracy)
    model_macs: int = 0  # the model's own multiply-accumulates (no tile padding or ones-convolution sums)
    dense_weight_bytes: int = 0  # the model's static weights at this precision (workload.Op.weight_elems)
    _energy: EnergyReport | None = field(default=None, init=False, repr=False, compare=False)
    # per task, its dynamic energy over its instances, shared by maps of the same context (passes.PassMemo)
    energy_memo: dict[Task, Energy] | None = field(default=None, repr=False, compare=False)
    # the host model that timed the host tasks (its power prices their energy); None: the config's [host]
    host: HostModel | None = field(default=None, repr=False, compare=False)

    @property
    def host_model(self) -> HostModel:
        return self.host if self.host is not None else host_model(self.hw.host)

    def weight_bytes(self) -> tuple[int, int]:
        """(dense, stored) bytes of the model's static weights (linear layers' weight matrices and
        convolution filters; not biases, norms or embedding tables). Dense is the architecture's
        parameter count at this precision, taken from the workload graph, so it depends on neither the
        sequence length nor the batch. Stored is what the mapped layers keep in DRAM: the same, or less
        where the weight treatment compresses them (each distinct weight piece counted once)."""
        stored = sum(r.task.stored_weight_bytes for r in self.results)
        return self.dense_weight_bytes, stored

    @property
    def total_cycles(self) -> int:
        return max((r.end for r in self.results), default=0)

    @property
    def latency_ms(self) -> float:
        return self.total_cycles / self.hw.clock_mhz / 1e3

    @property
    def throughput(self) -> float:
        """Inferences per second: the batch's `batch` inferences finish together after latency_ms."""
        return self.batch * 1e3 / self.latency_ms if self.latency_ms else 0.0

    @property
    def macs(self) -> int:
        return sum([task_macs(r) for r in self.results])

    def figures(self) -> PassFigures:
        """The pass's summary figures (pass_figures: the one function that computes them, for a map and
        for a decode step re-timed without one)."""
        n = len(self.results)
        return pass_figures(self.results, range(n), self.total_cycles, self.model_macs, self.hw, self.precision,
                            self.energy_memo, self.host_model)  # fmt: skip

    @property
    def mac_utilization(self) -> float:
        peak = self.hw.peak_macs_per_cycle(self.precision)
        return self.macs / (peak * self.total_cycles) if self.total_cycles else 0.0

    def energy(self) -> EnergyReport:
        """Energy of the run (issue 28; components from hwcomponents with the overheads fitted on NVIDIA's
        table, docs/energy.md): every NVDLA task's units over its instances, the always-on power and
        leakage over the whole run, DRAM apart (a system figure), and what follows: average and peak core
        power at the clock, TOPS/W on the model's MACs, the energy-delay product, the build's area. Priced
        once (the summary, report.json and the sweep row all ask; the results do not change after the map)."""
        if self._energy is None:
            self._energy = self._price()
        return self._energy

    def _price(self) -> EnergyReport:
        parts: list[Energy] = []
        by_layer = []  # each task's dynamic NVDLA energy over its instances (uJ), in the order of self.results
        pruned_cmac = 0.0  # CMAC energy of the layers whose static weights the treatment prunes
        for r in self.results:
            e = task_energy(r, self.hw, self.energy_memo)
            if e is None:
                by_layer.append(0.0)
                continue
            parts.append(e)
            by_layer.append(uj(e.core))
            if r.task.static_weights:
                pruned_cmac += e.cmac
        total = Energy.total(parts)  # as pass_figures adds them (the tasks' order)
        run = run_energy(total, self.hw, self.total_cycles)
        core = run.core
        host = host_energy_pj(self.results, range(len(self.results)), self.host_model, self.hw)
        seconds = self.total_cycles / (self.hw.clock_mhz * 1e6)
        build = area(self.hw)
        return EnergyReport(
            # the run's: the whole batch of `batch` inferences; per inference: divided by the batch
            batch_core_uj=uj(core),
            batch_dram_uj=uj(run.dram),
            core_uj_per_inference=uj(core / self.batch),
            dram_uj_per_inference=uj(run.dram / self.batch),
            batch_host_uj=uj(host),
            host_uj_per_inference=uj(host / self.batch),
            host_active_power_w=self.host_model.active_power_w,
            by_unit_uj={u: round(v * 1e-6, 6) for u, v in run.by_unit().items()},
            by_layer_uj=tuple(by_layer),
            average_core_power_mw=round(core * 1e-12 / seconds * 1e3, 3) if seconds else 0.0,
            peak_core_power_mw=round(peak_power_mw(self.hw), 3),
            tops_per_w=round(2 * self.model_macs / (core * 1e-12) / 1e12, 3) if core else 0.0,
            edp_uj_ms=round(core * 1e-6 * self.latency_ms, 6),
            area_mm2=round(build.total_um2 * 1e-6, 6),
            area_by_block_mm2={b: round(v * 1e-6, 6) for b, v in build.by_block().items()},
            tech_node_nm=self.hw.tech.node_nm,
            dram_device=dram_priced_as(self.hw),
            calibrated=True,
            zero_gating_whatif=self._zero_gating(pruned_cmac, core),
        )

    def _zero_gating(self, pruned_cmac_pj: float, core_pj: float) -> ZeroGating | None:
        """What-if for pruned weights (--prune) on the dense array: a multiplier whose weight is zero does not
        toggle (operand gating), so the pruned layers' CMAC energy scales with the weights' density; time,
        CBUF and the rest are unchanged. Not a claim about NVDLA v1's RTL; None without pruning (or with the
        2:4 sparse-array what-if, which already skips the MACs)."""
        w = self.weights
        if not w.prune or w.sparse_mac:
            return None
        saved = pruned_cmac_pj * (1 - w.density)
        return ZeroGating(
            label="what-if: zero weights gate their multipliers (pruned layers' CMAC energy x density)",
            density=w.density,
            batch_core_uj=round((core_pj - saved) * 1e-6, 6),
            batch_saved_uj=round(saved * 1e-6, 6),
        )

    def host_tasks(self) -> list[TaskResult]:
        return [r for r in self.results if r.task.resource is Resource.HOST]

    def memory_model(self) -> MemoryDescription:
        return MemoryDescription.of(self.hw)

    def unit_busy(self) -> dict[str, UnitStats]:
        total: dict[Unit, UnitStats] = {}
        for r in self.results:
            if r.stats:
                for u, s in r.stats.units.items():
                    scaled = UnitStats(s.busy * r.task.count, s.stall * r.task.count)
                    total[u] = total.get(u, UnitStats()) + scaled
        return {u.value: s for u, s in total.items()}

    def busy_cycles_by_resource(self) -> dict[str, int]:
        """Cycles each resource (NVDLA, BDMA, host) is busy: each runs one task at a time (schedule.py), so
        its busy time is the sum of its tasks' cycles, a part of the run's wall time (a task streaming
        behind another's instances holds its resource from its start to its end, a little longer than
        it works: those waits are not busy)."""
        out = {res.value: 0 for res in Resource}
        for r in self.results:
            out[r.task.resource.value] += r.cycles
        return out

    def by_group(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.task.group] = out.get(r.task.group, 0) + r.cycles
        return out

    def by_bound(self) -> dict[str, int]:
        """Cycles of the tasks per bound label (summed over resources, like by_group): how much of the run
        is MAC-bound, memory-bound, the two in turn (compute+dram), SDP drain, weight loads or host."""
        out: dict[str, int] = {}
        for r in self.results:
            out[r.bound.value] = out.get(r.bound.value, 0) + r.cycles
        return out

    def weights_report(self) -> WeightsReport:
        dense, stored = self.weight_bytes()
        w = self.weights
        return WeightsReport(
            prune=str(w.prune) or "none",
            density=w.density,
            compression=w.compression,
            sparse_mac_whatif=w.sparse_mac,
            sparse_mac_label="what-if beyond NVDLA v1: a 2:4-sparse MAC array skips half the MACs"
            if w.sparse_mac
            else "",
            dense_weight_bytes=dense,
            stored_weight_bytes=stored,
            saved_weight_bytes=dense - stored,
            baseline_cycles=self.baseline_cycles,
            cycles_saved=(self.baseline_cycles - self.total_cycles) if self.baseline_cycles is not None else None,
            note=""
            if w.compression or w.sparse_mac or not w.prune
            else "pruned zeros are still stored and multiplied: without --weight-compression NVDLA v1 gains nothing",
        )

    def host_fallback(self) -> HostFallback:
        host = self.host_tasks()
        return HostFallback(len(host), sum(r.cycles for r in host), tuple(sorted({r.task.note for r in host})))

    @property
    def model_mac_utilization(self) -> float:
        """The model's own MACs over the peak for the run's time (past 1 with the 2:4 sparse-MAC what-if)."""
        peak = self.hw.peak_macs_per_cycle(self.precision)
        return self.model_macs / (peak * self.total_cycles) if self.total_cycles else 0.0

    def busy_share_of_run_by_resource(self) -> dict[str, float]:
        """Each resource's busy cycles over the run's wall time (total_cycles); they overlap."""
        busy = self.busy_cycles_by_resource()
        return {k: round(v / self.total_cycles, 6) if self.total_cycles else 0.0 for k, v in busy.items()}

    def by_block(self) -> dict[str, dict[str, int]]:
        """Cycles per model block (workload.Block, as the front end built it: layer3, conv3_2, embed) and
        op group, in model order."""
        out: dict[str, dict[str, int]] = {}
        for r in self.results:
            groups = out.setdefault(r.task.model_block.name, {})
            groups[r.task.group] = groups.get(r.task.group, 0) + r.cycles
        return out

    def to_dict(self) -> dict[str, Any]:
        """Every figure as report.json stores it (the one place a map becomes plain data)."""
        energy = self.energy()
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
            "throughput_inferences_per_s": round(self.throughput, 3),
            # hardware MACs: what the array performs (tile padding, ones-convolution sums, pruned zeros);
            # model MACs: the model's own (with the 2:4 sparse-MAC what-if they can pass 100% of the peak)
            "hardware_macs": self.macs,
            "model_macs": self.model_macs,
            "hardware_mac_utilization": round(self.mac_utilization, 6),
            "model_mac_utilization": round(self.model_mac_utilization, 6),
            "peak_macs_per_cycle": self.hw.peak_macs_per_cycle(self.precision),
            "dram_bytes_per_cycle": bounds.port_rates(self.hw)[1],  # the memory model's (its interconnect's too)
            "memory": dataclasses.asdict(self.memory_model()),
            # cycles summed over the tasks of every resource; NVDLA, BDMA and host run at once, so these sums
            # add up to more than total_cycles (resource time, not wall time)
            "cycles_by_group": self.by_group(),
            "cycles_by_bound": self.by_bound(),
            "cycles_by_block": self.by_block(),
            "busy_cycles_by_resource": self.busy_cycles_by_resource(),
            # each resource's busy cycles over the run's wall time (total_cycles)
            "busy_share_of_run_by_resource": self.busy_share_of_run_by_resource(),
            "unit_busy": {u: s.to_dict() for u, s in busy.items()},
            "unit_utilization": {
                u: round(s.busy / self.total_cycles, 6) if self.total_cycles else 0.0 for u, s in busy.items()
            },
            "host_fallback": self.host_fallback().to_dict(),
            "energy": energy.to_dict(),
            "notes": self.notes,
            "weights": self.weights_report().to_dict(),
            "accuracy": self.accuracy.to_dict() if self.accuracy else None,
            "layers": [
                {**r.to_row(), "core_energy_uj": e} for r, e in zip(self.results, energy.by_layer_uj, strict=True)
            ],
        }


def group_layers(results: list[TaskResult]) -> list[dict]:
    """The tasks' rows (TaskResult.to_row) with a layer repeated in the numbered blocks of a family merged:
    `layer{0-11}.ffn2 x12` with summed cycles and instances, when its name in the block (the task's name
    after its block's), per-instance cycles, count and bound agree; other rows as they are."""
    groups: dict[tuple, list[tuple[int, dict]]] = {}
    for r in results:
        row, block = r.to_row(), r.task.model_block
        role = block.role(r.task.name)
        if block.index is None or role is None:
            groups[(r.task.name,)] = [(-1, row)]
            continue
        key = (block.family, role, row["cycles_per_instance"], row["count"], row["bound"])
        groups.setdefault(key, []).append((block.index, row))
    out = []
    for key, members in groups.items():
        if len(members) == 1:
            out.append(members[0][1])
            continue
        first = members[0][1]
        blocks = _ranges(sorted(i for i, _ in members))
        out.append(
            {
                **first,
                "name": f"{key[0]}{{{blocks}}}{key[1]} x{len(members)}",
                "count": sum(r["count"] for _, r in members),
                "cycles": sum(r["cycles"] for _, r in members),
            }
        )
    return out


def _ranges(ids: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    parts, start = [], ids[0]
    for a, b in zip(ids, [*ids[1:], None], strict=True):
        if b != a + 1:
            parts.append(f"{start}-{a}" if a > start else f"{a}")
            start = b
    return ",".join(parts)


# ---- a pass's figures from its tasks' parts (MapResult's, and a step template's blocks: step_template) ----


def uj(pj: float) -> float:
    """Picojoules as the microjoules a result reports (to the picojoule)."""
    return round(pj * 1e-6, 6)


def task_energy(r: TaskResult, hw: HwConfig, memo: dict[Task, Energy] | None) -> Energy | None:
    """The dynamic energy of a task over its instances: a hardware layer's units and DRAM traffic (a copy's:
    its DRAM read and write), None for host tasks. A task's stats are a function of the task and the build:
    one pricing in `memo` serves every map of the context."""
    if r.stats is None or r.task.layer is None:
        return None
    e = memo.get(r.task) if memo is not None else None
    if e is None:
        e = layer_energy(r.task.layer, r.stats, hw).scaled(r.task.count)
        if memo is not None:
            memo[r.task] = e
    return e


def host_energy_pj(results: list[TaskResult], order, host: HostModel, hw: HwConfig) -> float:
    """The host's energy over its tasks' busy cycles (`order` indexing `results` in the tasks' order)."""
    cycles = sum([results[i].cycles for i in order if results[i].task.resource is Resource.HOST])
    return host.energy_pj(cycles, hw.clock_mhz)


def task_macs(r: TaskResult) -> int:
    """MACs the array performs for a task over its instances (tile padding, ones-convolution sums)."""
    return r.stats.macs * r.task.count if r.stats else 0


def task_dram_bytes(r: TaskResult) -> int:
    """DRAM bytes a task moves over its instances: a hardware layer's traffic (a copy's read and write)."""
    return r.stats.traffic.dram_total * r.task.count if r.stats else 0


def task_demand(task: Task, stats: LayerStats | None, start: int, end: int, origin: int, ns: float) -> Demand | None:
    """A task's DRAM traffic over its time (its start and end cycles), in ns from `origin` (a cycle of its run):
    a hardware layer's or copy's over its instances, or a host task's (the bytes its work reads and writes,
    HostWork.nbytes, taken as half read and half written: the host's data is in the same DRAM); None for a
    task that moves none."""
    n, a, b = task.count, (start - origin) * ns, (end - origin) * ns
    if stats is not None and stats.traffic.dram_total:
        return Demand(a, b, stats.traffic.dram_read * n, stats.traffic.dram_write * n)
    work = task.host_work
    if stats is None and work is not None and work.nbytes:
        return Demand(a, b, work.nbytes * n / 2, work.nbytes * n / 2)
    return None


def demand_profile(run: MapResult) -> Profile:
    """A run's DRAM demand alone over its time, in ns (every hardware layer's, copy's and host task's traffic:
    task_demand): what a master asks of a memory it shares (nvdla_sim.system.shared_memory)."""
    ns = 1e3 / run.hw.clock_mhz
    demands = [d for r in run.results if (d := task_demand(r.task, r.stats, r.start, r.end, 0, ns)) is not None]
    return Profile.of(demands, run.total_cycles * ns)


def task_roofline(r: TaskResult, hw: HwConfig, precision: Precision) -> tuple[str, float]:
    """(engine, cycles) a task adds to its engine's roofline time (roofline_total): a layer of the core at
    the larger of its MAC time and its DRAM time, a copy beside it at its bytes over the bandwidth, a host
    task at its cycles."""
    engine = r.task.resource.value
    if r.stats and r.task.resource is Resource.NVDLA:
        t = r.stats.traffic
        prec = r.task.layer.precision if r.task.layer is not None else precision  # KV what-if: mixed
        return engine, r.task.count * bounds.roofline_cycles(r.stats.macs, t.dram_read, t.dram_write, hw, prec)
    if r.stats:
        return engine, r.task.count * r.stats.traffic.dram_total / bounds.port_rates(hw)[1]
    return engine, r.cycles


def roofline_total(parts: Iterable[tuple[str, float]]) -> int:
    """The busiest engine's roofline time over task_roofline parts, added in the tasks' order."""
    busy = {res.value: 0.0 for res in Resource}
    for engine, cycles in parts:
        busy[engine] += cycles
    return math.ceil(max(busy.values()))


def task_bound(r: TaskResult) -> tuple[Bound, int]:
    """(bound, cycles) of a task for bound_total: a hardware layer's bound (a copy's: DRAM), or the host."""
    return r.bound, r.cycles


def bound_total(parts: Iterable[tuple[Bound, int]]) -> Bound:
    """The bound holding the most time over task_bound parts (ties: the first met in the tasks' order)."""
    time: dict[Bound, int] = {}
    for key, cycles in parts:
        time[key] = time.get(key, 0) + cycles
    return max(time, key=lambda k: time[k]) if time else Bound.COMPUTE


@dataclass(frozen=True)
class PassFigures:
    """What a mapped pass reports in one summary (MapResult.figures; a decode step's StepResult and a
    serving iteration's time read it)."""

    total_cycles: int
    dram_bytes: int  # its hardware layers' traffic and BDMA copies (read and write)
    model_macs: int
    # the bound (compute, dram, sdp, cbuf, host) holding the most of the pass's time (bound_total)
    bound: Bound
    # the pass's roofline, a lower bound on its time: each hardware layer at the larger of its MAC time
    # (MACs over the peak) and its DRAM time, without launch or memory latency; BDMA copies and host tasks
    # run beside the NVDLA core, so the bound is the busiest of the three (roofline_total)
    roofline_cycles: int
    core_uj: float  # NVDLA core energy (MapResult.energy's batch_core_uj)
    dram_uj: float  # the DRAM's, a system figure
    hardware_macs: int = 0  # what the MAC array performs (MapResult.macs: tile padding, zero blocks)
    host_uj: float = 0.0  # the host's energy over its busy time (MapResult.energy)


def pass_figures(
    distinct: list[TaskResult], order, total_cycles: int, model_macs: int, hw: HwConfig, precision: Precision,
    memo: dict[Task, Energy] | None, host: HostModel,
) -> PassFigures:  # fmt: skip
    """A pass's summary figures from its tasks' results, `order` indexing `distinct` in the tasks' order
    (a step's alike blocks: the same results again; every sum made in the tasks' order); `memo` prices each
    task's energy once (MapResult.energy_memo)."""
    energy = [task_energy(r, hw, memo) for r in distinct]
    roof = [task_roofline(r, hw, precision) for r in distinct]
    bound = [task_bound(r) for r in distinct]
    dram = [task_dram_bytes(r) for r in distinct]
    hw_macs = [task_macs(r) for r in distinct]
    total = Energy.total([e for e in [energy[i] for i in order] if e is not None])
    run = run_energy(total, hw, total_cycles)
    return PassFigures(
        total_cycles, sum([dram[i] for i in order]), model_macs, bound_total([bound[i] for i in order]),
        roofline_total([roof[i] for i in order]), uj(run.core), uj(run.dram),
        sum([hw_macs[i] for i in order]), uj(host_energy_pj(distinct, order, host, hw)),
    )  # fmt: skip


@dataclass(frozen=True)
class MemoryDescription:
    """What times a run's memory traffic: the config's memory model, its DRAM port (the interconnect's path
    included) and the interconnect model (report.json, generate.json and serve.json say it; the CLI prints
    `summary`)."""

    model: str
    dram_bytes_per_cycle: float  # the most its DRAM port carries (the dram model: its channels' peak)
    dram_latency_cycles: int
    interconnect: str
    device: str = ""  # the dram model's: "<device> x <channels>" ("" for the others)

    @classmethod
    def of(cls, hw: HwConfig) -> MemoryDescription:
        m, mem = memory_model(hw), hw.memory
        return cls(
            mem.model, m.bytes_per_cycle(Memory.DRAM), m.latency(Memory.DRAM), hw.interconnect.model, mem.device_label
        )

    def summary(self) -> str:
        if self.device:
            return (
                f"dram model: {self.device} channels, DRAM at most {self.dram_bytes_per_cycle:g} B a cycle (each "
                f"run at the device's rate for its mix of clients), {self.dram_latency_cycles:,} cycles a lone "
                f"read; interconnect {self.interconnect} ([memory] model, device, channels; [interconnect] model)"
            )
        return (
            f"{self.model} model: DRAM {self.dram_bytes_per_cycle:g} B a cycle, {self.dram_latency_cycles:,} cycles "
            f"a read; interconnect {self.interconnect} ([memory] model, [interconnect] model)"
        )


def memory_description(hw: HwConfig) -> dict[str, Any]:
    """MemoryDescription as the result files store it."""
    return dataclasses.asdict(MemoryDescription.of(hw))
