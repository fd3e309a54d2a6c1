"""Schedule lowered tasks: dependency order from the graph, one task at a time per resource.

Resources: the NVDLA core (one hardware layer at a time: the convolution pipeline and standalone SDP
share SDP), BDMA and the host CPU run concurrently. A consumer with the same instance count as a producer
on another resource (per-head QK^T after a per-head BDMA copy) starts after the producer's first instance
and streams behind it; otherwise it starts when its inputs are done. The host takes, at each hand-off,
every instance whose inputs are done (the instances are rows of one cube): it pays its per-hand-off
overhead once for all of them, so it keeps pace behind many small hardware layers and does one
hand-off after one large one. Memory contention between concurrent resources is not modelled (noted in
the report).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from nvdla_mapper.lowering.rules import Resource
from nvdla_sim.engine.steady import PeriodMemo


class Scheduled(NamedTuple):
    index: int
    start: int
    end: int
    busy: int  # the resource's busy time for this task (the host: its hand-offs' overheads and work)


_new = tuple.__new__  # a NamedTuple from its fields' tuple, without its __new__'s Python frame

# blocks between repeats of a block's state kept to find the period (a model's blocks repeat with period 1;
# a block whose resources alternate its free times, with 2)
_MAX_BLOCK_PERIOD = 4


class Blocks(NamedTuple):
    """Tasks [first, first + size * count) as `count` blocks of `size` alike tasks (a model's repeated
    layers), as alike_blocks checks: task j of every block has one resource and instance count, and from
    the second block on its waits are those of task j of the block before, moved one block on, all inside
    its own block or the one before."""

    first: int
    size: int
    count: int


def alike_blocks(tasks: list, deps: list[list[int]], resources: list[Resource], blocks: Blocks) -> bool:
    """Whether `blocks` describes the task list (Blocks). What makes a block's schedule its predecessor's
    shifted once two blocks' are: the schedule of a block is a function of its tasks' durations and of
    the times its waits and its resources' last tasks end, and that function commutes with a shift."""
    first, size, count = blocks
    if size < 1 or count < 1 or first < 0 or first + size * count > len(tasks):
        return False
    for b in range(1, count):
        lo = first + (b - 1) * size
        for i in range(first + b * size, first + (b + 1) * size):
            j = i - size
            if resources[i] is not resources[j] or tasks[i].count != tasks[j].count:
                return False
            if any(d < lo or d >= i for d in deps[i]):
                return False
            if b >= 2 and deps[i] != [d + size for d in deps[j]]:
                return False
    return True


def schedule(
    tasks: list,
    durations: list[int],
    instance: list[int],
    deps: list[list[int]],
    resources: list[Resource],
    *,
    host_overhead: int = 0,
    blocks: Blocks | None = None,
) -> list[Scheduled]:
    """List-schedule tasks in index order (already topological). `host_overhead`: cycles of one host
    hand-off, included in each host instance's cycles in `instance`. With `blocks` (alike_blocks holds
    for them), blocks whose tasks' durations and instance cycles are all alike are scheduled one by one
    until the state after a block (every start, end and busy time of its tasks, and the free time of every
    resource the blocks use, relative to its first start) is the state of a block p before, shifted by D
    cycles (engine.steady's mechanism, PeriodMemo): each later block is then its twin p blocks before
    shifted by D for each period (the schedule of a block commutes with a shift of its inputs, which are the
    block before's outputs), and the tasks after the blocks are scheduled from there. The same schedule as
    without `blocks` (tests/unit/test_schedule.py)."""
    free: dict = {}
    out: list[Scheduled] = []
    counts = [t.count for t in tasks]
    n = len(resources)
    if blocks is None or not blocks_alike(durations, instance, blocks):
        _place(0, n, tasks, durations, instance, deps, resources, counts, out, free, host_overhead)
        return out
    first, size, count = blocks
    _place(0, first, tasks, durations, instance, deps, resources, counts, out, free, host_overhead)
    keys = tuple(dict.fromkeys("host" if r is Resource.HOST else r for r in resources[first : first + size]))
    seen = PeriodMemo(_MAX_BLOCK_PERIOD)  # the state after a block -> (block, its first start)
    b = 0
    while b < count:
        lo = first + b * size
        _place(lo, lo + size, tasks, durations, instance, deps, resources, counts, out, free, host_overhead)
        if b == 0:  # block 0's waits reach before the blocks: block 1 is not a function of it alone
            b += 1
            continue
        ref = out[lo].start
        state = (tuple((start - ref, end - ref, busy) for _, start, end, busy in out[lo : lo + size]),
                 tuple(free[k] - ref for k in keys))  # fmt: skip
        before = seen.repeat(state, (b, ref))
        b += 1
        if before is None or ref < before[1]:
            continue
        period, shift = b - 1 - before[0], ref - before[1]
        periods = (count - b) // period
        twins = out[lo - (period - 1) * size : lo + size]  # the period that repeats, ending with block b - 1
        for k in range(1, periods + 1):
            by, step = k * shift, k * period * size
            out.extend([_new(Scheduled, (i + step, start + by, end + by, busy)) for i, start, end, busy in twins])
        for key in keys:
            free[key] += periods * shift
        b += periods * period
    _place(first + size * count, n, tasks, durations, instance, deps, resources, counts, out, free, host_overhead)
    return out


def blocks_alike(durations: list[int], instance: list[int], blocks: Blocks) -> bool:
    """Whether every block's tasks take the durations and instance cycles of the first block's."""
    first, size, count = blocks
    one, each = durations[first : first + size], instance[first : first + size]
    return all(
        durations[a : a + size] == one and instance[a : a + size] == each
        for a in range(first + size, first + size * count, size)
    )


def _place(lo, hi, tasks, durations, instance, deps, resources, counts, out, free, host_overhead) -> None:
    """Schedule tasks lo..hi-1 after those in `out`, each on its resource after `free`."""
    for i in range(lo, hi):
        res = resources[i]
        if res is Resource.HOST:
            out.append(_host_batched(i, tasks, instance, deps, resources, out, free, host_overhead))
            continue
        ready = 0
        tail = 0
        count = counts[i]
        for d in deps[i]:
            pd = out[d]
            if count > 1 and resources[d] is not res and counts[d] == count:  # streaming behind it
                if pd.start + instance[d] > ready:
                    ready = pd.start + instance[d]
                if pd.end + instance[i] > tail:
                    tail = pd.end + instance[i]
            elif pd.end > ready:
                ready = pd.end
        start = free.get(res, 0)
        if ready > start:
            start = ready
        end = start + durations[i]
        if tail > end:
            end = tail
        free[res] = end
        out.append(Scheduled(i, start, end, durations[i]))


def _host_batched(i, tasks, instance, deps, resources, out, free, overhead) -> Scheduled:
    """The host's instances of task i: each is ready when its share of every input is done (a producer
    on another resource with instances completes them evenly over its span), and every hand-off takes
    all the ready ones."""
    count = tasks[i].count
    work = max(instance[i] - overhead, 0)  # per instance, without the hand-off
    ready = [0] * count
    for d in deps[i]:
        pd, cp = out[d], tasks[d].count
        if resources[d] is not Resource.HOST and cp > 1 and count > 1:
            span = (pd.end - pd.start) / cp
            for j in range(count):
                done = math.ceil((j + 1) * cp / count)  # producer instances instance j needs
                ready[j] = max(ready[j], pd.start + math.ceil(done * span))
        else:
            ready = [max(r, pd.end) for r in ready]
    t = start = max(ready[0], free.get("host", 0))
    j = busy = 0
    while j < count:
        t = max(t, ready[j])
        k = j
        while k < count and ready[k] <= t:
            k += 1
        step = overhead + (k - j) * work
        t += step
        busy += step
        j = k
    free["host"] = t
    return Scheduled(i, start, t, busy)
