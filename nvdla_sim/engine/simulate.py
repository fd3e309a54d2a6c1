"""The stream through one unit: standalone SDP, PDP and CDP layers (their processors, nvdla_sim.processors,
say what each streams).

Standalone SDP/PDP/CDP layers stream the cube through their RDMA in 2 KB chunks, process at the unit's element
rate and write back through the same memory ports as the convolution pipeline. Requests in flight are
bounded by the RDMA latency FIFO, sized as in projects.spec: depth = clamp(ceil(latency x rate_bytes /
memif_bytes), 4, 512) entries of one MEMIF beat.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.bounds import transfer_floor
from nvdla_sim.engine.stats import Bound, LayerStats, StreamDetail, Traffic, Unit, UnitStats
from nvdla_sim.engine.steady import STEADY, SteadyState
from nvdla_sim.engine.tile_pipeline import (
    BlockRun,
    Buffer,
    Channel,
    Fetch,
    Item,
    extend_periods,
    item_traffic,
    make_ports,
    run_items,
)
from nvdla_sim.layers import Memory

RDMA_CHUNK_BYTES = 2048  # largest run of RDMA requests modelled as one pipeline item
MIN_CHUNKS = 32  # a cube is cut into at least this many items (down to one memory atom each), so the
# exposed first-chunk fetch is at most 1/32 of the stream: the RDMA requests atom by atom and the unit
# starts on the first atom back (sdp_3x3x33_* on NVIDIA's nv_small RTL: 45 atoms, 4 surfaces)


def chunk_bytes(in_bytes: int, hw: HwConfig) -> int:
    atom = hw.memory.memory_atomic_bytes
    return max(atom, min(RDMA_CHUNK_BYTES, math.ceil(in_bytes / MIN_CHUNKS / atom) * atom))


def _long_stream(run, item, chunks: int, cut: int) -> tuple:
    """A long stream's (result, ports, traffic) from a cut of it: its first chunks and its last, as many
    that what the cut leaves out is a whole number of periods of the steady state the pipeline reached
    (tile_pipeline._FastForward found it, extend_periods adds the periods: exact, the same figures as
    running every chunk; tests/unit/test_fast_forward.py). All chunks but the last are alike. (None,) * 3
    when the cut reached no steady state or a sum would leave the exact grid: then every chunk is run. `cut`:
    the chunks run before the periods are added (SteadyState.stream_cut)."""
    res, ports, traffic = run(cut)
    jump = res.last_jump
    if jump is None:
        return (None,) * 3
    first = cut + (chunks - 1 - cut) % jump.period
    if first != cut:  # cut again so that what is left out is whole periods
        res, ports, traffic = run(first)
    periods = (chunks - 1 - first) // jump.period
    if res.last_jump is None or res.last_jump.period != jump.period or res.last_jump.shift != jump.shift:
        return (None,) * 3
    longer = extend_periods(res, periods)
    if longer is None:
        return (None,) * 3
    left_out = periods * jump.period  # chunks the cut leaves out, each moving one chunk's bytes
    one = item_traffic([item(0, 0)])
    return longer, ports, traffic + Traffic(*(left_out * v for v in dataclasses.astuple(one)))


def rdma_chunks_in_flight(hw: HwConfig, bytes_per_cycle: float, chunk: int) -> int:
    """Chunks the RDMA can have outstanding: its latency FIFO (projects.spec *_LATENCY_FIFO_DEPTH) in chunks."""
    beat = hw.memory.dram_width_bits / 8
    latency = hw.memory.fifo_latency_cycles
    latency = hw.memory.dram_latency_cycles if latency is None else latency
    depth = min(512, max(4, math.ceil(latency * bytes_per_cycle / beat)))
    return max(2, math.ceil(depth * beat / chunk))


@dataclass(frozen=True)
class StreamWork:
    """What a standalone SDP / PDP / CDP layer streams, as its processor (nvdla_sim.processors) works it
    out: the cube it reads, the operands beside it, what it writes, and the unit's rate."""

    in_bytes: int  # the input cube in memory
    operand_bytes: int  # per-element or per-channel operands read beside it (SDP's E/B/N-RDMA)
    out_bytes: int  # the output cube in memory
    lane_elements: int  # elements the datapath processes, padding lanes included
    elements: int  # elements of the input cube
    rate: float  # elements per cycle
    unit: Unit  # the unit that reports busy and stall cycles
    bound: Bound  # the bound when the unit, not memory, limits the stream
    input_memory: Memory
    output_memory: Memory
    precision_bytes: int  # bytes per input element (the RDMA's request rate)


def simulate_stream(
    work: StreamWork, hw: HwConfig, *, name: str, record_events: bool, steady: SteadyState = STEADY
) -> LayerStats:
    """Time a stream through one unit: the cube cut into RDMA chunks (chunk_bytes), fetched with the
    RDMA's requests in flight (rdma_chunks_in_flight), each processed at the unit's rate and written back
    (`steady`: how its steady state is skipped and a long stream cut, steady.SteadyState)."""
    in_bytes, operand, out_bytes, rate = work.in_bytes, work.operand_bytes, work.out_bytes, work.rate
    lane_elements, unit = work.lane_elements, work.unit
    chunk = chunk_bytes(in_bytes, hw)
    chunks = max(1, math.ceil(in_bytes / chunk))
    in_flight = rdma_chunks_in_flight(hw, rate * work.precision_bytes, chunk)

    def item(i: int, at: int) -> Item:
        """Chunk i of the stream as the pipeline's item number `at` (its fetch events 2 at, 2 at + 1)."""
        share = (min(in_bytes, (i + 1) * chunk) - i * chunk) / in_bytes
        fetches = [
            Fetch(2 * at, Buffer.RDMA, Channel.RDMA, math.ceil(in_bytes * share), work.input_memory, f"read {i}")
        ]
        if operand:
            fetches.append(Fetch(2 * at + 1, Buffer.ERDMA, Channel.ERDMA, math.ceil(operand * share),
                                 work.input_memory, f"operand {i}"))  # fmt: skip
        return Item(
            name=f"chunk {i}",
            fetches=tuple(fetches),
            uses=tuple(f.event for f in fetches),
            blocks=(BlockRun(1, 0, 0, math.ceil(lane_elements * share / rate)),),
            write_bytes=math.ceil(out_bytes * share),
            write_memory=work.output_memory,
        )

    def run(first: int) -> tuple:
        """The stream cut to its first `first` chunks and its last one (all of it when first >= chunks - 1)."""
        idx = [*range(min(first, chunks - 1)), chunks - 1]
        items = [item(i, at) for at, i in enumerate(idx)]
        ports = make_ports(hw, items)
        res = run_items(items, capacities={Buffer.RDMA: in_flight, Buffer.ERDMA: in_flight}, ports=ports,
                        fetch_unit=unit, compute_unit=unit, drain_unit=unit, record_events=record_events,
                        steady=steady)  # fmt: skip
        return res, ports, item_traffic(items)

    cut = steady.stream_cut
    res, ports, traffic = (None,) * 3
    if cut and not record_events and chunks > cut:
        res, ports, traffic = _long_stream(run, item, chunks, cut)
    if res is None:
        res, ports, traffic = run(chunks)
    cycles = math.ceil(res.end)
    lower = max(
        math.ceil(lane_elements / rate),
        transfer_floor(traffic.dram_read + traffic.sram_read, traffic.dram_write + traffic.sram_write, hw),
    )
    bound = work.bound if res.drain_busy >= res.wait_fetch else Bound.DRAM
    units = {
        unit: UnitStats(res.drain_busy, math.ceil(res.wait_fetch)),
        Unit.DRAM: UnitStats(math.ceil(ports[Memory.DRAM].channel_busy)),
    }
    return LayerStats(
        name=name,
        cycles=cycles,
        macs=0,
        peak_macs_per_cycle=0,
        traffic=traffic,
        units=units,
        bound=bound,
        lower_bound_cycles=lower,
        events=tuple(res.events),
        detail=StreamDetail(work.elements, rate, chunks, math.ceil(res.first_compute)),
        dram_mix=ports[Memory.DRAM].mix,
    )
