"""NVDLA's memory interface (MCIF) as the memory-to-memory units meet it (nvdla/hw branch nvdlav1,
vmod/nvdla/nocif): requests count 32-byte atoms, and MCIF cuts a write request into transactions that end on
256-byte boundaries (NV_NVDLA_MCIF_WRITE_IG_bpt.v 539-676), each granted only once all its data is in (store
and forward, NV_NVDLA_MCIF_WRITE_IG_arb.v), one memory write request per block of the port's beat it covers.
Rubik's and BDMA's timings (rubik/timing.py, bdma/timing.py) use it."""

from __future__ import annotations

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
