"""Several masters on one DRAM (issue 58, items 3 and 4): NVDLA instances, each with the run it makes alone,
sharing the memory's bandwidth.

Each master's run alone is a timeline of demands (Demand: a task's DRAM bytes over its time alone, read and
written). Shared, the masters advance through their own timelines at a speed of at most 1: at any moment
each asks for its present rate (the bytes of its running tasks over their times alone) and the memory
gives max-min fair shares of its rate (a master asking less than an equal share gets all it asks; the rest
split equally among the others: the round-robin arbitration of NVDLA's MCIF and of a memory controller
between masters that keep requests queued), and a master given less than it asks slows in proportion (its
tasks' compute stretches with their transfers: a task is taken as uniformly memory-paced over its time).
The memory's rate is a function of what the masters ask together (`capacity`): a constant for a fluid port,
the DRAM device model's sustained rate for the masters' mix of clients for the dram model (memory.DramMemory).

What is left out: a master alone is timed on its own ports (its latency and its DBBIF's width are in its
timeline); sharing changes only its bandwidth, not its read latency (a loaded memory's queueing is in the
shares); a task is paced evenly over its time (its bursts are not), so short bursts that would interleave
in the gaps of another master's are counted as contending.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# when the masters' timelines meet a breakpoint, ns closer than this are the same moment
_EPS = 1e-9


@dataclass(frozen=True)
class Demand:
    """A task's DRAM traffic over its time alone (ns from the master's start)."""

    start: float
    end: float
    read_bytes: float
    write_bytes: float


@dataclass(frozen=True)
class Profile:
    """A master's DRAM demand alone, piecewise constant: between breakpoints[i] and breakpoints[i + 1] it reads
    read_rate[i] and writes write_rate[i] bytes a ns of its own time."""

    breakpoints: tuple[float, ...]
    read_rate: tuple[float, ...]
    write_rate: tuple[float, ...]

    @classmethod
    def of(cls, demands: Sequence[Demand], length: float) -> Profile:
        """The profile of a run of `length` ns with these demands (each spread evenly over its time)."""
        points = sorted({0.0, float(length), *(d.start for d in demands), *(d.end for d in demands)})
        points = [p for p in points if 0 <= p <= length]
        read = [0.0] * (len(points) - 1)
        write = [0.0] * (len(points) - 1)
        for d in demands:
            span = d.end - d.start
            if span <= 0 or not (d.read_bytes or d.write_bytes):
                continue
            lo, hi = bisect.bisect_left(points, d.start), bisect.bisect_left(points, d.end)
            for i in range(lo, hi):
                read[i] += d.read_bytes / span
                write[i] += d.write_bytes / span
        return cls(tuple(points), tuple(read), tuple(write))

    @property
    def length(self) -> float:
        return self.breakpoints[-1]

    def repeated(self, times: int) -> Profile:
        """The run `times` over, back to back."""
        n = self.length
        points = [*self.breakpoints]
        for k in range(1, times):
            points += [p + k * n for p in self.breakpoints[1:]]
        return Profile(tuple(points), self.read_rate * times, self.write_rate * times)


Capacity = Callable[[Sequence[tuple[float, float]]], float]  # (read, write) bytes a ns asked -> bytes a ns given


def fair_shares(asks: Sequence[float], capacity: float) -> list[float]:
    """Max-min fair shares of `capacity` for masters asking `asks` (water filling)."""
    if sum(asks) <= capacity:
        return list(asks)
    out = [0.0] * len(asks)
    left, waiting = capacity, sorted(range(len(asks)), key=asks.__getitem__)
    while waiting:
        equal = left / len(waiting)
        i = waiting[0]
        if asks[i] <= equal:
            out[i] = asks[i]
            left -= asks[i]
            waiting.pop(0)
            continue
        for j in waiting:
            out[j] = equal
        break
    return out


def share(profiles: Sequence[Profile], capacity: Capacity) -> list[float]:
    """When each master ends (ns) sharing the memory from time 0 (module docstring)."""
    n = len(profiles)
    at = [0] * n  # each master's interval
    own = [0.0] * n  # each master's progress through its own time
    ends = [p.length if len(p.breakpoints) < 2 else -1.0 for p in profiles]
    wall = 0.0
    while True:
        running = [i for i in range(n) if ends[i] < 0]
        if not running:
            return ends
        asks = [(profiles[i].read_rate[at[i]], profiles[i].write_rate[at[i]]) for i in running]
        speed = [1.0] * len(running)
        totals = [r + w for r, w in asks]
        if len(running) > 1 and sum(totals):
            given = fair_shares(totals, capacity(asks))
            speed = [g / t if t else 1.0 for g, t in zip(given, totals, strict=True)]
        # to the next breakpoint of any running master, in wall time
        step = min((profiles[i].breakpoints[at[i] + 1] - own[i]) / s for i, s in zip(running, speed, strict=True))
        wall += step
        for i, s in zip(running, speed, strict=True):
            own[i] += step * s
            p = profiles[i]
            while at[i] + 1 < len(p.breakpoints) and own[i] >= p.breakpoints[at[i] + 1] - _EPS:
                at[i] += 1
            if at[i] + 1 >= len(p.breakpoints):
                ends[i] = wall
