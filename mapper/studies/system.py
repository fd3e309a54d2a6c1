"""Several NVDLA instances on one DRAM (issue 58, items 3 and 4): a system file names the instances (any mix
of builds, each with its workload) and the DRAM they share; each instance's run is mapped alone, then the
runs are timed together on the shared memory (nvdla_sim.system.shared_memory) and each one's slowdown
against running alone reported (the Xavier/Orin pattern: one engine a network, one DRAM).

A system file (TOML; `nvdla system FILE`, examples/system_*.toml):

    name = "two_resnet50"
    dram = "nv_full_lpddr4"     # the config whose DRAM ([memory]) the instances share
    [[instance]]
    hw = "nv_full_lpddr4"       # a config name or .toml path, on the shared DRAM
    model = "resnet50"          # what `nvdla map` takes: a preset, a config.json, an .onnx
    seq = 128                   # optional: the sequence (text models)
    batch = 1                   # optional
    precision = "int8"          # optional
    decode = 128                # optional: a decode step against this many cached positions (generative models)
    repeat = 1                  # optional: the run this many times back to back (with stages: the inputs)
    stages = 1                  # optional: the network split into this many consecutive stages, each on an
                                # instance of hw, an input passing from stage to stage (a pipeline); a decode
                                # step's repeats are tokens: a token enters the first stage once the one
                                # before it has left the last (pipeline-parallel decoding)
    micro_batches = 1           # optional, decode with stages: groups of `batch` sequences in flight, their
                                # tokens in turn (repeat: every group's tokens together)
    name = "dla0"               # optional (default dla<index>; a pipeline's stages dla0.s0, dla0.s1, ...)

Each instance is timed alone on its own config, which must be on the shared DRAM: the dram model's device
and channels (its DBBIF and latency its own), or, the fluid model having no DRAM apart from its port, a
port of the same rate. A pipeline stage's shared time includes its waits for the stage before (a decoder's
first stage: for the last), so its slowdown is its time in the system over its own work alone.
"""

from __future__ import annotations

import itertools
import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from nvdla_mapper.frontends.presets import ModelSpec, check_generative, decode_step_graph
from nvdla_mapper.frontends.resolve import model_graph, resolve_model
from nvdla_mapper.passes import map_model
from nvdla_mapper.results import (
    MapResult,
    MemoryDescription,
    TaskResult,
    demand_profile,
    task_demand,
    task_dram_bytes,
    task_energy,
    uj,
)
from nvdla_mapper.workload import ops_in_order
from nvdla_sim.config import HwConfig, load_config
from nvdla_sim.energy.model import Energy, area, dram_background_pj, run_energy
from nvdla_sim.errors import ConfigError, NvdlaError
from nvdla_sim.layers import Memory
from nvdla_sim.precision import Precision
from nvdla_sim.system import dram
from nvdla_sim.system.memory import memory_model
from nvdla_sim.system.shared_memory import Capacity, Master, Profile, share_jobs

_TOP_KEYS = {"name", "dram", "instance"}
MAX_INSTANCES = 64  # NVDLA instances a system may have (a bound on the study, not on any SoC)
_INSTANCE_KEYS = {"name", "hw", "model", "seq", "batch", "precision", "decode", "repeat", "stages", "micro_batches"}


@dataclass(frozen=True)
class InstanceSpec:
    """One NVDLA instance and its workload."""

    name: str
    hw: HwConfig
    model: str
    seq: int | None = None
    batch: int = 1
    precision: Precision = Precision.INT8
    decode: int | None = None  # a decode step against this many cached positions
    repeat: int = 1  # runs back to back (a pipeline: inputs streamed through it; a decode step's: tokens)
    stages: int = 1  # instances of hw a pipeline splits the network over
    # a decoder split into stages: groups of `batch` sequences in flight, each group's next token entering
    # the first stage once its previous token has left the last (the repeats are the groups' tokens in turn)
    micro_batches: int = 1

    @property
    def workload(self) -> str:
        what = f"{self.model} decode step (kv {self.decode})" if self.decode else self.model
        if self.seq is not None and not self.decode:
            what += f" seq {self.seq}"
        return (
            what
            + (f" batch {self.batch}" if self.batch != 1 else "")
            + (f" x{self.repeat}" if self.repeat != 1 else "")
            + (f" ({self.micro_batches} micro-batches)" if self.micro_batches != 1 else "")
        )

    @property
    def instances(self) -> int:
        """NVDLA instances it takes: its pipeline's stages (1 without)."""
        return self.stages


@dataclass(frozen=True)
class SystemSpec:
    name: str
    dram: HwConfig  # the config whose DRAM the instances share
    instances: tuple[InstanceSpec, ...]


@dataclass(frozen=True)
class InstanceResult:
    name: str
    hw: str
    workload: str
    alone_ns: float
    shared_ns: float
    dram_bytes: int
    weight_bytes: int  # its model's static weights, its own copy in the shared DRAM
    core_uj: float  # its NVDLA core's energy over its shared time (dynamic, and always-on and leakage)
    dram_commands_uj: float  # its traffic's DRAM energy (per byte, or by command under the dram model)
    first_ns: float = 0.0  # when its first run (a pipeline stage: its first input) ended
    area_mm2: float = 0.0  # its build's silicon (energy.model.area, as `nvdla map` gives it)

    @property
    def slowdown(self) -> float:
        return self.shared_ns / self.alone_ns if self.alone_ns else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "hw": self.hw, "workload": self.workload, "alone_ms": self.alone_ns / 1e6,
            "shared_ms": self.shared_ns / 1e6, "slowdown": self.slowdown, "dram_bytes": self.dram_bytes,
            "alone_dram_gbs": self.dram_bytes / self.alone_ns if self.alone_ns else 0.0,
            "shared_dram_gbs": self.dram_bytes / self.shared_ns if self.shared_ns else 0.0,
            "core_uj": self.core_uj, "dram_traffic_uj": self.dram_commands_uj, "area_mm2": self.area_mm2,
        }  # fmt: skip


@dataclass(frozen=True)
class SystemResult:
    name: str
    memory: MemoryDescription
    peak_gbs: float  # the shared DRAM's most, bytes a ns
    instances: tuple[InstanceResult, ...]
    dram_background_uj: float  # the shared DRAM's standby and refresh until the last instance ends (dram model)

    @property
    def makespan_ns(self) -> float:
        return max(i.shared_ns for i in self.instances)

    @property
    def dram_uj(self) -> float:
        return sum(i.dram_commands_uj for i in self.instances) + self.dram_background_uj

    @property
    def total_uj(self) -> float:
        """The NVDLA cores' and the DRAM's energy until the last instance ends (the host's apart)."""
        return sum(i.core_uj for i in self.instances) + self.dram_uj

    @property
    def area_mm2(self) -> float:
        """The NVDLA instances' silicon together (the DRAM, host and interconnect apart)."""
        return round(sum(i.area_mm2 for i in self.instances), 6)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "memory": self.memory.__dict__,
            "dram_peak_gbs": self.peak_gbs,
            "makespan_ms": self.makespan_ns / 1e6,
            "area_mm2": self.area_mm2,
            "energy_uj": {
                "cores": sum(i.core_uj for i in self.instances),
                "dram": self.dram_uj,
                "dram_background": self.dram_background_uj,
                "total": self.total_uj,
            },
            "instances": [i.as_dict() for i in self.instances],
            "method": "each instance mapped alone; the runs' DRAM demands shared max-min fairly at the shared "
            "DRAM's rate for what they ask together (nvdla_sim/system/shared_memory.py)",
        }


def load_system(path: str | Path) -> SystemSpec:
    """Parse and check a system file; every error is one line naming the file and the key."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise NvdlaError(f"{path}: cannot read the system file ({e.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise NvdlaError(f"{path}: not valid TOML ({e})") from None
    return system_from_dict(data, source=str(path))


def system_from_dict(data: dict[str, Any], *, source: str) -> SystemSpec:
    def err(msg: str) -> NvdlaError:
        return NvdlaError(f"{source}: {msg}")

    extra = set(data) - _TOP_KEYS
    if extra:
        raise err(f"unknown key(s) {sorted(extra)}; allowed: {sorted(_TOP_KEYS)}")
    if "dram" not in data:
        raise err("dram: missing; name the config whose DRAM the instances share (e.g. nv_full_lpddr4)")
    try:
        shared = load_config(data["dram"])
    except ConfigError as e:
        raise err(f"dram: {e}") from None
    raw = data.get("instance")
    if not isinstance(raw, list) or not raw or not all(isinstance(r, dict) for r in raw):
        raise err("instance: give one [[instance]] table or more (hw and model each)")
    instances = [_instance(r, k, shared, err) for k, r in enumerate(raw)]
    count = sum(i.instances for i in instances)
    if count > MAX_INSTANCES:
        raise err(f"instance: {count} NVDLA instances (each stage of a pipeline one); a system has 1 to "
                  f"{MAX_INSTANCES}")  # fmt: skip
    names = [i.name for i in instances]
    if len(set(names)) != len(names):
        raise err(f"instance names must differ: {names}")
    return SystemSpec(str(data.get("name", Path(source).stem)), shared, tuple(instances))


def _instance(r: dict[str, Any], k: int, shared: HwConfig, err) -> InstanceSpec:
    where = f"instance {k + 1}"
    extra = set(r) - _INSTANCE_KEYS
    if extra:
        raise err(f"{where}: unknown key(s) {sorted(extra)}; allowed: {sorted(_INSTANCE_KEYS)}")
    for key in ("hw", "model"):
        if not isinstance(r.get(key), str) or not r[key]:
            raise err(f"{where}: {key} is required (a config name or .toml path; a model `nvdla map` takes)")
    try:
        hw = load_config(r["hw"])
    except ConfigError as e:
        raise err(f"{where}: hw: {e}") from None
    for key, least in (("batch", 1), ("repeat", 1), ("seq", 1), ("decode", 1), ("stages", 1), ("micro_batches", 1)):
        v = r.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < least):
            raise err(f"{where}: {key} must be a whole number >= {least}, not {v!r}")
    try:
        prec = Precision.parse(str(r.get("precision", "int8")))
        hw.check_precision(prec)
    except (ValueError, ConfigError) as e:
        raise err(f"{where}: precision: {e}") from None
    mismatch = _off_the_shared_dram(hw, shared)
    if mismatch:
        raise err(f"{where}: hw {hw.name}: {mismatch}")
    micro = r.get("micro_batches", 1)
    if micro != 1 and (r.get("decode") is None or r.get("stages", 1) == 1 or micro > r.get("repeat", 1)):
        raise err(f"{where}: micro_batches {micro}: groups of sequences in flight through a decoder's stages; give "
                  f"decode, stages > 1 and repeat >= micro_batches (the groups' tokens in turn)")  # fmt: skip
    if r.get("decode") is not None:
        if r.get("seq") is not None:
            raise err(f"{where}: seq and decode: a decode step's length is its cached positions (decode)")
        try:
            spec = resolve_model(r["model"])
            if not isinstance(spec, ModelSpec):
                raise NvdlaError(f"{r['model']}: a decode step needs a preset or config.json, not an ONNX graph")
            check_generative(spec)
        except NvdlaError as e:
            raise err(f"{where}: decode: {e}") from None
    return InstanceSpec(str(r.get("name", f"dla{k}")), hw, r["model"], r.get("seq"), r.get("batch", 1), prec,
                        r.get("decode"), r.get("repeat", 1), r.get("stages", 1), micro)  # fmt: skip


def _dram_gbs(hw: HwConfig) -> float:
    """A config's DRAM rate at most, bytes a ns."""
    return memory_model(hw).bytes_per_cycle(Memory.DRAM) * hw.clock_mhz / 1e3


def _off_the_shared_dram(hw: HwConfig, shared: HwConfig) -> str:
    """Why an instance's config is not on the shared DRAM ("" when it is)."""
    m, s = hw.memory, shared.memory
    if s.device_label:  # a DRAM device apart from the instances' ports
        if (m.model, m.device_label) != (s.model, s.device_label):
            have = m.device_label or f"the {m.model} model"
            return (f"its DRAM ({have}) is not the shared one ({s.device_label}: [memory] model, device, "
                    f"channels of {shared.name})")  # fmt: skip
        return ""
    if m.device_label or not math.isclose(_dram_gbs(hw), _dram_gbs(shared), rel_tol=1e-9):
        return (f"its DRAM ({_dram_gbs(hw):g} GB/s, {m.model} model) is not the shared one ({_dram_gbs(shared):g} "
                f"GB/s, {s.model} model, {shared.name})")  # fmt: skip
    return ""


def capacity(shared: HwConfig) -> Capacity:
    """The shared DRAM's rate for what the masters ask together (bytes a ns): the dram model's device rate for
    their mix (each master's reads one client, its writes another), else the fluid port's rate."""
    memory = memory_model(shared)
    if not memory.mixes:  # one rate whatever is asked
        rate = memory.dram_gbs()
        return lambda asks: rate
    seen: dict[tuple, float] = {}  # a run's stretches ask a few distinct mixes many times (a model's alike blocks)

    def given(asks: Sequence[tuple[float, float]]) -> float:
        key = tuple(asks)
        if key not in seen:
            if len(seen) >= 4096:  # asks that vary without end (serving's iterations) keep the last few
                seen.clear()
            seen[key] = memory.dram_gbs(dram.AccessMix.of([r for r, _ in asks], [w for _, w in asks]))
        return seen[key]

    return given


def instance_graph(spec: InstanceSpec) -> nx.DiGraph:
    """The workload graph an instance runs (a pass, or a decode step against its cached positions)."""
    if spec.decode:
        return decode_step_graph(resolve_model(spec.model), batch=spec.batch, kv_len=spec.decode)
    return model_graph(spec.model, batch=spec.batch, seq=spec.seq)


def map_instance(spec: InstanceSpec, g: nx.DiGraph | None = None) -> MapResult:
    """An instance's run alone (`nvdla map`'s, or a decode step's as `nvdla generate` maps it)."""
    g = instance_graph(spec) if g is None else g
    if spec.decode:
        return map_model(g, spec.hw, precision=spec.precision, batch=spec.batch, seq=spec.decode)
    return map_model(g, spec.hw, precision=spec.precision)


def run_system(spec: SystemSpec) -> SystemResult:
    """Map each instance alone, then share the DRAM (module docstring)."""
    graphs = [instance_graph(i) for i in spec.instances]
    ops = [ops_in_order(g) for g in graphs]
    # each instance keeps its own copy of its model's weights in the shared DRAM (checked before the work)
    weights = [sum(op.weight_elems for op in o) * i.precision.bytes for o, i in zip(ops, spec.instances, strict=True)]
    check_weights(spec.name, spec.dram, [i.name for i in spec.instances], weights)
    for i, o in zip(spec.instances, ops, strict=True):
        if i.stages > len(o):
            raise NvdlaError(f"{spec.name}: instance {i.name}: stages {i.stages} is more than its {len(o)} ops; a "
                             f"pipeline stage runs one op at least")  # fmt: skip
    mapped: dict[tuple, MapResult] = {}  # instances running alike work map it once
    runs = []
    for i, g in zip(spec.instances, graphs, strict=True):
        key = (i.hw, i.model, i.seq, i.batch, i.precision, i.decode)
        if key not in mapped:
            mapped[key] = map_instance(i, g)
        runs.append(mapped[key])
    masters: list[_Master] = []
    for i, r, w in zip(spec.instances, runs, weights, strict=True):
        if i.stages == 1:
            masters.append(_Master(i.name, i.workload, r, r.results, demand_profile(r), i.repeat, w))
            continue
        first, last = len(masters), len(masters) + i.stages - 1
        for s, (tasks, prof) in enumerate(stages(r, i.stages)):
            # a stage takes an input once the stage before has finished it; a decoder's first stage takes a
            # group's next token once the last stage has finished its previous one (micro_batches in flight)
            waits = ((first + s - 1, 0),) if s else ((last, i.micro_batches),) if i.decode else ()
            masters.append(_Master(f"{i.name}.s{s}", f"{i.workload} stage {s + 1}/{i.stages}", r, tasks, prof,
                                   i.repeat, w if s == 0 else 0, waits))  # fmt: skip
    return _shared(spec.name, spec.dram, masters)


def shared_copies(run: MapResult, copies: int, workload: str) -> SystemResult:
    """`copies` instances of one build each running `run` at once on the build's DRAM (a sweep's instances)."""
    weights = run.weight_bytes()[0]  # its model's weights, as run_system counts them from the graph
    names = [f"dla{k}" for k in range(copies)]
    check_weights(f"{copies} x {run.hw.name}", run.hw, names, [weights] * copies)
    p = demand_profile(run)
    return _shared(f"{copies} x {run.hw.name}", run.hw,
                   [_Master(n, workload, run, run.results, p, 1, weights) for n in names])  # fmt: skip


def check_weights(name: str, dram_hw: HwConfig, names: list[str], weights: list[int]) -> None:
    """A one-line error where the instances' copies of their weights are more than the shared DRAM holds."""
    holds = dram_hw.memory.dram_size_gib
    if holds is not None and sum(weights) > holds * 2**30:
        raise NvdlaError(
            f"{name}: the instances' weights ({sum(weights) / 2**30:.2f} GiB: "
            + ", ".join(f"{n} {w / 2**30:.2f}" for n, w in zip(names, weights, strict=True))
            + f") are more than the shared DRAM holds ({holds:g} GiB, memory.dram_size_gib of {dram_hw.name})"
        )


def stages(run: MapResult, count: int) -> list[tuple[list[TaskResult], Profile]]:
    """A run split into `count` consecutive stages of about equal time alone: cut at the task starts nearest
    k / count of its time, each task in the stage it starts in (its tasks and its profile of DRAM demand, in
    ns from the stage's start; a stage lasts until its last task ends)."""
    ns = 1e3 / run.hw.clock_mhz
    results = sorted(run.results, key=lambda r: r.start)
    starts = sorted({r.start for r in results})
    if len(starts) < count:
        raise NvdlaError(f"{run.model}: stages {count} is more than its run's {len(starts)} steps")
    total = run.total_cycles
    cuts = [0]
    for k in range(1, count):
        later = [t for t in starts if t > cuts[-1]]
        left = len(later) - (count - k)  # leave a start for each stage after this one
        cuts.append(min(later[: left + 1], key=lambda t: abs(t - k * total / count)))
    cuts.append(math.inf)
    out = []
    for lo, hi in itertools.pairwise(cuts):
        tasks = [r for r in results if lo <= r.start < hi]
        end = max(r.end for r in tasks)
        demands = [d for r in tasks if (d := task_demand(r.task, r.stats, r.start, r.end, lo, ns)) is not None]
        out.append((tasks, Profile.of(demands, (end - lo) * ns)))
    return out


@dataclass(frozen=True)
class _Master:
    """One NVDLA instance's part of a system: its tasks of a run, their profile, repeats, weights kept, and the
    masters whose jobs it waits for (a pipeline's previous stage; a decoder's first stage its last)."""

    name: str
    workload: str
    run: MapResult
    tasks: list[TaskResult]
    profile: Profile
    repeat: int
    weights: int
    waits: tuple[tuple[int, int], ...] = ()  # (master, lag): its job i waits for that master's job i - lag


def _shared(name: str, dram_hw: HwConfig, masters: list[_Master]) -> SystemResult:
    """The masters together on `dram_hw`'s DRAM."""
    jobs = share_jobs([Master((m.profile,) * m.repeat, m.waits) for m in masters], capacity(dram_hw))
    out = []
    for m, ends in zip(masters, jobs, strict=True):
        shared = ends[-1]
        core, traffic = _energy(m.run, m.tasks, m.repeat, shared)
        nbytes = sum(task_dram_bytes(t) for t in m.tasks) * m.repeat
        out.append(InstanceResult(m.name, m.run.hw.name, m.workload, m.profile.length * m.repeat, shared, nbytes,
                                  m.weights, core, traffic, ends[0], round(area(m.run.hw).total_um2 * 1e-6, 6)))  # fmt: skip
    background = uj(dram_background_pj(dram_hw, max(e[-1] for e in jobs) * dram_hw.clock_mhz / 1e3))
    return SystemResult(name, MemoryDescription.of(dram_hw), _dram_gbs(dram_hw), tuple(out), background)


def _energy(run: MapResult, tasks: list[TaskResult], repeat: int, shared_ns: float) -> tuple[float, float]:
    """An instance's (core, DRAM traffic) energy in uJ over its shared time: its tasks' dynamic energy over
    its repeats, its always-on power and leakage over the time until its last job ends, and its traffic's
    DRAM energy (per byte, or by command: the DRAM's background is the system's)."""
    dynamic = Energy.total([e for r in tasks if (e := task_energy(r, run.hw, run.energy_memo)) is not None])
    dynamic = dynamic.scaled(repeat)
    return uj(run_energy(dynamic, run.hw, round(shared_ns * run.hw.clock_mhz / 1e3)).core), uj(dynamic.dram)
