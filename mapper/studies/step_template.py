"""Decode steps at the cost of what changes (issue 30, item 1).

A generation's decode steps, and a serving run's iterations of one batch composition, have the same
workload graph at every cache length but for the attention against the caches: QK^T, the softmax and PV
grow with the keys; the projections, FFN, norms, cache appends and LM head do not. StepTemplate lowers,
times and schedules such a step once (passes.lower_ops, simulate_tasks), then for each new shape:

1. builds the step of a one-block model (the same ops as every block of the real one, 1/L of the graph),
2. finds the ops whose value changed from the template's (in practice QK^T, the softmax and PV),
3. lowers and times those once (passes.lower_op with the memo: the tiling search and simulation as in
   any map) and puts their tasks in the place of that op in every block,
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
import re
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
    scheduled,
    simulate_tasks,
    task_durations,
)
from nvdla_mapper.results import MapResult
from nvdla_mapper.workload import Op, ops_in_order
from nvdla_sim.engine.stats import LayerStats

# a builder makes the step's graph of a model for one shape (cache lengths, a serving batch's sequences)
Builder = Callable[[ModelSpec, Any], nx.DiGraph]

_BLOCK = re.compile(r"^(layer|dec)(\d+)\.")


def one_block(spec: ModelSpec) -> ModelSpec:
    """The model with one block (T5: one decoder block): every block of a step is this one's, renamed."""
    if spec.decoder_layers:
        return dataclasses.replace(spec, decoder_layers=1)
    return dataclasses.replace(spec, stages=(dataclasses.replace(spec.stages[0], layers=1), *spec.stages[1:]))


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
            cyc, st = simulate_tasks(new, hw, host, self.memo)
            dur = task_durations(new, cyc, st, hw)
            for a, b in spans:
                tasks[a:b], per_instance[a:b], stats[a:b], durations[a:b] = new, cyc, st, dur
        macs = base.model_macs + sum((ops1[j].own_macs - base.ops1[j].own_macs) * len(base.spans1[j]) for j in changed)
        results = scheduled(tasks, base.deps, per_instance, stats, durations, hw, host)
        return self._result(g1, results, macs, base.dense_weight_bytes)

    def _result(self, g: nx.DiGraph, results, model_macs: int, dense_weight_bytes: int) -> MapResult:
        ctx = self.ctx
        return MapResult(
            str(g.graph.get("name", "model")), ctx.hw, ctx.precision, int(g.graph["batch"]), int(g.graph["seq"] or 0),
            results, weights=ctx.weights, model_macs=model_macs, dense_weight_bytes=dense_weight_bytes,
            energy_memo=self.memo.energy,
        )  # fmt: skip

    def _rebuild(self, shape: Any, g1: nx.DiGraph, ops1: list[Op]) -> MapResult:
        """Lower and time the whole step at `shape` and keep it as the template."""
        if self.base is not None:
            self.rebuilds += 1
        g = self.build(self.spec, shape)
        ctx, hw, host = self.ctx, self.ctx.hw, self.ctx.host
        tasks, deps, spans = lower_ops(g, ctx, self.memo)
        per_instance, stats = simulate_tasks(tasks, hw, host, self.memo)
        durations = task_durations(tasks, per_instance, stats, hw)
        ops = ops_in_order(g)
        index1 = {o.name: j for j, o in enumerate(ops1)}
        spans1: list[list[tuple[int, int]]] = [[] for _ in ops1]
        for op, span in zip(ops, spans, strict=True):
            j = index1.get(_BLOCK.sub(r"\g<1>0.", op.name))
            if j is None or _value(op) != _value(ops1[j]):  # the builder's blocks are not all alike
                raise ValueError(f"step template: {op.name} has no like op in the one-block step of {self.spec.name}")
            spans1[j].append(span)
        self.base = _Base(
            ops1, [_value(o) for o in ops1], tasks, deps, per_instance, stats, durations, spans1,
            sum(op.own_macs for op in ops), sum(op.weight_elems for op in ops) * ctx.precision.bytes,
        )  # fmt: skip
        results = scheduled(tasks, deps, per_instance, stats, durations, hw, host)
        return self._result(g, results, self.base.model_macs, self.base.dense_weight_bytes)
