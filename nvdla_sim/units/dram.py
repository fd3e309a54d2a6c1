"""A DMA client's side of the memory interface: what its credits let it read per cycle. The memories'
own timing (ports, bandwidth, latency, refresh) is a system part: nvdla_sim/system/memory.py."""

from __future__ import annotations

from nvdla_sim.config import HwConfig
from nvdla_sim.layers import Memory


def beat_bytes(hw: HwConfig, memory: Memory) -> int:
    """The width in bytes of NVDLA's interface to `memory` (DBBIF for DRAM, SRAMIF for on-chip SRAM): one
    beat, what a DMA engine's single-beat request moves."""
    return (hw.memory.dram_width_bits if memory is Memory.DRAM else hw.memory.sram_width_bits) // 8


def credit_bytes_per_cycle(
    credits: int, beat_bytes: float, latency: int, request_beats: int, reuse_cycles: int
) -> float:
    """The most a DMA client with `credits` beats in flight can read per cycle (Little's law): a credit
    leaves with a request, comes back with the request's last beat `latency + request_beats - 1` cycles
    later, and goes out again `reuse_cycles` after that (the beat's way through the client's latency
    FIFO to its consumer and the next request's way out). A latency FIFO sized for the build's
    PRIMARY_MEMIF_LATENCY keeps up with its unit at that latency; behind a slower memory it does not."""
    return credits * beat_bytes / (latency + request_beats - 1 + reuse_cycles)
