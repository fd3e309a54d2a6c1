"""Decode steps at the cost of what changes (issue 30, item 1).

A generation's decode steps, and a serving run's iterations of one batch composition, have the same
workload graph at every cache length but for the attention against the caches: QK^T, the softmax and PV
grow with the keys; the projections, FFN, norms, cache appends and LM head do not. StepTemplate lowers,
times and schedules such a step once (the passes map_model runs: passes.lower_ops, time_tasks, scheduled,
map_result), then for each new shape:

1. builds the step of a one-block model (the same ops as every block of the real one, 1/L of the graph),
2. finds the ops whose value changed from the template's (in practice QK^T, the softmax and PV),
3. lowers and times those once (passes.lower_op and time_tasks with the memo: the tiling search and
   simulation as in any map) and puts their tasks in the place of that op in every block,
4. schedules the whole task list again (schedule.schedule: the NVDLA core, BDMA and host in parallel).

Every step is therefore exact (every task's cycles and place in the schedule, and every figure, as mapping
the whole step's graph: tests/unit/test_step_template.py compares every step of short runs and sampled
steps of long ones), and costs what changed: a one-block graph, a few lowerings and one list schedule.
The re-lowered tasks keep the first block's names in every block (they time alike): the result is for
figures (cycles, bytes, energy), not for per-task reports. The template assumes what its builders
guarantee: a shape changes no op's fusion and no graph edge (checked by value against the one-block
step at each rebuild). Where a changed op's
lowering takes another form (`passes.cheapest` picks another option as the keys grow, or a split into
bands changes the number of hardware layers), the task list's shape changes: the template is rebuilt
from a full map at that shape and serves the steps after it. Those rebuilds are where the step's cost
breaks into pieces; `rebuilds` counts them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import networkx as nx

from nvdla_mapper.frontends.presets import ModelSpec
from nvdla_mapper.lowering.fusion import fuse_graph
from nvdla_mapper.lowering.rules import Task
from nvdla_mapper.passes import (
    PassMemo,
    context_of,
    lower_op,
    lower_ops,
    map_result,
    schedule_tasks,
    scheduled,
    time_tasks,
    unnamed,
)
from nvdla_mapper.results import MapResult, PassFigures, TaskResult, demand_profile, pass_figures, task_demand
from nvdla_mapper.schedule import Blocks, alike_blocks, blocks_alike
from nvdla_mapper.workload import Op, ops_in_order
from nvdla_sim.engine.stats import LayerStats
from nvdla_sim.system.shared_memory import Profile

# a builder makes the step's graph of a model for one shape (cache lengths, a serving batch's sequences)
Builder = Callable[[ModelSpec, Any], nx.DiGraph]


def one_block(spec: ModelSpec) -> ModelSpec:
    """The model with one block (T5: one decoder block): every block of a step is this one's, renamed."""
    if spec.decoder_layers:
        return dataclasses.replace(spec, decoder_layers=1)
    return dataclasses.replace(spec, stages=(dataclasses.replace(spec.stages[0], layers=1), *spec.stages[1:]))


def _alike_key(op: Op) -> tuple:
    """What an op of any block of a family is in every block (its family and role): a step's op in block N
    is the one-block step's op of the same key (block 0's)."""
    return op.block.family, op.role


def _value(op: Op) -> tuple:
    """An op's shape and attributes without its name: equal values lower to the same tasks but for names."""
    return (op.kind, op.m, op.n, op.k, op.count, op.group, op.model_macs, op.attrs)


@dataclasses.dataclass
class _Base:
    """The step at the template's shape: its one-block ops, the whole step's timed tasks, and for each
    one-block op the places of its tasks in the whole step (one per block it stands for)."""

    ops1: list[Op]
    values1: list[tuple]
    tasks: list[Task]
    deps: list[list[int]]
    per_instance: list[int]
    stats: list[LayerStats | None]
    durations: list[int]
    spans1: list[list[tuple[int, int]]]
    model_macs: int
    dense_weight_bytes: int
    blocks: Blocks | None  # the step's blocks as alike tasks (schedule.alike_blocks), or None


class StepTemplate:
    """A step of one batch composition, lowered and scheduled once and re-timed per shape (module doc).
    `build(spec, shape)` makes the step's graph; every shape it is given must build the same graph but
    for the ops' values (a generation's cache length; a serving batch's lengths of one composition)."""

    def __init__(self, spec: ModelSpec, build: Builder, memo: PassMemo) -> None:
        self.spec, self.build, self.memo = spec, build, memo
        self.spec1 = one_block(spec)
        self.ctx = context_of(memo)
        self.base: _Base | None = None
        self.rebuilds = 0  # full maps made after the first (a changed op took another form)

    def map(self, shape: Any) -> MapResult:
        """The step at `shape`, as map_model would map its whole graph."""
        step = self._retimed(shape)
        if isinstance(step, MapResult):
            return step
        g1, tasks, per_instance, stats, durations, macs = step
        base, ctx = self.base, self.ctx
        assert base is not None
        results = scheduled(tasks, base.deps, per_instance, stats, durations, ctx.hw, ctx.host, blocks=base.blocks)
        return self._result(g1, results, macs, base.dense_weight_bytes)

    def figures(self, shape: Any) -> PassFigures:
        """self.map(shape).figures() without the MapResult: the blocks' alike tasks are scheduled until
        they repeat (schedule.schedule) and their figures are taken once per task of one block."""
        return self._figures(shape, profile=False)[0]

    def figures_and_profile(self, shape: Any) -> tuple[PassFigures, Profile]:
        """figures(shape) and the step's DRAM demand over its time (results.demand_profile of
        self.map(shape), from every task's place in the schedule)."""
        figures, profile = self._figures(shape, profile=True)
        assert profile is not None
        return figures, profile

    def _figures(self, shape: Any, *, profile: bool) -> tuple[PassFigures, Profile | None]:
        step = self._retimed(shape)
        if isinstance(step, MapResult):
            return step.figures(), demand_profile(step) if profile else None
        g1, tasks, per_instance, stats, durations, macs = step
        base, ctx = self.base, self.ctx
        assert base is not None
        sched = schedule_tasks(tasks, base.deps, per_instance, durations, ctx.hw, ctx.host, blocks=base.blocks)
        n = len(tasks)
        if base.blocks is None or not blocks_alike(durations, per_instance, base.blocks):
            keep, order = list(range(n)), list(range(n))
        else:  # a block's tasks have block 0's figures (the re-timed tasks are the same objects) but for the
            # host's busy time, which its hand-offs make (blocks scheduled before they repeat may differ)
            first, size, count = base.blocks
            busy = [s.busy for s in sched]
            keep, order = list(range(first + size)), list(range(first + size))
            for lo in range(first + size, first + size * count, size):
                if busy[lo : lo + size] == busy[first : first + size]:
                    order += range(first, first + size)
                else:
                    order += range(len(keep), len(keep) + size)
                    keep += range(lo, lo + size)
            order += range(len(keep), len(keep) + n - first - size * count)
            keep += range(first + size * count, n)
        distinct = [
            TaskResult.of(tasks[i], per_instance[i], sched[i].start, sched[i].end, stats[i], sched[i].busy)
            for i in keep
        ]
        total = max([s.end for s in sched], default=0)
        figures = pass_figures(distinct, order, total, macs, ctx.hw, ctx.precision, self.memo.energy, ctx.host)
        if not profile:
            return figures, None
        ns = 1e3 / ctx.hw.clock_mhz
        demands = [d for t, st, s in zip(tasks, stats, sched, strict=True)
                   if (d := task_demand(t, st, s.start, s.end, 0, ns)) is not None]  # fmt: skip
        return figures, Profile.of(demands, total * ns)

    def _retimed(self, shape: Any):
        """The step at `shape` as (one-block graph, tasks, cycles per instance, stats, durations, model MACs)
        re-timed from the template, or the MapResult of a full map where the template is (re)built."""
        g1 = self.build(self.spec1, shape)
        ops1 = ops_in_order(g1)
        base = self.base
        if base is None or [o.kind for o in ops1] != [o.kind for o in base.ops1]:
            return self._rebuild(shape, g1, ops1)
        values = [_value(o) for o in ops1]
        changed = [j for j, v in enumerate(values) if v != base.values1[j]]
        ctx, hw, host = self.ctx, self.ctx.hw, self.ctx.host
        ctx.fused, _ = fuse_graph(g1, ctx)
        tasks, per_instance = list(base.tasks), list(base.per_instance)
        stats, durations = list(base.stats), list(base.durations)
        for j in changed:
            spans = base.spans1[j]
            a, b = spans[0]
            if a == b:  # fused into its producer's SDP: its work is the producer's
                continue
            new = lower_op(ops1[j], ctx, self.memo)
            if [t.resource for t in new] != [t.resource for t in base.tasks[a:b]]:
                return self._rebuild(shape, g1, ops1)  # another form: a new piece of the step's cost
            t = time_tasks(new, hw, host, self.memo)
            for a, b in spans:
                tasks[a:b], per_instance[a:b], stats[a:b], durations[a:b] = new, t.per_instance, t.stats, t.durations
        macs = base.model_macs + sum((ops1[j].own_macs - base.ops1[j].own_macs) * len(base.spans1[j]) for j in changed)
        return g1, tasks, per_instance, stats, durations, macs

    def _result(self, g: nx.DiGraph, results, model_macs: int, dense_weight_bytes: int) -> MapResult:
        return map_result(g, self.ctx, results, self.memo, model_macs=model_macs, dense_weight_bytes=dense_weight_bytes)

    def _rebuild(self, shape: Any, g1: nx.DiGraph, ops1: list[Op]) -> MapResult:
        """Lower and time the whole step at `shape` and keep it as the template."""
        if self.base is not None:
            self.rebuilds += 1
        g = self.build(self.spec, shape)
        ctx, hw, host = self.ctx, self.ctx.hw, self.ctx.host
        tasks, deps, spans = lower_ops(g, ctx, self.memo)
        timed = time_tasks(tasks, hw, host, self.memo)
        per_instance, stats, durations = timed.per_instance, timed.stats, timed.durations
        ops = ops_in_order(g)
        index1 = {_alike_key(o): j for j, o in enumerate(ops1)}
        if len(index1) != len(ops1):
            raise ValueError(
                f"step template: the one-block step of {self.spec.name} has two ops alike by block and role"
            )
        spans1: list[list[tuple[int, int]]] = [[] for _ in ops1]
        for op, span in zip(ops, spans, strict=True):
            j = index1.get(_alike_key(op))
            if j is None or _value(op) != _value(ops1[j]):  # the builder's blocks are not all alike
                raise ValueError(f"step template: {op.name} has no like op in the one-block step of {self.spec.name}")
            spans1[j].append(span)
        self.base = _Base(
            ops1, [_value(o) for o in ops1], tasks, deps, per_instance, stats, durations, spans1,
            sum(op.own_macs for op in ops), sum(op.weight_elems for op in ops) * ctx.precision.bytes,
            _blocks(tasks, deps, stats, durations, per_instance),
        )  # fmt: skip
        results = scheduled(tasks, deps, per_instance, stats, durations, hw, host)
        return self._result(g, results, self.base.model_macs, self.base.dense_weight_bytes)


def _blocks(
    tasks: list[Task],
    deps: list[list[int]],
    stats: list[LayerStats | None],
    durations: list[int],
    per_instance: list[int],
) -> Blocks | None:
    """The step's blocks (its tasks in the numbered blocks of one family, in order) where they are alike for the schedule
    (schedule.alike_blocks, blocks_alike) and for the figures (every block's task j is block 0's but for
    the names: its layer and stats, hence its bytes, bound and energy); None otherwise (then every task is
    scheduled and counted). The template keeps them alike: a re-timed op's tasks go into every block."""
    index = [t.model_block.index for t in tasks]
    inside = [i for i, b in enumerate(index) if b is not None]
    if not inside or len({tasks[i].model_block.family for i in inside}) > 1:
        return None
    first, last = inside[0], inside[-1] + 1
    count = index[last - 1] + 1
    size, rest = divmod(last - first, count)
    if rest or count < 3 or index[first:last] != [b for b in range(count) for _ in range(size)]:
        return None
    blocks = Blocks(first, size, count)
    if not alike_blocks(tasks, deps, [t.resource for t in tasks], blocks):
        return None
    if not blocks_alike(durations, per_instance, blocks):
        return None
    for i in range(first + size, last):
        j = first + (i - first) % size
        if unnamed(tasks[i].layer) != unnamed(tasks[j].layer):
            return None
        if unnamed(stats[i]) != unnamed(stats[j]):
            return None
    return blocks
