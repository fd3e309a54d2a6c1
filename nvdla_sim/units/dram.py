"""DRAM / SRAM interface timing: a bandwidth calendar with fixed read latency.

Each memory is one port of `bytes_per_cycle`. A transfer occupies port time bytes/bytes_per_cycle and
fills the earliest free gaps at or after its ready time (requests from different DMA clients interleave
at burst granularity, so a fluid, pre-emptible model is the right level). Reads complete `latency`
cycles after their last beat is issued; back-to-back reads overlap their latency, which is what the
NVDLA RDMA latency FIFOs (sized from PRIMARY_MEMIF_LATENCY) are for. Writes are posted.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


@dataclass
class MemoryPort:
    bytes_per_cycle: float
    latency: int
    _starts: list[float] = field(default_factory=list)
    _ends: list[float] = field(default_factory=list)
    busy_cycles: float = 0.0
    bytes_moved: int = 0
    write_port: MemoryPort | None = None  # independent write channel, when the memory has one

    @property
    def last_beat(self) -> float:
        """When the last booked transfer on this port (and its write channel) ends, in cycles."""
        own = self._ends[-1] if self._ends else 0.0
        return max(own, self.write_port.last_beat if self.write_port else 0.0)

    @property
    def writes(self) -> MemoryPort:
        """The port that posted writes use: the write channel if separate, else this (shared) port."""
        return self.write_port or self

    @property
    def channel_busy(self) -> float:
        """Busy cycles of the busier channel (a shared port already holds its writes)."""
        return max(self.busy_cycles, self.write_port.busy_cycles if self.write_port else 0.0)

    def reserve(self, ready: float, nbytes: int) -> tuple[float, float]:
        """Book `nbytes` from `ready` on; return (first beat, last beat) in cycles."""
        if nbytes <= 0:
            return ready, ready
        need = nbytes / self.bytes_per_cycle
        self.busy_cycles += need
        self.bytes_moved += nbytes
        starts, ends = self._starts, self._ends
        if not ends or ready >= ends[-1]:  # past every booking: one interval at the end (as below, faster)
            end = ready + need
            if ends and abs(ends[-1] - ready) < 1e-9:
                ends[-1] = end
            else:
                starts.append(ready)
                ends.append(end)
            return ready, end
        if ready >= starts[-1]:  # inside the last booking: right after it, the interval grown (as below)
            first = ends[-1]
            ends[-1] = first + need
            return first, ends[-1]
        i = bisect.bisect_right(ends, ready)  # first interval ending after ready
        t = ready
        first: float | None = None
        new: list[tuple[float, float]] = []
        while need > 1e-12:
            if i < len(starts) and starts[i] <= t:
                t = max(t, ends[i])
                i += 1
                continue
            gap_end = starts[i] if i < len(starts) else float("inf")
            take = min(need, gap_end - t)
            if take > 0:
                new.append((t, t + take))
                if first is None:
                    first = t
                need -= take
                t += take
        for s, e in new:
            self._insert(s, e)
        assert first is not None
        return first, t

    def booked_after(self, t: float) -> list[tuple[float, float]]:
        """The booked intervals that end after `t`: all a transfer ready at `t` or later can meet."""
        i = bisect.bisect_right(self._ends, t)
        return list(zip(self._starts[i:], self._ends[i:], strict=True))

    def jump(self, t: float, by: float, *, busy: float, nbytes: int) -> None:
        """Stand for transfers of `nbytes` and `busy` cycles booked in a stretch skipped after `t` (a steady
        state repeating itself, tile_pipeline._FastForward): the intervals ending after `t` move `by` later,
        the counters grow; nothing ready before `t` + `by` is asked of the port again."""
        i = bisect.bisect_right(self._ends, t)
        self._starts[i:] = [v + by for v in self._starts[i:]]
        self._ends[i:] = [v + by for v in self._ends[i:]]
        self.busy_cycles += busy
        self.bytes_moved += nbytes

    def _insert(self, s: float, e: float) -> None:
        starts, ends = self._starts, self._ends
        i = bisect.bisect_left(starts, s)
        starts.insert(i, s)
        ends.insert(i, e)
        # merge with neighbours that touch
        if i + 1 < len(starts) and abs(starts[i + 1] - e) < 1e-9:
            ends[i] = ends[i + 1]
            del starts[i + 1], ends[i + 1]
        if i > 0 and abs(ends[i - 1] - starts[i]) < 1e-9:
            ends[i - 1] = ends[i]
            del starts[i], ends[i]


def credit_bytes_per_cycle(
    credits: int, beat_bytes: float, latency: int, request_beats: int, reuse_cycles: int
) -> float:
    """The most a DMA client with `credits` beats in flight can read per cycle (Little's law): a credit
    leaves with a request, comes back with the request's last beat `latency + request_beats - 1` cycles
    later, and goes out again `reuse_cycles` after that (the beat's way through the client's latency
    FIFO to its consumer and the next request's way out). A latency FIFO sized for the build's
    PRIMARY_MEMIF_LATENCY keeps up with its unit at that latency; behind a slower memory it does not."""
    return credits * beat_bytes / (latency + request_beats - 1 + reuse_cycles)
