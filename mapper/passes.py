"""The mapper's pass list, in one place:

    workload graph -> fusion + lowering to tasks -> tiling search + simulation -> schedule -> result
                      (lower_graph / lower_ops)      (time_tasks)                  (scheduled) (map_result)

Each pass takes explicit arguments and returns typed data; `map_model` runs them in order, and the decode
step template (studies/step_template.py) runs the same passes, re-running lower_op and time_tasks only for
the ops whose shape changes.
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache

import networkx as nx

from nvdla_mapper.lowering.fusion import fuse_graph
from nvdla_mapper.lowering.rules import (
    Choice,
    LoweringContext,
    Resource,
    Task,
    bucket_keys,
    lower,
    resource_label,
)
from nvdla_mapper.options import KvPlan, MapOptions, Placement, WeightTreatment
from nvdla_mapper.results import MapResult, TaskResult
from nvdla_mapper.schedule import Blocks, Scheduled, schedule
from nvdla_mapper.search.tiling_search import planned_like, planned_like_instances, search_plan
from nvdla_mapper.workload import cache_keys, info, ops_in_order, with_cache_keys
from nvdla_sim.config import HwConfig
from nvdla_sim.energy.model import Energy
from nvdla_sim.engine.conv import instances_cycles, simulate_conv
from nvdla_sim.engine.stats import Event, LayerStats
from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import ConvLayer
from nvdla_sim.precision import Precision
from nvdla_sim.processors import fixed_latency, simulate
from nvdla_sim.system.host import HostModel

# ---- passes -------------------------------------------------------------------------------------------


@dataclasses.dataclass
class PassMemo:
    """What the lowering and simulation passes computed for ops and tasks, kept across maps of graphs that
    share most of their ops under one lowering context (the decode steps of a generation: every step
    has the same projections, FFN and head; only attention against the cache changes with its length).
    Each entry is the pure function of its key the pass computes (lower + cheapest of an op with what
    fusion gave it; a task's cycles and stats), so a map with a memo equals one without
    (tests/unit/test_generate.py compares every step against a fresh map). Valid for one context only:
    map_model refuses a memo made for another."""

    context: tuple  # (hw, MapOptions, host) it was filled under
    lowered: dict[tuple, list[Task]] = dataclasses.field(default_factory=dict)
    timed: dict[Task, tuple[int, LayerStats | None]] = dataclasses.field(default_factory=dict)
    energy: dict[Task, Energy] = dataclasses.field(default_factory=dict)  # results.MapResult's per-task pricing
    # attention planned at its cache length's bucket (_planned_at): the bucket's op lowered, the index of
    # its cheapest option and every option's timing (None: no legal plan there), by the bucket's op
    bucket_options: dict[tuple, tuple | None] = dataclasses.field(default_factory=dict)


def _context_key(ctx: LoweringContext) -> tuple:
    return (ctx.hw, ctx.options, ctx.host)


def context_of(memo: PassMemo) -> LoweringContext:
    """A fresh lowering context of the options a memo was filled under."""
    hw, options, host = memo.context
    return LoweringContext(hw, options, host)


def lower_graph(
    g: nx.DiGraph, ctx: LoweringContext, memo: PassMemo | None = None
) -> tuple[list[Task], list[list[int]]]:
    """Lowering pass: tasks in dependency order and, per task, the indices of the tasks it waits for.
    With a memo, an op lowered before (same op, attributes and fusion) takes its earlier tasks."""
    tasks, deps, _ = lower_ops(g, ctx, memo)
    return tasks, deps


def lower_ops(
    g: nx.DiGraph, ctx: LoweringContext, memo: PassMemo | None = None
) -> tuple[list[Task], list[list[int]], list[tuple[int, int]]]:
    """lower_graph, with where each op's tasks sit: per op of ops_in_order(g), its (start, stop) in the
    task list (empty for an op fused into its producer's SDP)."""
    ctx.fused, absorbed = fuse_graph(g, ctx)
    last_task: dict[str, list[int]] = {}
    tasks: list[Task] = []
    deps: list[list[int]] = []
    spans: list[tuple[int, int]] = []
    first_of: list[int] = []  # each task's op's first task (whose deps are the op's inputs)
    for op in ops_in_order(g):
        preds = [p for p in g.predecessors(op.name)]
        pred_tasks = sorted({t for p in preds for t in last_task.get(p, [])})
        if op.name in absorbed:
            last_task[op.name] = _implied_left_out(pred_tasks, tasks, deps, first_of)  # inside the producer's SDP
            spans.append((len(tasks), len(tasks)))
            continue
        lowered = lower_op(op, ctx, memo)
        extra = ctx.fused.get(op.name)
        if extra is not None and extra.residual_input:  # the residual operand is read by this layer's SDP
            pred_tasks = sorted({*pred_tasks, *last_task.get(extra.residual_input, [])})
        prev = _implied_left_out(pred_tasks, tasks, deps, first_of)
        spans.append((len(tasks), len(tasks) + len(lowered)))
        first = len(tasks)
        for t in lowered:
            tasks.append(t)
            deps.append(list(prev))
            first_of.append(first)
            prev = [len(tasks) - 1]
        last_task[op.name] = prev
    return tasks, deps, spans


def _implied_left_out(pred: list[int], tasks: list[Task], deps: list[list[int]], first_of: list[int]) -> list[int]:
    """`pred` without the tasks another one in it already waits for (through its op's first task), among
    tasks of one instance: a consumer of both starts after the later one anyway (an instance ends after
    what it waits for ends; schedule.schedule), so the schedule is the same with fewer edges to walk. A
    residual stream's producers otherwise pile up: every block's norm waited for every earlier block's
    adds (2,693 edges for TinyLlama's 648-task decode step, 45 for the last norm)."""
    if len(pred) < 2:
        return pred
    single = [t for t in pred if tasks[t].count == 1]
    implied = {x for y in single for x in deps[first_of[y]] if tasks[x].count == 1}
    return [t for t in pred if t not in implied]


def lower_op(op, ctx: LoweringContext, memo: PassMemo | None = None) -> list[Task]:
    """One op's tasks under the context's fusion (ctx.fused): its lowering, or the cheapest of its
    options; with a memo, the tasks of the same op, attributes and fusion lowered before."""
    extra = ctx.fused.get(op.name)
    key = (op, op.attrs, extra)  # Op's equality leaves its attributes out
    lowered = memo.lowered.get(key) if memo is not None else None
    if lowered is None:
        octx = ctx.for_op(op)  # attention at the caches' precision under the KV what-if
        keys = cache_keys(op)
        at = bucket_keys(keys) if keys is not None and ctx.kv_plan is KvPlan.BUCKET else keys
        lowered = _chosen(lower(op, octx), octx) if at == keys else _planned_at(op, at, octx, memo, extra)
        if memo is not None:
            memo.lowered[key] = lowered
    return lowered


def _chosen(lowered: list[Task] | Choice, ctx: LoweringContext) -> list[Task]:
    """The tasks of a lowering: a choice's cheapest option."""
    return cheapest(lowered, ctx) if isinstance(lowered, Choice) else lowered


def _planned_at(op, at: int, ctx: LoweringContext, memo: PassMemo | None = None, extra=None) -> list[Task]:
    """Attention against a KV cache planned at its length bucket (options.KvPlan.BUCKET): the option
    the op against `at` keys finds cheapest, its layers running the plans searched for the layers at `at`
    keys (Task.plan_at). Planned at its own length where `at` keys have no CBUF-legal tiling. With a memo,
    the bucket's op is lowered and its options timed once for every length in the bucket (`extra`: what
    fusion gave the op, as lower_op's key)."""
    own = lower(op, ctx)
    wide_op = with_cache_keys(op, at)
    key = (wide_op, wide_op.attrs, extra)
    found = memo.bucket_options.get(key, False) if memo is not None else False
    if found is False:
        try:
            wide = _as_choice(lower(wide_op, ctx))
            found = (wide, *_cheapest_option(wide, ctx))
        except NvdlaError:
            found = None
        if memo is not None:
            memo.bucket_options[key] = found
    if found is None:
        return _chosen(own, ctx)
    wide, best, timed = found
    options = _as_choice(own).options
    if [lab for lab, _ in options] != [lab for lab, _ in wide.options]:
        return _chosen(own, ctx)
    tasks, wide_tasks = list(options[best][1]), list(wide.options[best][1])
    if len(tasks) != len(wide_tasks) or not all(_same_but_keys(t, w) for t, w in zip(tasks, wide_tasks, strict=True)):
        return _chosen(own, ctx)  # not the same layers with more keys (another form or layout): at its own length
    tasks = [
        dataclasses.replace(t, plan_at=w.layer) if isinstance(t.layer, ConvLayer) else t
        for t, w in zip(tasks, wide_tasks, strict=True)
    ]
    why = f"planned at {at} keys (the cache length's bucket)"
    if len(timed) > 1:
        why += f"; {_why(timed, best)} there"
    tasks[0] = dataclasses.replace(tasks[0], note=f"{tasks[0].note}; {why}" if tasks[0].note else why)
    return tasks


def _as_choice(lowered: list[Task] | Choice) -> Choice:
    """A lowering as a choice (one option, unlabelled, when it has no others)."""
    return lowered if isinstance(lowered, Choice) else Choice((("", tuple(lowered)),))


def _same_but_keys(own: Task, wide: Task) -> bool:
    """Whether a task of an op against a KV cache and its twin against the bucket's keys are the same
    step with more keys: the same resource, and for hardware layers the same layer but for its kernels
    and input channels (QK^T's keys are kernels, PV's input channels), so that the plan found for the
    twin is a plan for the same layer registers with another key count."""
    if own.resource is not wide.resource or type(own.layer) is not type(wide.layer):
        return False
    if not isinstance(own.layer, ConvLayer):
        return True
    s = own.layer.shape
    shape = dataclasses.replace(wide.layer.shape, in_c=s.in_c, out_k=s.out_k)
    return dataclasses.replace(wide.layer, name=own.layer.name, shape=shape) == own.layer


def cheapest(choice: Choice, ctx: LoweringContext) -> list[Task]:
    """The option of a choice whose tasks take the fewest cycles back to back in this simulation (the
    layers are simulated once: the per-layer cache serves the final pass); its first task says what
    was chosen over what."""
    best, timed = _cheapest_option(choice, ctx)
    tasks = list(choice.options[best][1])
    if len(timed) > 1:
        first = tasks[0]
        why = _why(timed, best)
        tasks[0] = dataclasses.replace(first, note=f"{first.note}; {why}" if first.note else why)
    return tasks


def _cheapest_option(choice: Choice, ctx: LoweringContext) -> tuple[int, list[tuple[int, str]]]:
    """The index of a choice's fastest option, and every option's (cycles, label); nothing timed for a
    choice of one."""
    if len(choice.options) == 1:
        return 0, []
    timed = [(tasks_cycles(tasks, ctx), label) for label, tasks in choice.options]
    return min(range(len(timed)), key=lambda i: timed[i][0]), timed


def _why(timed: list[tuple[int, str]], best: int) -> str:
    others = "; ".join(f"{lab}: {c:,}" for i, (c, lab) in enumerate(timed) if i != best)
    return f"chosen: {timed[best][1]} ({timed[best][0]:,} cycles) over {others}"


def tasks_cycles(tasks: tuple[Task, ...] | list[Task], ctx: LoweringContext) -> int:
    """Cycles of tasks run back to back, every instance counted (with the overlap between instances; the
    host takes all instances of a task in one hand-off)."""
    cycles, stats = simulate_tasks(list(tasks), ctx.hw, ctx.host)
    handoff = ctx.host.overhead_cycles(ctx.hw.clock_mhz)
    return sum(
        handoff + t.count * max(c - handoff, 0)
        if t.resource is Resource.HOST
        else instances_duration(c, t.count, st, ctx.hw, t.layer, t.plan_at)
        for c, t, st in zip(cycles, tasks, stats, strict=True)
    )


def simulate_tasks(
    tasks: list[Task], hw: HwConfig, host: HostModel, memo: PassMemo | None = None
) -> tuple[list[int], list[LayerStats | None]]:
    """Tiling + simulation pass: cycles per instance of every task (identical layers simulated once; with
    a memo, a task timed before takes its earlier figures)."""
    cycles: list[int] = []
    stats: list[LayerStats | None] = []
    for t in tasks:
        known = memo.timed.get(t) if memo is not None else None
        if known is not None:
            cycles.append(known[0])
            stats.append(known[1])
            continue
        if t.layer is not None:
            try:
                st, c = layer_cycles(t.layer, hw, t.plan_at, t.count)
            except NvdlaError as e:
                raise type(e)(f"{t.name}: {e}".replace(": : ", ": ")) from None
            cycles.append(c)
            stats.append(dataclasses.replace(st, name=t.name))
        else:
            cycles.append(host.cycles(t.host_work, hw.clock_mhz))
            stats.append(None)
        if memo is not None:
            memo.timed[t] = (cycles[-1], stats[-1])
    return cycles, stats


def layer_cycles(layer, hw: HwConfig, plan_at=None, count: int = 1) -> tuple[LayerStats, int]:
    """A hardware layer's stats (searched plan for convolutions, cached by value; with `plan_at`, the
    plan searched for that layer: Task.plan_at) and its cycles from op enable to interrupt, as on the
    RTL: launch, streaming, pipeline depth, completion. `count`: the task's instances (a planned layer's
    figures then come from the run that times its instances, instances_duration)."""
    st = _simulate_cached(unnamed(layer), hw, unnamed(plan_at), count if plan_at is not None else 1)
    return dataclasses.replace(st, name=layer.name, events=()), st.cycles + sum(fixed_latency(layer, hw))


def unnamed(layer):
    """The layer (or stats) without its name (identical layers of different blocks are simulated once)."""
    return None if layer is None else dataclasses.replace(layer, name="")


def layer_events(layer, hw: HwConfig, plan_at=None) -> tuple[Event, ...]:
    """The unit events of one instance of a hardware layer (its searched plan for convolutions, or the
    one searched for `plan_at`), from the start of its streaming (after launch); for timelines (the
    map's trace), simulated once per layer."""
    return _events_cached(unnamed(layer), hw, unnamed(plan_at))


@lru_cache(maxsize=1024)
def _events_cached(layer, hw: HwConfig, plan_at=None) -> tuple[Event, ...]:
    """Events of an unnamed layer."""
    if isinstance(layer, ConvLayer):
        return simulate_conv(layer, hw, _simulate_cached(layer, hw, plan_at).plan).events
    return simulate(layer, hw).events


@lru_cache(maxsize=4096)
def _simulate_cached(layer, hw: HwConfig, plan_at=None, count: int = 1) -> LayerStats:
    """Stats of an unnamed layer: conv layers through the tiling search (of `plan_at` when given:
    tiling_search.planned_like, with its `count` instances timed in the same run), others directly."""
    if isinstance(layer, ConvLayer):
        if plan_at is None:
            found = search_plan(layer, hw)
        elif count > 1:
            found = planned_like_instances(layer, plan_at, hw, count)[0]
        else:
            found = planned_like(layer, plan_at, hw)
        detail = dataclasses.replace(found.stats.detail, search_proven_gap=found.proven_gap)
        return dataclasses.replace(found.stats, detail=detail)
    return simulate(layer, hw, record_events=False)


# what runs side by side: the core, each processor beside it, the host
CONCURRENT = tuple("NVDLA core" if r is Resource.NVDLA else resource_label(r) for r in Resource)


def _graph_shape(g: nx.DiGraph, key: str, given: int | None, *, default: int) -> int:
    """The graph's batch or seq, checked against a caller's value."""
    built = getattr(info(g), key)
    if built is None:
        return default if given is None else given
    if given is not None and given != built:
        raise NvdlaError(
            f"map_model: {key}={given} contradicts the graph's {key} {built} (it was built for that); "
            f"omit {key} or rebuild the graph"
        )
    return int(built)


def map_model(
    g: nx.DiGraph,
    hw: HwConfig,
    options: MapOptions | None = None,
    *,
    precision: Precision | None = None,
    batch: int | None = None,
    seq: int | None = None,
    host: HostModel | None = None,
    softmax: Placement | str | None = None,
    layernorm: Placement | str | None = None,
    weights: WeightTreatment | None = None,
    with_baseline: bool = True,
    memo: PassMemo | None = None,
    kv_precision: Precision | None = None,
    kv_plan: KvPlan | str | None = None,
) -> MapResult:
    """Run the whole pass list on a workload graph under `options` (MapOptions; the keywords precision,
    softmax, layernorm, weights, kv_precision and kv_plan, where given, replace its fields). `batch` and
    `seq` are the graph's own (recorded by the front end that built it); given, they must agree with it,
    so a result never reports a shape other than the one that ran. With a weight treatment,
    `with_baseline` maps the dense model too (baseline_cycles). `memo` (new_memo) carries lowered ops and
    timed tasks over maps that share them under the same context: the decode steps of a generation.
    `kv_precision` (the KV-cache what-if) runs attention and its caches at that precision
    (rules.at_cache_precision) and the rest at `precision`. `kv_plan` (options.KvPlan) says where attention
    against a KV cache is planned."""
    options = MapOptions.of(
        options, precision=precision, softmax=softmax, layernorm=layernorm, weights=weights,
        kv_precision=kv_precision, kv_plan=kv_plan,
    )  # fmt: skip
    batch = _graph_shape(g, "batch", batch, default=1)
    seq = _graph_shape(g, "seq", seq, default=0)
    hw.check_precision(options.precision)
    if options.kv_precision is not None:
        hw.check_precision(options.kv_precision)
    ctx = LoweringContext(hw, options, host)
    if memo is not None and memo.context != _context_key(ctx):
        raise ValueError("map_model: the memo was filled under another hw, host or MapOptions")
    host = ctx.host  # the one given, else the model the config's [host] chooses
    tasks, deps = lower_graph(g, ctx, memo)  # fusion + lowering
    timed = time_tasks(tasks, hw, host, memo)  # tiling search + simulation
    results = scheduled(tasks, deps, timed.per_instance, timed.stats, timed.durations, hw, host)
    baseline = None
    if options.weights.active and with_baseline:  # the dense, uncompressed run: what the treatment saves
        dense = dataclasses.replace(options, weights=WeightTreatment())
        baseline = map_model(g, hw, dense, batch=batch, seq=seq, host=host).total_cycles
    return map_result(g, ctx, results, memo, baseline=baseline, batch=batch, seq=seq)


def map_result(
    g: nx.DiGraph,
    ctx: LoweringContext,
    results: list[TaskResult],
    memo: PassMemo | None,
    *,
    baseline: int | None = None,
    batch: int | None = None,
    seq: int | None = None,
    model_macs: int | None = None,
    dense_weight_bytes: int | None = None,
) -> MapResult:
    """The result pass: a map's scheduled tasks as its MapResult, with its notes (the one place a map's
    result is made: map_model, and the decode step template for the steps it re-times). `model_macs` and
    `dense_weight_bytes` default to the graph's ops' (the template gives the whole step's from its
    one-block graph); `batch` and `seq` to the graph's own."""
    meta, host, hw = info(g), ctx.host, ctx.hw
    notes = [
        f"Concurrent resources ({', '.join(CONCURRENT)}) are scheduled without memory contention between them.",
        f"Host model: {host.gflops:g} GFLOP/s, {host.mem_gbs:g} GB/s, {host.overhead_us:g} us per fallback op.",
        *hw.notes,
    ]
    if meta.fusions:
        notes.append(
            "ONNX patterns fused before import: " + ", ".join(f"{k} x{v}" for k, v in sorted(meta.fusions.items()))
        )
    if model_macs is None or dense_weight_bytes is None:
        ops = ops_in_order(g)
        model_macs = sum(op.own_macs for op in ops) if model_macs is None else model_macs
        if dense_weight_bytes is None:
            dense_weight_bytes = sum(op.weight_elems for op in ops) * ctx.precision.bytes
    return MapResult(
        meta.name, hw, ctx.precision, meta.batch if batch is None else batch, (meta.seq or 0) if seq is None else seq,
        results, notes, ctx.weights, baseline, model_macs=model_macs, dense_weight_bytes=dense_weight_bytes,
        energy_memo=memo.energy if memo is not None else None, host=host,
    )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class TimedTasks:
    """The timing pass's output for a task list: each task's cycles per instance, its stats (None: host
    work) and its time over all its instances (instances_duration)."""

    per_instance: list[int]
    stats: list[LayerStats | None]
    durations: list[int]


def time_tasks(tasks: list[Task], hw: HwConfig, host: HostModel, memo: PassMemo | None = None) -> TimedTasks:
    """The timing pass (tiling search + simulation, then each task over its instances): what map_model runs
    on a graph's tasks and the step template on the tasks of the ops that change."""
    per_instance, stats = simulate_tasks(tasks, hw, host, memo)
    return TimedTasks(per_instance, stats, task_durations(tasks, per_instance, stats, hw))


def task_durations(
    tasks: list[Task], per_instance: list[int], stats: list[LayerStats | None], hw: HwConfig
) -> list[int]:
    """Each task's time over all its instances (instances_duration)."""
    return [
        instances_duration(c, t.count, st, hw, t.layer, t.plan_at)
        for c, t, st in zip(per_instance, tasks, stats, strict=True)
    ]


def scheduled(
    tasks: list[Task],
    deps: list[list[int]],
    per_instance: list[int],
    stats: list[LayerStats | None],
    durations: list[int],
    hw: HwConfig,
    host: HostModel,
    *,
    blocks: Blocks | None = None,
) -> list[TaskResult]:
    """Schedule pass: each timed task placed on its resource after its inputs (schedule.schedule; with
    `blocks`, the model's alike blocks scheduled until they repeat)."""
    sched = schedule_tasks(tasks, deps, per_instance, durations, hw, host, blocks=blocks)
    return [
        TaskResult.of(t, c, s.start, s.end, st, s.busy)
        for t, c, s, st in zip(tasks, per_instance, sched, stats, strict=True)
    ]


def schedule_tasks(
    tasks: list[Task],
    deps: list[list[int]],
    per_instance: list[int],
    durations: list[int],
    hw: HwConfig,
    host: HostModel,
    *,
    blocks: Blocks | None = None,
) -> list[Scheduled]:
    """Each task's place on its resource (schedule.schedule with the host's hand-off at the build's clock)."""
    handoff = host.overhead_cycles(hw.clock_mhz)
    return schedule(
        tasks, durations, per_instance, deps, [t.resource for t in tasks], host_overhead=handoff, blocks=blocks
    )


def new_memo(
    hw: HwConfig,
    options: MapOptions | None = None,
    *,
    precision: Precision | None = None,
    host: HostModel | None = None,
    softmax: Placement | str | None = None,
    layernorm: Placement | str | None = None,
    weights: WeightTreatment | None = None,
    kv_precision: Precision | None = None,
    kv_plan: KvPlan | str | None = None,
) -> PassMemo:
    """An empty memo for maps under these options (MapOptions.of, as map_model takes them)."""
    options = MapOptions.of(
        options, precision=precision, softmax=softmax, layernorm=layernorm, weights=weights,
        kv_precision=kv_precision, kv_plan=kv_plan,
    )  # fmt: skip
    return PassMemo(_context_key(LoweringContext(hw, options, host)))


def instances_duration(
    cycles: int, count: int, stats: LayerStats | None, hw: HwConfig, layer=None, plan_at=None
) -> int:
    """Time for `count` independent instances of a hardware layer run back to back (heads, windows,
    groups), each enabled in the other ping-pong register group while the previous one runs.

    Convolutions run as one chain of hardware layers (engine.conv.instances_cycles, the mechanism
    measured on nv_small's RTL, validation/data/nvdla_rtl_overlap.json and nvdla_rtl_transformer.json):
    the next instance fetches into what the previous one releases and computes after it, plus the fixed
    latencies of one layer (launch, pipeline, completion). Other layers (no weights) hide the prologue of
    their reads behind the previous one's work (not measured)."""
    if count <= 1 or stats is None:
        return cycles * count
    if isinstance(layer, ConvLayer):
        if plan_at is not None:  # timed with the layer's own figures (layer_cycles)
            found, span = planned_like_instances(unnamed(layer), unnamed(plan_at), hw, count)
            if found.plan != stats.plan:
                raise ValueError(f"{layer.name}: instances timed under {found.plan}, its figures under {stats.plan}")
        else:
            span = _instances_cached(unnamed(layer), stats.plan, hw, count)
        return span + cycles - stats.cycles  # cycles - stats.cycles: one layer's fixed latencies
    prologue = stats.prologue_cycles
    hidden = min(prologue, cycles - prologue)
    return cycles + (count - 1) * (cycles - max(math.ceil(hidden), 0))


@lru_cache(maxsize=1024)
def _instances_cached(layer: ConvLayer, plan, hw: HwConfig, count: int) -> int:
    return instances_cycles(layer, plan, hw, count)
