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


class Scheduled(NamedTuple):
    index: int
    start: int
    end: int
    busy: int  # the resource's busy time for this task (the host: its hand-offs' overheads and work)


_new = tuple.__new__  # a NamedTuple from its fields' tuple, without its __new__'s Python frame


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
    until one is the one before it shifted by D cycles (every start, end and busy time, and the free
    time of every resource the blocks use): each later block is then that one shifted by whole D (the
    schedule of a block commutes with a shift of its inputs, which are the block before's outputs), and
    the tasks after the blocks are scheduled from there. The same schedule as without `blocks`
    (tests/unit/test_schedule.py)."""
    free: dict = {}
    out: list[Scheduled] = []
    counts = [t.count for t in tasks]
    n = len(resources)
    if blocks is None or not blocks_alike(durations, instance, blocks):
        _place(0, n, tasks, durations, instance, deps, resources, counts, out, free, host_overhead)
        return out
    first, size, count = blocks
    _place(0, first, tasks, durations, instance, deps, resources, counts, out, free, host_overhead)
    keys = {"host" if r is Resource.HOST else r for r in resources[first : first + size]}
    before: dict = {}
    for b in range(count):
        lo = first + b * size
        _place(lo, lo + size, tasks, durations, instance, deps, resources, counts, out, free, host_overhead)
        now = {k: free[k] for k in keys}
        shift = _shifted(out, lo, size, before, now) if b >= 2 else None
        if shift is not None:
            block = out[lo : lo + size]
            for k in range(1, count - b):
                by, step = k * shift, k * size
                out.extend([_new(Scheduled, (i + step, start + by, end + by, busy)) for i, start, end, busy in block])
            for key in keys:
                free[key] += (count - 1 - b) * shift
            break
        before = now
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


def _shifted(out: list[Scheduled], lo: int, size: int, free_before: dict, free_now: dict) -> int | None:
    """The shift D >= 0 by which the block at `lo` repeats the block before (its schedule and the free time
    of the blocks' resources after it), or None."""
    shift = out[lo].start - out[lo - size].start
    if shift < 0:
        return None
    for a, b in zip(out[lo - size : lo], out[lo : lo + size], strict=True):
        if b.start - a.start != shift or b.end - a.end != shift or b.busy != a.busy:
            return None
    if any(free_now[k] - free_before[k] != shift for k in free_now):
        return None
    return shift


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
