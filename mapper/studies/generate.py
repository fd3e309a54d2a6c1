"""Autoregressive generation: prefill, then one decode step per new token against a growing KV cache.

    generate(spec, hw, prompt=128, new_tokens=128, batch=1) -> GenerateResult

The prefill is the model's sequence pass over the prompt (causal tiles skipped) with the LM head on the
last position of each sequence: it yields the first new token (time to first token). Every further
token is one decode step (presets.decode_step_graph) at the cache length of that moment; the steps differ
only in their attention against the cache (kv_len + 1 keys), so a step template
(studies.step_template) lowers, times and schedules the step once and re-times only the attention ops
whose shape changed, with the tiling search and simulation of any map: every step is exact (the same
figures as mapping its whole graph), and a step costs a one-block graph, a few lowerings and one
schedule.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import gc
import itertools
import math
import multiprocessing
import statistics
import sys
import threading
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nvdla_mapper.frontends.presets import (
    ModelSpec,
    build_graph,
    check_generative,
    decode_step_graph,
    t5_prefill_graph,
    tensor_shard,
)
from nvdla_mapper.options import InstanceDram, KvPlan, MapOptions, Placement, WeightTreatment
from nvdla_mapper.passes import map_model, new_memo
from nvdla_mapper.results import MapResult, PassFigures, demand_profile, memory_description
from nvdla_mapper.studies.parallel import Reduction, alike_time, partial_precision, reduction, row_parallel_layers
from nvdla_mapper.studies.progress import Progress, quiet
from nvdla_mapper.studies.step_template import StepTemplate
from nvdla_mapper.workload import ops_in_order
from nvdla_sim.config import HwConfig
from nvdla_sim.engine.bounds import port_rates
from nvdla_sim.engine.stats import Bound
from nvdla_sim.errors import NvdlaError, check_int
from nvdla_sim.precision import Precision
from nvdla_sim.system.host import HostModel
from nvdla_sim.system.shared_memory import Profile


@dataclass(frozen=True)
class StepTimes:
    """Decode steps' times (ms): the first, median, mean and last step (None without decode steps)."""

    first_step: float | None
    median_step: float | None
    mean_step: float | None
    last_step: float | None


@dataclass(frozen=True)
class PhaseFigures:
    """The prefill's figures: its cycles (to the first token), MAC and DRAM use over them, its bound."""

    cycles: int
    model_mac_utilization: float  # the model's MACs over the peak x the phase's cycles
    hardware_mac_utilization: float  # what the array performs, likewise
    dram_utilization: float
    bound: Bound | None  # the bound holding the most of the phase's time (None: no decode steps)


@dataclass(frozen=True)
class DecodeFigures(PhaseFigures):
    """The decode steps' figures, with their roofline (each layer at the larger of its MAC and DRAM time)."""

    roofline_cycles: int
    over_roofline: float


@dataclass(frozen=True)
class MemoryFit:
    """What the memory beside the weights holds at a KV precision (fits)."""

    memory_bytes: int
    limited_by: str
    kv_room_bytes: int
    max_positions_at_batch: int
    max_batch_at_positions: int
    model_max_positions: int | None


@dataclass(frozen=True)
class GenerateEnergy:
    """Prefill and decode energy (uJ of the whole batch unless per token), NVDLA's core apart from DRAM and
    the host; the run's average core power and TOPS/W (GenerateResult.energy)."""

    prefill_core_uj: float
    prefill_dram_uj: float
    decode_core_uj: float
    decode_dram_uj: float
    decode_core_uj_per_token: float | None
    decode_dram_uj_per_token: float | None
    decode_core_uj_per_step_median: float | None
    decode_core_uj_per_token_median_step: float | None
    total_core_uj: float
    total_dram_uj: float
    # the host's work at its active power (system.host), a system figure like DRAM's
    prefill_host_uj: float
    decode_host_uj: float
    decode_host_uj_per_token: float | None
    total_host_uj: float
    host_active_power_w: float
    average_core_power_mw: float
    tops_per_w: float
    area_mm2: float
    tech_node_nm: float
    peak_core_power_mw: float
    calibrated: bool


@dataclass(frozen=True)
class GenerateWeights:
    """The weight treatment and the static weight bytes a decode step streams: dense, as stored."""

    prune: str
    density: float
    compression: bool
    sparse_mac_whatif: bool
    dense_weight_bytes: int
    stored_weight_bytes: int


@dataclass
class StepResult:
    kv_len: int  # cached tokens before the step
    cycles: int
    dram_bytes: int
    macs: int  # the model's multiply-accumulates (hardware MACs add tile padding and zero blocks)
    bound: Bound  # the bound holding the most of the step's NVDLA time
    roofline_cycles: int = 0  # the step's roofline (results.PassFigures)
    core_energy_uj: float = 0.0  # NVDLA core energy of the step (MapResult.energy; docs/energy.md)
    dram_energy_uj: float = 0.0  # the DRAM's, a system figure
    hardware_macs: int = 0  # what the MAC array performs (tile padding, zero blocks)
    host_energy_uj: float = 0.0  # the host's over its busy time in the step (a system figure)


@dataclass
class GenerateResult:
    model: str
    hw: HwConfig
    precision: Precision
    batch: int
    prompt: int
    new_tokens: int
    prefill: MapResult
    steps: list[StepResult] = field(default_factory=list)  # tokens 2..T
    kv_bytes_per_token: int = 0  # K and V of one position of one sequence, all layers
    # work before the first token beside the prefill's graph: T5's decoder step that yields it (after the
    # encoder); a tensor-parallel shard's prefill reductions (studies/parallel.py)
    first_step_cycles: int = 0
    # tensor parallel on one shared DRAM: the prefill pass's wait for the other instances' traffic (its time
    # together less its time alone; in TTFT)
    prefill_wait_cycles: int = 0
    first_step_energy_uj: tuple[float, float, float] = (0.0, 0.0, 0.0)  # its (core, DRAM, host) energy
    first_step_macs: int = 0  # its model MACs
    # instances the model is split over by heads and FFN columns (studies/parallel.py): the figures are one
    # instance's (all run in step; the system's energy is this many times)
    tensor_parallel: int = 1
    step_reduction: Reduction | None = None  # tensor parallel: a step's reduction after each row-parallel layer
    tp_dram: InstanceDram = InstanceDram.OWN  # tensor parallel: the instances' DRAM, each its own port or one shared
    # the model whose weights and caches the memory holds, where not `spec` (the whole model, when the
    # shards share one DRAM)
    memory_spec: ModelSpec | None = field(default=None, repr=False)
    step_reduction_cycles: int = 0  # tensor parallel: a step's reduction as it ran (on a shared DRAM: slowed)
    weights: WeightTreatment = field(default_factory=WeightTreatment)  # pruning / compression what-if
    kv_precision: Precision | None = None  # the KV caches' precision (what-if); None: the model's
    spec: ModelSpec | None = field(default=None, repr=False)  # the model (for what its memory holds)
    step_weight_bytes: tuple[int, int] = (0, 0)  # a decode step's static weights: (dense, as stored)
    kv_plan: KvPlan = KvPlan.BUCKET  # where attention against the caches was planned

    @property
    def ttft_cycles(self) -> int:
        return self.prefill.total_cycles + self.prefill_wait_cycles + self.first_step_cycles

    @property
    def dram_sharers(self) -> int:
        """The instances whose traffic one DRAM carries alongside this one's (tensor parallel on one
        shared DRAM: all of them; else 1)."""
        return self.tensor_parallel if self.tp_dram is InstanceDram.SHARED else 1

    @property
    def total_cycles(self) -> int:
        return self.ttft_cycles + sum(s.cycles for s in self.steps)

    @property
    def token_cycles(self) -> list[int]:
        """Latency of each new token: the first is the prefill, then one decode step each."""
        return [self.ttft_cycles, *(s.cycles for s in self.steps)]

    def _ms(self, cycles: float) -> float:
        return cycles / self.hw.clock_mhz / 1e3

    @property
    def kv_cache_bytes(self) -> int:
        """KV cache at the end: every sequence's prompt and generated positions."""
        return self.kv_bytes_per_token * self.batch * (self.prompt + self.new_tokens)

    def decode_dram_utilization(self) -> float:
        """The DRAM's busy share over the decode steps: every instance's bytes it carries over its rate."""
        cyc = sum(s.cycles for s in self.steps)
        moved = sum(s.dram_bytes for s in self.steps) * self.dram_sharers
        return moved / (cyc * port_rates(self.hw)[1]) if cyc else 0.0

    @property
    def ttft_ms(self) -> float:
        return round(self._ms(self.ttft_cycles), 4)

    @property
    def total_ms(self) -> float:
        return round(self._ms(self.total_cycles), 4)

    @property
    def tokens_per_s_per_sequence(self) -> float:
        return round(self.new_tokens / (self._ms(self.total_cycles) / 1e3), 3)

    @property
    def tokens_per_s_aggregate(self) -> float:
        return round(self.batch * self.new_tokens / (self._ms(self.total_cycles) / 1e3), 3)

    @property
    def decode_tokens_per_s_aggregate(self) -> float | None:
        """Every decode step's tokens over their summed time: batch / mean_step."""
        dec_cyc = sum(s.cycles for s in self.steps)
        return round(self.batch * len(self.steps) / (self._ms(dec_cyc) / 1e3), 3) if dec_cyc else None

    @property
    def dram_bytes_per_token(self) -> int:
        return round(sum(s.dram_bytes for s in self.steps) / max(len(self.steps) * self.batch, 1))

    @property
    def kv_precision_used(self) -> Precision:
        """The caches' precision: the what-if's, or the model's."""
        return self.kv_precision or self.precision

    def per_token_ms(self) -> StepTimes:
        """Decode steps (tokens 2..T of each sequence): one step makes `batch` tokens."""
        steps = [s.cycles for s in self.steps]
        if not steps:
            return StepTimes(None, None, None, None)
        return StepTimes(
            first_step=round(self._ms(steps[0]), 4),
            median_step=round(self._ms(statistics.median(steps)), 4),
            mean_step=round(self._ms(sum(steps) / len(steps)), 4),
            last_step=round(self._ms(steps[-1]), 4),
        )

    def fits(self) -> MemoryFit | None:
        """What the memory holds beside the weights at the run's KV precision (None without the model)."""
        spec = self.memory_spec or self.spec
        if spec is None:
            return None
        return fits(
            spec,
            self.hw,
            self.precision,
            kv_precision=self.kv_precision,
            batch=self.batch,
            positions=self.prompt + self.new_tokens,
        )

    def prefill_figures(self) -> PhaseFigures:
        """The prefill pass's figures over its time (with its wait for the other instances' traffic on a shared
        DRAM: then bound by the DRAM, whose busy share counts every instance's bytes)."""
        peak = self.hw.peak_macs_per_cycle(self.precision)
        pre = self.prefill
        figures = pre.figures()
        cycles = pre.total_cycles + self.prefill_wait_cycles
        moved = figures.dram_bytes * self.dram_sharers
        return PhaseFigures(
            cycles=self.ttft_cycles,
            model_mac_utilization=round(pre.model_macs / (peak * cycles), 4),
            hardware_mac_utilization=round(pre.macs / (peak * cycles), 4),
            dram_utilization=round(moved / (cycles * port_rates(self.hw)[1]), 4),
            bound=Bound.DRAM if self.prefill_wait_cycles else figures.bound,
        )

    def decode_figures(self) -> DecodeFigures:
        peak = self.hw.peak_macs_per_cycle(self.precision)
        dec_cyc = sum(s.cycles for s in self.steps)
        roof = sum(s.roofline_cycles for s in self.steps)
        return DecodeFigures(
            cycles=dec_cyc,
            model_mac_utilization=round(sum(s.macs for s in self.steps) / (peak * dec_cyc), 4) if dec_cyc else 0.0,
            hardware_mac_utilization=round(sum(s.hardware_macs for s in self.steps) / (peak * dec_cyc), 4)
            if dec_cyc
            else 0.0,
            dram_utilization=round(self.decode_dram_utilization(), 4),
            bound=Counter(s.bound for s in self.steps).most_common(1)[0][0] if self.steps else None,
            roofline_cycles=roof,
            over_roofline=round(dec_cyc / max(roof, 1), 4),
        )

    def to_dict(self) -> dict[str, Any]:
        """Every figure as generate.json stores it (the one place a generation becomes plain data)."""
        fit = self.fits()
        return {
            "model": self.model,
            "hw": self.hw.fingerprint,
            "tensor_parallel": self.tensor_parallel,  # instances in step, each a shard: the figures are one's
            "tp_dram": self.tp_dram.value,  # their DRAM: a port each ("own") or hw's one ("shared")
            "clock_mhz": self.hw.clock_mhz,
            "memory": memory_description(self.hw),
            "precision": self.precision.value,
            "batch": self.batch,
            "prompt_tokens": self.prompt,
            "new_tokens": self.new_tokens,
            "ttft_ms": self.ttft_ms,
            "per_token_ms": dataclasses.asdict(self.per_token_ms()),
            "total_ms": self.total_ms,
            "tokens_per_s_per_sequence": self.tokens_per_s_per_sequence,
            "tokens_per_s_aggregate": self.tokens_per_s_aggregate,
            "decode_tokens_per_s_aggregate": self.decode_tokens_per_s_aggregate,
            "kv_precision": self.kv_precision_used.value,
            "kv_plan": self.kv_plan.value,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_cache_bytes_end": self.kv_cache_bytes,
            **({"fits": dataclasses.asdict(fit)} if fit is not None else {}),
            "dram_bytes_per_token": self.dram_bytes_per_token,
            "prefill": _phase_dict(self.prefill_figures()),
            "decode": _phase_dict(self.decode_figures()),
            "token_cycles": self.token_cycles,
            "energy": dataclasses.asdict(self.energy()),
            "weights": dataclasses.asdict(self.weights_report()),
        }

    def weights_report(self) -> GenerateWeights:
        """The weight treatment and the static weight bytes a decode step streams: dense, as stored (the
        prefill's stored figure can be larger: it computes V^T with the V weights as feature data, which
        NVDLA cannot compress)."""
        w = self.weights
        dense, stored = self.step_weight_bytes if self.steps else self.prefill.weight_bytes()
        return GenerateWeights(str(w.prune) or "none", w.density, w.compression, w.sparse_mac, dense, stored)

    def energy(self) -> GenerateEnergy:
        """Prefill and decode energy (NVDLA core and DRAM apart, uJ), the run's average core power and TOPS/W
        (the model's MACs of every pass over the core energy); the prefill's with its always-on power and
        leakage over the prefill, each step's over the step (T5's first decoder step counts with the
        prefill, as its time does in TTFT). Every figure is of the whole batch unless it says per token;
        total = prefill + decode. A decode step makes `batch` tokens: per token is the mean over every
        step's token (decode / (steps x batch)), with the median step's beside it."""
        pre = self.prefill.energy()
        pre_core = pre.batch_core_uj + self.first_step_energy_uj[0]
        pre_dram = pre.batch_dram_uj + self.first_step_energy_uj[1]
        core = [s.core_energy_uj for s in self.steps]
        dram = [s.dram_energy_uj for s in self.steps]
        dec_core, dec_dram = sum(core), sum(dram)
        pre_host = pre.batch_host_uj + self.first_step_energy_uj[2]
        dec_host = sum(s.host_energy_uj for s in self.steps)
        total_core = pre_core + dec_core
        seconds = self._ms(self.total_cycles) / 1e3
        tokens = len(core) * self.batch
        step_core = statistics.median(core) if core else None
        macs = self.prefill.model_macs + self.first_step_macs + sum(s.macs for s in self.steps)
        return GenerateEnergy(
            prefill_core_uj=round(pre_core, 6),
            prefill_dram_uj=round(pre_dram, 6),
            decode_core_uj=round(dec_core, 6),
            decode_dram_uj=round(dec_dram, 6),
            decode_core_uj_per_token=round(dec_core / tokens, 6) if tokens else None,
            decode_dram_uj_per_token=round(dec_dram / tokens, 6) if tokens else None,
            decode_core_uj_per_step_median=None if step_core is None else round(step_core, 6),
            decode_core_uj_per_token_median_step=None if step_core is None else round(step_core / self.batch, 6),
            total_core_uj=round(total_core, 6),
            total_dram_uj=round(pre_dram + dec_dram, 6),
            # the host's work at its active power (system.host), a system figure like DRAM's
            prefill_host_uj=round(pre_host, 6),
            decode_host_uj=round(dec_host, 6),
            decode_host_uj_per_token=round(dec_host / tokens, 6) if tokens else None,
            total_host_uj=round(pre_host + dec_host, 6),
            host_active_power_w=pre.host_active_power_w,
            average_core_power_mw=round(total_core * 1e-6 / seconds * 1e3, 3) if seconds else 0.0,
            tops_per_w=round(2 * macs / (total_core * 1e-6) / 1e12, 3) if total_core else 0.0,
            area_mm2=pre.area_mm2,
            tech_node_nm=pre.tech_node_nm,
            peak_core_power_mw=pre.peak_core_power_mw,
            calibrated=True,
        )


def _phase_dict(f: PhaseFigures) -> dict[str, Any]:
    """A phase's figures as generate.json stores them: the bound by its name ("-" without decode steps)."""
    return dataclasses.asdict(f) | {"bound": f.bound.value if f.bound is not None else "-"}


def weight_bytes(spec: ModelSpec, precision: Precision) -> int:
    """Bytes of the model's weights in DRAM: every weight matrix of the whole model once (encoder, decoder
    and LM head; workload.Op.weight_elems), plus the token embeddings unless the LM head shares them."""
    g = build_graph(spec, batch=1, seq=1, head="lm")
    mats = sum(op.weight_elems for op in ops_in_order(g))
    embed = 0 if spec.tied_embeddings else spec.vocab * spec.stages[0].hidden
    return (mats + embed) * precision.bytes


def memory_limit(hw: HwConfig) -> tuple[int, str]:
    """Bytes of memory NVDLA can use for weights and caches, and what limits them: its address space, or the
    system's DRAM when the config states a smaller one."""
    mem = hw.memory
    limit = 2**mem.address_bits
    what = f"the {mem.address_bits}-bit address space of {hw.name}"
    if mem.dram_size_gib is not None and mem.dram_size_gib * 2**30 < limit:
        limit, what = int(mem.dram_size_gib * 2**30), f"the {mem.dram_size_gib:g} GiB of DRAM in {hw.name}"
    return limit, what


def check_fits(
    spec: ModelSpec, hw: HwConfig, precision: Precision, *, batch: int, positions: int,
    kv_precision: Precision | None = None,
) -> None:  # fmt: skip
    """Weights plus the KV cache at the end must fit the memory NVDLA can address (and the system's DRAM
    when the config states one)."""
    limit, what = memory_limit(hw)
    kv = kv_precision or precision
    need = weight_bytes(spec, precision) + kv_bytes_per_token(spec, kv) * batch * positions
    if need > limit:
        cache = precision.value if kv is precision else f"{precision.value}, KV cache {kv.value}"
        raise NvdlaError(
            f"{spec.name} at batch {batch} needs {need / 2**30:.2f} GiB (weights + KV cache of {positions} positions, "
            f"{cache}) but {what} holds {limit / 2**30:.2f} GiB: {(need - limit) / 2**30:.2f} GiB "
            f"({need - limit:,} bytes) too much"
        )


def kv_room(spec: ModelSpec, hw: HwConfig, precision: Precision) -> tuple[int, int, str]:
    """(bytes beside the weights, memory bytes, what limits them): what the KV caches can take."""
    limit, what = memory_limit(hw)
    return limit - weight_bytes(spec, precision), limit, what


def fits(
    spec: ModelSpec, hw: HwConfig, precision: Precision, *, kv_precision: Precision | None, batch: int, positions: int
) -> MemoryFit:
    """What the memory beside the weights holds at this KV precision: the most positions per sequence at
    `batch` and the most sequences at `positions` (the model's own position limit stated beside)."""
    room, limit, what = kv_room(spec, hw, precision)
    per = kv_bytes_per_token(spec, kv_precision or precision)
    return MemoryFit(
        memory_bytes=limit,
        limited_by=what,
        kv_room_bytes=room,
        max_positions_at_batch=max(room // (per * batch), 0),
        max_batch_at_positions=max(room // (per * positions), 0),
        model_max_positions=spec.max_positions or None,
    )


def kv_bytes_per_token(spec: ModelSpec, precision: Precision) -> int:
    """K and V bytes of one position in the self-attention caches (decoder layers)."""
    st = spec.stages[0]
    hd = spec.head_dim or st.hidden // st.heads
    layers = spec.decoder_layers or st.layers
    return 2 * layers * hd * (spec.kv_heads or st.heads) * precision.bytes


def generate(
    spec: ModelSpec,
    hw: HwConfig,
    *,
    prompt: int,
    new_tokens: int,
    batch: int = 1,
    options: MapOptions | None = None,
    precision: Precision | None = None,
    host: HostModel | None = None,
    softmax: Placement | str | None = None,
    layernorm: Placement | str | None = None,
    weights: WeightTreatment | None = None,
    kv_precision: Precision | None = None,
    kv_plan: KvPlan | str | None = None,
    jobs: int = 1,
    progress: Progress = quiet,
    tensor_parallel: int = 1,
    tp_dram: InstanceDram | str = InstanceDram.OWN,
) -> GenerateResult:
    """Prefill `prompt` tokens, then generate `new_tokens` (the first from the prefill) per sequence.
    Every pass runs under `options` (MapOptions; the keywords precision, softmax, layernorm, weights,
    kv_precision and kv_plan, where given, replace its fields).
    `weights` prunes and/or compresses the static weights in every pass (what a DRAM-bound decode step
    streams); the KV caches are activations and stay dense. `kv_precision` keeps the caches, and runs
    the attention against them, at that precision (passes.map_model). `kv_plan` (options.KvPlan): where
    the attention against the caches is planned, at each length's bucket or at every length. `jobs`:
    processes the decode steps are shared out to (_steps; the same figures as one). `progress` hears of
    the prefill and of every decode step as it is timed, in whichever process. `tensor_parallel`: the
    model split over that many instances of `hw` by heads and FFN columns (presets.tensor_shard): one shard
    generates, each of its passes with its reductions (_with_reductions); the figures are an instance's.
    `tp_dram` (options.InstanceDram): each instance on a DRAM port of its own, or all on hw's one DRAM (every
    pass and reduction then takes what the instances' traffic together takes: parallel.alike_cycles)."""
    kw = dict(
        prompt=prompt, new_tokens=new_tokens, batch=batch, options=options, precision=precision, host=host,
        softmax=softmax, layernorm=layernorm, weights=weights, kv_precision=kv_precision, kv_plan=kv_plan, jobs=jobs,
        progress=progress,
    )  # fmt: skip
    tp_dram = InstanceDram.parse(tp_dram, "--tp-dram")
    if tensor_parallel == 1:
        if tp_dram is InstanceDram.SHARED:
            raise NvdlaError("--tp-dram shared: one instance (--tp 1) shares its DRAM with nobody; give --tp N")
        return _generate(spec, hw, **kw)
    shard = tensor_shard(spec, tensor_parallel)
    partial_precision(hw)  # a build that cannot carry the partials is refused before the work
    shared = tp_dram is InstanceDram.SHARED
    # on one DRAM it holds every shard's weights and caches: the whole model's (checked before the work)
    res = _generate(shard, hw, alike=tensor_parallel if shared else 1, memory_spec=spec if shared else None, **kw)
    return _with_reductions(res, spec, tensor_parallel, tensor_parallel if shared else 1)


def _generate(
    spec: ModelSpec,
    hw: HwConfig,
    *,
    prompt: int,
    new_tokens: int,
    batch: int,
    options: MapOptions | None,
    precision: Precision | None,
    host: HostModel | None,
    softmax: Placement | str | None,
    layernorm: Placement | str | None,
    weights: WeightTreatment | None,
    kv_precision: Precision | None,
    kv_plan: KvPlan | str | None,
    jobs: int,
    progress: Progress,
    alike: int = 1,
    memory_spec: ModelSpec | None = None,
) -> GenerateResult:
    """generate() of one model on one instance, or (`alike` > 1) of a shard on each of that many alike
    instances in step on hw's one DRAM (each pass at the time their traffic together takes: parallel.alike_time),
    `memory_spec` the model whose weights and caches that DRAM holds (the whole one)."""
    for name, v in (("--prompt", prompt), ("--new-tokens", new_tokens), ("--batch", batch), ("--jobs", jobs)):
        check_int(v, name)
    if spec.max_positions and prompt + new_tokens > spec.max_positions:
        raise NvdlaError(
            f"--prompt {prompt} + --new-tokens {new_tokens} = {prompt + new_tokens} positions; "
            f"{spec.name} has {spec.max_positions}"
        )
    check_generative(spec)  # refuses encoders with a clear error
    options = MapOptions.of(
        options, precision=precision, softmax=softmax, layernorm=layernorm, weights=weights,
        kv_precision=kv_precision, kv_plan=kv_plan,
    )  # fmt: skip
    precision, kv_precision = options.precision, options.kv_precision
    hw.check_precision(precision)
    if kv_precision is not None:
        hw.check_precision(kv_precision)
    for held in (spec, memory_spec) if memory_spec is not None else (spec,):
        check_fits(held, hw, precision, batch=batch, positions=prompt + new_tokens, kv_precision=kv_precision)
    kw = dict(options=options, batch=batch, host=host, with_baseline=False)
    t5 = bool(spec.decoder_layers)
    first = 0 if t5 else 1  # T5's first token comes from a decoder step over its start token
    # self-attention cache of each step: the tokens before its one
    kv_lens = [t if t5 else prompt + t - 1 for t in range(first, new_tokens)]
    if t5:  # the encoder once (filling the cross-attention caches), then the first decoder step
        prefill_graph = t5_prefill_graph(spec, batch=batch, prompt=prompt)
    else:
        prefill_graph = build_graph(spec, batch=batch, seq=prompt, head="lm_last")
    # with processes for the steps, the prefill is mapped in one of its own beside them; else first, here
    prefill_run = _Forked(map_model, prefill_graph, hw, seq=prompt, **kw) if _forks(len(kv_lens) - 1, jobs) else None
    what = f"batch {batch}: prefill and {len(kv_lens)} decode steps"
    total = len(kv_lens) + 1
    progress(what, 0, total)
    prefill = None if prefill_run else map_model(prefill_graph, hw, seq=prompt, **kw)
    done = 0 if prefill_run else 1
    progress(what, done, total)

    def step_done(n: int) -> None:
        nonlocal done
        done += n
        progress(what, done, total)

    try:
        # the steps share every op but attention against the cache: lowered and timed once, priced once
        memo = new_memo(hw, options, host=host)
        cross = prompt if t5 else 0
        template = StepTemplate(
            spec, lambda s, kv_len: decode_step_graph(s, batch=batch, kv_len=kv_len, cross_len=cross), memo
        )
        steps: list[StepResult] = []
        step_weight_bytes = (0, 0)
        if kv_lens:
            first_step = template.map(kv_lens[0])  # a whole MapResult once: the step's static weights
            step_weight_bytes = first_step.weight_bytes()
            step_done(1)
            later = _steps(functools.partial(_step, template, hw=hw, alike=alike), kv_lens[1:], jobs, step_done)
            head = _step_result(kv_lens[0], first_step.figures())
            steps = [_on_shared_dram(head, demand_profile(first_step), hw, alike) if alike > 1 else head, *later]
        if prefill_run:
            prefill = prefill_run.result("the prefill")
            step_done(1)
    finally:
        if prefill_run:
            prefill_run.stop()
    assert prefill is not None
    res = GenerateResult(
        spec.name, hw, precision, batch, prompt, new_tokens, prefill, steps, weights=options.weights,
        kv_precision=kv_precision, spec=spec, kv_plan=options.kv_plan, step_weight_bytes=step_weight_bytes,
        memory_spec=memory_spec,
    )  # fmt: skip
    res.kv_bytes_per_token = kv_bytes_per_token(spec, kv_precision or precision)
    if t5:  # TTFT covers the encoder and the first decoder step
        first_step = res.steps.pop(0)
        res.first_step_cycles = first_step.cycles
        res.first_step_energy_uj = (first_step.core_energy_uj, first_step.dram_energy_uj, first_step.host_energy_uj)
        res.first_step_macs = first_step.macs
    if alike > 1:  # the prefill's wait for the other instances' traffic comes before the first token too
        cycles, core, dram = alike_time(prefill.total_cycles, demand_profile(prefill), hw, alike)
        c, d, h = res.first_step_energy_uj
        res.prefill_wait_cycles = cycles - prefill.total_cycles
        res.first_step_energy_uj = (c + core, d + dram, h)
    return res


def _step(template: StepTemplate, kv_len: int, *, hw: HwConfig, alike: int = 1) -> StepResult:
    """A decode step's figures at `kv_len` cached tokens (on each of `alike` instances sharing hw's DRAM)."""
    if alike == 1:
        return _step_result(kv_len, template.figures(kv_len))
    figures, profile = template.figures_and_profile(kv_len)
    return _on_shared_dram(_step_result(kv_len, figures), profile, hw, alike)


def _on_shared_dram(step: StepResult, profile: Profile, hw: HwConfig, alike: int) -> StepResult:
    """A step as each of `alike` instances running it in step on hw's one DRAM runs it (parallel.alike_time): bound by
    the DRAM where it waits for it, its roofline no lower than all the instances' bytes at its peak."""
    cycles, core, dram = alike_time(step.cycles, profile, hw, alike)
    # its roofline: no sooner than every instance's bytes at the DRAM's peak; the wait is the DRAM's
    floor = math.ceil(alike * step.dram_bytes / port_rates(hw)[1])
    return dataclasses.replace(
        step, cycles=cycles, core_energy_uj=step.core_energy_uj + core, dram_energy_uj=step.dram_energy_uj + dram,
        roofline_cycles=max(step.roofline_cycles, floor), bound=Bound.DRAM if cycles > step.cycles else step.bound,
    )  # fmt: skip


def _step_result(kv_len: int, f: PassFigures) -> StepResult:
    return StepResult(
        kv_len,
        f.total_cycles,
        f.dram_bytes,
        f.model_macs,
        f.bound,
        f.roofline_cycles,
        f.core_uj,
        f.dram_uj,
        f.hardware_macs,
        f.host_uj,
    )


StepTimer = Callable[[int], StepResult]  # a decode step's figures at a cache length (_step)

# Fewest decode steps a process is given: fewer cost more in starting it than they save
MIN_STEPS_PER_JOB = 32


def _forks(steps: int, jobs: int) -> bool:
    """Whether `steps` decode steps are shared out to `jobs` processes (_steps): enough for two runs of
    MIN_STEPS_PER_JOB, and a process that may fork (_can_fork)."""
    return jobs > 1 and steps >= 2 * MIN_STEPS_PER_JOB and _can_fork()


def _steps(step: StepTimer, kv_lens: list[int], jobs: int, done=lambda n: None) -> list[StepResult]:
    """The decode steps at `kv_lens` (each `step(kv_len)`: _step of the run's template), in order. With `jobs` > 1 they are cut into that many runs of
    consecutive lengths of about equal work (a step's attention grows with its keys: each step weighs
    its length plus the whole step's length-free share, taken as the first length); each run but the
    first has its first step timed here (its length bucket's searches made once, inherited) and the rest
    in a process forked from this one (every one starts from the same template and memo; a step's figures
    do not depend on what a process timed before: test_generate compares them with one process). One
    process where forking is unsafe (_can_fork). Any process's error ends the run with every other process
    stopped. `done(n)` hears of every n steps timed (a forked process's as it reports them)."""
    if not _forks(len(kv_lens), jobs):
        return _run_steps(step, kv_lens, done)
    jobs = min(jobs, len(kv_lens) // MIN_STEPS_PER_JOB)
    weights = list(itertools.accumulate(k + kv_lens[0] for k in kv_lens))
    cuts = [bisect.bisect_left(weights, weights[-1] * j / jobs) for j in range(1, jobs)]
    runs = [kv_lens[a:b] for a, b in itertools.pairwise([0, *cuts, len(kv_lens)]) if b > a]
    # each later run's first step is timed here before forking: the tiling searches of its length's bucket
    # (options.KvPlan) are then made once, in this process, and every process inherits them, rather than
    # each process making them again (TinyLlama 2,048 + 2,048 on nv_full: all 2,047 later steps share
    # the 4,096-key bucket)
    firsts = _run_steps(step, [run[0] for run in runs[1:]], done)
    children: list[tuple[_Forked, list[int]]] = []
    try:
        for run in runs[1:]:
            children.append((_Forked(_timed, step, run[1:], report=True), run))

        def here(n: int) -> None:  # this process's steps, and what the others have reported meanwhile
            done(n)
            for child, _ in children:
                child.poll(done)

        out = _run_steps(step, runs[0], here)
        for first, (child, run) in zip(firsts, children, strict=True):
            out.append(first)
            out.extend(child.result(f"the decode steps at {run[1]}..{run[-1]} cached tokens", done))
        return out
    finally:  # on an error here or in a process: stop the others
        for child, _ in children:
            child.stop()


# Steps a forked process times between its reports to the parent's progress
REPORT_EVERY = 8


def _timed(step: StepTimer, kv_lens: list[int], done=lambda n: None) -> list[StepResult]:
    """A forked process's steps (_steps): _run_steps."""
    return _run_steps(step, kv_lens, done)


def _run_steps(step: StepTimer, kv_lens: list[int], done=lambda n: None) -> list[StepResult]:
    """The steps at `kv_lens`, in order; `done(n)` every REPORT_EVERY steps and at the end."""
    out = []
    for i, k in enumerate(kv_lens, 1):
        out.append(step(k))
        if i % REPORT_EVERY == 0 or i == len(kv_lens):
            done(REPORT_EVERY if i % REPORT_EVERY == 0 else i % REPORT_EVERY)
    return out


class _Forked:
    """fn(*args, **kw) computed in a process forked from this one (_can_fork must hold); result() waits for
    it and returns it, or raises its error with that process's traceback; stop() ends the process. With
    report=True, fn's last argument is a function of a count that the process calls as it makes progress;
    poll() and result() hand those counts to theirs."""

    def __init__(self, fn, *args, report: bool = False, **kw) -> None:
        receive, send = multiprocessing.get_context("fork").Pipe(duplex=False)
        self.process = multiprocessing.get_context("fork").Process(
            target=_forked_main, args=(send, fn, args, kw, report), daemon=True
        )
        # what this process holds is the forked one's to read, not to scan for garbage: frozen at the fork
        # (gc.freeze's documented use), the child's collections pass over it; here it is unfrozen again
        # (unless this process had frozen objects of its own: then it is left as it was)
        freeze = gc.get_freeze_count() == 0
        if freeze:
            gc.freeze()
        try:
            self.process.start()
        except BaseException:
            receive.close()
            raise
        finally:
            send.close()
            if freeze:
                gc.unfreeze()
        self.receive = receive

    def poll(self, done) -> None:
        """Hand the counts the process has reported so far to `done`, without waiting (its result, or its
        end without one, is left for result())."""
        while self._pending is None and not self._ended and self.receive.poll():
            try:
                kind, value = self.receive.recv()
            except EOFError:
                self._ended = True
                return
            if kind == "progress":
                done(value)
            else:  # its result: kept for result()
                self._pending = (kind, value)

    _pending: tuple[str, Any] | None = None
    _ended = False  # the process closed its end of the pipe (poll saw it)

    def result(self, what: str, done=lambda n: None) -> Any:
        try:
            if self._ended:
                raise EOFError
            kind, value = self._pending or self.receive.recv()
            while kind == "progress":
                done(value)
                kind, value = self.receive.recv()
        except EOFError:
            self.process.join()
            raise NvdlaError(
                f"the process computing {what} ended without them (exit code {self.process.exitcode})"
            ) from None
        self.process.join()
        if kind == "error":
            error, trace = value
            error.add_note(f"in the process computing {what}:\n{trace}")
            raise error
        return value

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.terminate()
        self.process.join()
        self.receive.close()


def _forked_main(send, fn, args, kw, report: bool) -> None:
    try:
        if report:
            args = (*args, lambda n: send.send(("progress", n)))
        send.send(("done", fn(*args, **kw)))
    except BaseException as e:  # the parent raises it, with this process's traceback
        send.send(("error", (e, traceback.format_exc())))
    finally:
        send.close()


def _can_fork() -> bool:
    """Whether decode steps may be timed in forked processes: on Linux (elsewhere fork is unavailable, or
    unsafe: macOS's system libraries), from a process that may have children (not a daemonic one), with
    no other Python thread running (a thread holding a lock at the fork would hold it in the child for
    ever; native threads, such as a BLAS pool's, are not used while timing steps)."""
    return (
        sys.platform.startswith("linux")
        and "fork" in multiprocessing.get_all_start_methods()
        and not multiprocessing.current_process().daemon
        and threading.active_count() == 1
    )


def _with_reductions(res: GenerateResult, spec: ModelSpec, shards: int, alike: int = 1) -> GenerateResult:
    """A shard's generation with its row-parallel layers' reductions (parallel.reduction), two a block: the
    prefill's at its tokens before the first token, each step's at its batch's (figures an instance's); with
    `alike` > 1 the instances share hw's one DRAM (each reduction at the time their traffic together takes:
    parallel.alike_time)."""
    hidden, per_pass = spec.stages[0].hidden, row_parallel_layers(spec)
    hw = res.hw

    def timed(r: Reduction) -> tuple[int, float, float]:  # (cycles, core uJ, DRAM uJ) of one reduction
        if alike == 1:
            return r.cycles, r.core_uj, r.dram_uj
        cycles, core, dram = alike_time(r.cycles, r.profile, hw, alike)
        return cycles, r.core_uj + core, r.dram_uj + dram

    prefill = timed(reduction(hw, res.batch * res.prompt, hidden, shards, res.precision))
    step_reduction = reduction(hw, res.batch, hidden, shards, res.precision)
    step = timed(step_reduction)
    steps = [
        dataclasses.replace(
            s, cycles=s.cycles + per_pass * step[0], dram_bytes=s.dram_bytes + per_pass * step_reduction.dram_bytes,
            core_energy_uj=s.core_energy_uj + per_pass * step[1], dram_energy_uj=s.dram_energy_uj + per_pass * step[2],
        )
        for s in res.steps
    ]  # fmt: skip
    core, dram, host = res.first_step_energy_uj
    return dataclasses.replace(
        res, model=spec.name, steps=steps, tensor_parallel=shards, step_reduction=step_reduction,  # its spec the shard's: what an instance holds
        tp_dram=InstanceDram.SHARED if alike > 1 else InstanceDram.OWN, step_reduction_cycles=step[0],
        first_step_cycles=res.first_step_cycles + per_pass * prefill[0],
        first_step_energy_uj=(core + per_pass * prefill[1], dram + per_pass * prefill[2], host),
    )  # fmt: skip


def roofline_crossover(hw: HwConfig, precision: Precision) -> float:
    """The batch at which streaming the weights stops being the limit: a decode step does `batch` MACs per
    weight element, so compute catches up with DRAM when batch / bytes per weight = peak MACs / bytes per cycle."""
    return hw.peak_macs_per_cycle(precision) * precision.bytes / port_rates(hw)[1]


def _weight_layers_compute_share(spec: ModelSpec, hw: HwConfig, precision: Precision, batch: int, kv_len: int) -> float:
    step = map_model(
        decode_step_graph(spec, batch=batch, kv_len=kv_len), hw, precision=precision, batch=batch, seq=kv_len
    )
    mm = [r for r in step.results if r.stats and r.task.static_weights]
    total = sum(r.cycles for r in mm)
    return sum(r.cycles for r in mm if r.stats.bound is Bound.COMPUTE) / total if total else 0.0


def crossover_batch(spec: ModelSpec, hw: HwConfig, precision: Precision = Precision.INT8, *, kv_len: int = 128) -> int:
    """Smallest batch at which most of a decode step's weight-streaming time (projections, FFN, LM head)
    is compute-bound in the simulation (doubling, then bisection); the attention against each sequence's
    cache stays bound by its own reads and fixed latencies at any batch."""
    lo, hi = 1, 1
    while _weight_layers_compute_share(spec, hw, precision, hi, kv_len) < 0.5:
        lo, hi = hi, hi * 2
        if hi > 4096:
            raise NvdlaError(f"{spec.name} on {hw.name}: the weight streaming stays memory-bound up to batch 4096")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _weight_layers_compute_share(spec, hw, precision, mid, kv_len) >= 0.5:
            hi = mid
        else:
            lo = mid
    return hi
