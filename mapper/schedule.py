"""Schedule lowered tasks: dependency order from the graph, one task at a time per resource.

Resources: the NVDLA core (one hardware layer at a time: the convolution pipeline and standalone SDP
share SDP), BDMA and the host CPU run concurrently. A consumer with the same instance count as a producer
on another resource (per-head softmax after per-head QK^T) starts after the producer's first instance
and streams behind it; otherwise it starts when its inputs are done. Memory contention between
concurrent resources is not modelled (noted in the report).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scheduled:
    index: int
    start: int
    end: int


def schedule(
    tasks: list, durations: list[int], instance: list[int], deps: list[list[int]], resources: list[str]
) -> list[Scheduled]:
    """List-schedule tasks in index order (already topological)."""
    free: dict[str, int] = {}
    out: list[Scheduled] = []
    for i in range(len(tasks)):
        ready = 0
        tail = 0
        for d in deps[i]:
            pd = out[d]
            streaming = resources[d] != resources[i] and tasks[d].count == tasks[i].count and tasks[i].count > 1
            if streaming:
                ready = max(ready, pd.start + instance[d])
                tail = max(tail, pd.end + instance[i])
            else:
                ready = max(ready, pd.end)
        start = max(ready, free.get(resources[i], 0))
        end = max(start + durations[i], tail)
        free[resources[i]] = end
        out.append(Scheduled(i, start, end))
    return out
