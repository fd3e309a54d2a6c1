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
A master asking while the others ask nothing runs as it ran alone (its own mix timed it).

What is left out: a master alone is timed on its own ports (its latency and its DBBIF's width are in its
timeline); sharing changes only its bandwidth, not its read latency (a loaded memory's queueing is in the
shares); a task is paced evenly over its time (its bursts are not), so short bursts that would interleave
in the gaps of another master's are counted as contending.
"""

from __future__ import annotations

import bisect
import itertools
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

    def nbytes(self) -> tuple[float, float]:
        """(read, write) bytes over its length."""
        spans = [b - a for a, b in itertools.pairwise(self.breakpoints)]
        return (sum(r * d for r, d in zip(self.read_rate, spans, strict=True)),
                sum(w * d for w, d in zip(self.write_rate, spans, strict=True)))  # fmt: skip

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


def speeds(asks: Sequence[tuple[float, float]], capacity: Capacity) -> list[float]:
    """How fast each master runs through its own time (1: as alone) while asking (read, write) bytes a ns:
    max-min fair shares of the memory's rate for what they ask together, each slowed by what it is not
    given; a master asking while the others ask nothing runs as it ran alone (its own mix timed it)."""
    totals = [r + w for r, w in asks]
    if sum(t > 0 for t in totals) <= 1:
        return [1.0] * len(asks)
    rate = capacity(asks)
    if not rate > 0:
        raise ValueError(f"the memory's rate for {list(asks)} is {rate}: it must be above 0")
    return [g / t if t else 1.0 for g, t in zip(fair_shares(totals, rate), totals, strict=True)]


@dataclass(frozen=True)
class Master:
    """A master's runs one after another (jobs), job i starting when its job i - 1 has ended and, for each
    (other, lag) of `waits`, when master `other`'s job i - lag has ended (nothing to wait for where
    i - lag < 0): a pipeline's stage waits for the stage before it to finish the same input (lag 0); a
    decoder's first stage waits for its last to finish the same sequences' previous token (lag: the
    micro-batches in flight)."""

    jobs: tuple[Profile, ...]
    waits: tuple[tuple[int, int], ...] = ()


def share(profiles: Sequence[Profile], capacity: Capacity) -> list[float]:
    """When each master ends (ns) sharing the memory from time 0, each running its one profile."""
    return [ends[-1] for ends in share_jobs([Master((p,)) for p in profiles], capacity)]


def alike(profile: Profile, masters: int, capacity: Capacity) -> float:
    """When `masters` alike masters end (ns), each running `profile` from time 0 in step (a model's shards on
    instances of one build: tensor parallel on a shared DRAM): what share() gives for alike profiles, in
    closed form. Between two breakpoints they all ask the same, so each gets an equal share and they stay in
    step: an interval takes max(its time alone, masters x its bytes / the memory's rate for them together).
    One master runs as it ran alone."""
    if masters < 1:
        raise ValueError(f"masters must be >= 1, not {masters}")
    if masters == 1:
        return profile.length
    total = 0.0
    points = profile.breakpoints
    for i, (r, w) in enumerate(zip(profile.read_rate, profile.write_rate, strict=True)):
        span = points[i + 1] - points[i]
        if r + w:
            rate = capacity([(r, w)] * masters)
            if not rate > 0:
                raise ValueError(f"the memory's rate for {masters} x {(r, w)} is {rate}: it must be above 0")
            span = max(span, span * masters * (r + w) / rate)
        total += span
    return total


def share_jobs(masters: Sequence[Master], capacity: Capacity) -> list[list[float]]:
    """When each master's jobs end (ns) sharing the memory from time 0 (module docstring); a master waiting
    for a job of another asks nothing."""
    n = len(masters)
    for k, m in enumerate(masters):
        for other, lag in m.waits:
            if not (0 <= other < n and other != k and lag >= 0 and len(masters[other].jobs) >= len(m.jobs) - lag):
                raise ValueError(f"master {k}: waits ({other}, {lag}) must name another master with its jobs "
                                 f"up to {len(m.jobs) - lag} and a lag >= 0")  # fmt: skip
    same_job = {k: [o for o, lag in m.waits if lag == 0] for k, m in enumerate(masters)}
    for k in range(n):  # masters waiting, around a loop, each for the next one's same job: none can start
        path, seen = [k], {k}
        while path:
            nxt = [o for o in same_job[path[-1]] if o == k or o not in seen]
            if not nxt:
                path.pop()
                continue
            if nxt[0] == k:
                raise ValueError(f"masters {' -> '.join(map(str, [*path, k]))} wait for each other's same job: none "
                                 "can start")  # fmt: skip
            seen.add(nxt[0])
            path.append(nxt[0])
    job = [0] * n  # each master's job under way (or waiting)
    at = [0] * n  # its interval in that job
    own = [0.0] * n  # its progress through that job's time
    ends: list[list[float]] = [[] for _ in range(n)]
    wall = 0.0

    def ready(k: int) -> bool:
        m, i = masters[k], job[k]
        return i < len(m.jobs) and all(len(ends[other]) > i - lag for other, lag in m.waits)

    def finish_empty_jobs() -> None:  # a job of no time ends as soon as it may start
        moved = True
        while moved:
            moved = False
            for k in range(n):
                if ready(k) and masters[k].jobs[job[k]].length <= 0:
                    ends[k].append(wall)
                    job[k] += 1
                    moved = True

    finish_empty_jobs()
    while True:
        running = [k for k in range(n) if ready(k)]
        if not running:
            if any(job[k] < len(masters[k].jobs) for k in range(n)):
                raise ValueError("the masters wait on each other: no job can start")
            return ends
        profiles = [masters[k].jobs[job[k]] for k in running]
        asks = [(p.read_rate[at[k]], p.write_rate[at[k]]) for k, p in zip(running, profiles, strict=True)]
        speed = speeds(asks, capacity)
        # to the next breakpoint of any running master, in wall time
        step = min((p.breakpoints[at[k] + 1] - own[k]) / s for k, p, s in zip(running, profiles, speed, strict=True))
        wall += step
        for k, p, s in zip(running, profiles, speed, strict=True):
            own[k] += step * s
            while at[k] + 1 < len(p.breakpoints) and own[k] >= p.breakpoints[at[k] + 1] - _EPS:
                at[k] += 1
            if at[k] + 1 >= len(p.breakpoints):  # the job is done: the next one waits for its turn
                ends[k].append(wall)
                job[k] += 1
                at[k], own[k] = 0, 0.0
        finish_empty_jobs()
