"""NVDLA's memory interface (MCIF) as the memory-to-memory units meet it (nvdla/hw branch nvdlav1,
vmod/nvdla/nocif): requests count 32-byte atoms, and MCIF cuts a write request into transactions that end on
256-byte boundaries (NV_NVDLA_MCIF_WRITE_IG_bpt.v 539-676), each granted only once all its data is in (store
and forward, NV_NVDLA_MCIF_WRITE_IG_arb.v), one memory write request per block of the port's beat it covers.
Rubik's and BDMA's timings (rubik/timing.py, bdma/timing.py) use it, and their processors its beats, SRAM
check and traffic."""

from __future__ import annotations

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.stats import Traffic
from nvdla_sim.errors import ConfigError
from nvdla_sim.layers import Memory
from nvdla_sim.system.dram import AccessMix

ATOM_BYTES = 32
TRANSACTION_BYTES = 256


def write_transactions(offset: int, atoms: int, beat_bytes: int) -> list[tuple[int, int]]:
    """A write request of `atoms` starting `offset` bytes past a 256-byte boundary, as MCIF's transactions:
    each as (the request's atoms up to its end, the memory beats it covers)."""
    out = []
    i = 0
    while i < atoms:
        at = offset + i * ATOM_BYTES
        end = min(atoms, i + (TRANSACTION_BYTES - at % TRANSACTION_BYTES) // ATOM_BYTES)
        out.append((end, (offset + end * ATOM_BYTES - 1) // beat_bytes - at // beat_bytes + 1))
        i = end
    return out


def check_memories(name: str, hw: HwConfig, source: Memory, destination: Memory) -> None:
    """A memory-to-memory unit's copy refused in one line where the build lacks the on-chip SRAM it names."""
    if Memory.SRAM in (source, destination) and not hw.memory.has_sram:
        raise ConfigError(f"{name}: {hw.name} has no on-chip SRAM to copy from or to (memory.sram_width_bits = 0)")


def copy_traffic(read_bytes: int, write_bytes: int, source: Memory, destination: Memory) -> Traffic:
    """The bytes a memory-to-memory unit reads from `source` and writes to `destination`."""
    src, dst = source is Memory.DRAM, destination is Memory.DRAM
    return Traffic(
        dram_read=read_bytes * src, dram_write=write_bytes * dst,
        sram_read=read_bytes * (not src), sram_write=write_bytes * (not dst),
    )  # fmt: skip


def copy_mix(traffic: Traffic) -> AccessMix:
    """The DRAM's clients in a copy (BDMA, Rubik): its read DMA and its write DMA, where they meet the DRAM."""
    return AccessMix.of([traffic.dram_read], traffic.dram_write)
