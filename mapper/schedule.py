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


def schedule(
    tasks: list,
    durations: list[int],
    instance: list[int],
    deps: list[list[int]],
    resources: list[Resource],
    *,
    host_overhead: int = 0,
) -> list[Scheduled]:
    """List-schedule tasks in index order (already topological). `host_overhead`: cycles of one host
    hand-off, included in each host instance's cycles in `instance`."""
    free: dict = {}
    out: list[Scheduled] = []
    counts = [t.count for t in tasks]
    for i, res in enumerate(resources):
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
    return out


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
