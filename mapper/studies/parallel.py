"""The reductions of a decoder split across NVDLA instances by heads and FFN columns (tensor parallel; issue
58, item 4; `generate(..., tensor_parallel=N)` runs one shard and adds them).

Each of N instances of a build runs one shard (presets.tensor_shard: heads, KV heads, FFN columns and LM-head
columns over N; Megatron-LM's split), in step with the others. A shard's row-parallel layers (the
attention's output projection and the FFN's down projection, two a block) give partial sums of the hidden
vector; each instance writes its partial at INT16 (FP16 on a build whose CMAC has no INT16), then adds the
other N - 1 instances' from the memory, one SDP pass each (X1's ALU with a per-element operand read by its
RDMA; the last pass writes the layer's precision): Reduction, simulated on the build. Where the instances'
DRAM is (options.InstanceDram): each its own port (a memory with a port per instance: an HBM stack's channels, or a chip's
own DRAM), or all on the build's one DRAM (alike_cycles: the shards ask alike and in step, so every stretch
of a pass takes the longer of its time alone and the N instances' bytes at the memory's rate for them;
shared_memory.alike). Left out: the interrupt and launch that order the instances around each reduction,
and the partials' second byte in the projections' own writes.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from nvdla_mapper.studies.system import capacity
from nvdla_sim.config import HwConfig
from nvdla_sim.energy.model import Energy, dram_background_pj, layer_energy, run_energy
from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import MAX_DIM, OperandMode, SdpLayer, SdpSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors import simulate
from nvdla_sim.system.shared_memory import Demand, Profile, alike


@dataclass(frozen=True)
class Reduction:
    """One row-parallel layer's partial sums added on one instance: shards - 1 SDP passes over [tokens,
    hidden], each reading the running sum and another instance's partial and writing the sum."""

    passes: int
    cycles: int
    dram_bytes: int
    core_uj: float  # its NVDLA core's energy over its cycles
    dram_uj: float
    profile: Profile  # its passes' DRAM demand, back to back, in ns


NO_REDUCTION = Reduction(0, 0, 0, 0.0, 0.0, Profile((0.0,), (), ()))


def row_parallel_layers(spec) -> int:
    """A decoder pass's row-parallel layers (each followed by a reduction): the attention's output projection
    and the FFN's down projection, in every block."""
    return 2 * sum(st.layers for st in spec.stages)


def alike_time(cycles: int, profile: Profile, hw: HwConfig, alike: int) -> tuple[int, float, float]:
    """A pass of `cycles` alone (its DRAM demand `profile`) on each of `alike` instances in step on hw's one
    DRAM: (its cycles together, alike_cycles; the energy its wait adds to an instance's core, its always-on
    power and leakage; and to its DRAM: the one DRAM's background over the time together, each instance's
    share, in place of its own DRAM's over its time alone), uJ."""
    together = max(cycles, alike_cycles(profile, hw, alike))
    core = run_energy(Energy(), hw, together - cycles).core
    dram = dram_background_pj(hw, together) / alike - dram_background_pj(hw, cycles)
    return together, core * 1e-6, dram * 1e-6


def alike_cycles(profile: Profile, hw: HwConfig, instances: int) -> int:
    """Cycles a pass whose DRAM demand alone is `profile` (ns) takes on each of `instances` alike instances of
    `hw` running it in step on hw's one DRAM (shared_memory.alike, at system.capacity's rate for them)."""
    return math.ceil(alike(profile, instances, capacity(hw)) * hw.clock_mhz / 1e3 - 1e-6)


def partial_precision(hw: HwConfig) -> Precision:
    """The precision the partial sums travel at: INT16, else FP16 (a one-line error for a build with neither)."""
    for p in (Precision.INT16, Precision.FP16):
        if p in hw.precisions:
            return p
    raise NvdlaError(f"--tp: {hw.name} has no INT16 or FP16 (its config's precisions): its partial sums cannot be "
                     "added at more than INT8")  # fmt: skip


def reduction(hw: HwConfig, tokens: int, hidden: int, shards: int, precision: Precision) -> Reduction:
    """The adds of one row-parallel layer's partials over `tokens` rows of `hidden` on one of `shards`
    instances (module docstring), the last pass writing `precision`."""
    if shards == 1:
        return NO_REDUCTION
    if tokens > MAX_DIM:
        raise NvdlaError(f"--tp: a reduction over {tokens:,} tokens (batch x prompt) is past SDP's {MAX_DIM}-pixel "
                         "cube width")  # fmt: skip
    partial = partial_precision(hw)
    add = SdpSpec(bias=OperandMode.PER_ELEMENT)
    middle = SdpLayer("tp.reduce", tokens, 1, hidden, partial, add)
    last = SdpLayer("tp.reduce.last", tokens, 1, hidden, partial, dataclasses.replace(add, out_precision=precision))
    layers = [middle] * (shards - 2) + [last]
    timed = {layer: simulate(layer, hw, record_events=False) for layer in dict.fromkeys(layers)}  # middles alike
    stats = [timed[layer] for layer in layers]
    cycles = sum(s.cycles for s in stats)
    dynamic = Energy.total([layer_energy(layer, s, hw) for layer, s in zip(layers, stats, strict=True)])
    run = run_energy(dynamic, hw, cycles)
    ns, at, demands = 1e3 / hw.clock_mhz, 0, []
    for s in stats:
        demands.append(Demand(at * ns, (at + s.cycles) * ns, s.traffic.dram_read, s.traffic.dram_write))
        at += s.cycles
    return Reduction(len(layers), cycles, sum(s.traffic.dram_total for s in stats), run.core * 1e-6,
                     run.dram * 1e-6, Profile.of(demands, cycles * ns))  # fmt: skip
