"""Serving: many requests share one NVDLA build, with iteration-level continuous batching over a paged KV cache.

    simulate_serving(requests, costs, capacity_blocks=..., settings=ServeSettings()) -> ServeResult
    SimulatedCosts(spec, hw, precision)   # every iteration's cycles from the mapper's exact simulation
    poisson_requests(n, rate_per_s, prompt=..., output=..., seed=0, clock_mhz=...)
    sweep_rates(arrivals, rates, costs, ..., slo=Slo(ttft_ms=..., tpot_ms=...)) -> RateSweep

A rate sweep runs the same requests at each rate (Poisson arrivals from one seed: the same draws, their
gaps scaled by 1/rate) through the same costs, so a multiset of cache lengths met at one rate is mapped
once for all; with a latency target (Slo) it bisects between the highest rate that meets it and the
lowest that does not, for the highest rate that does.

Policies (POLICIES, one class each, run by one event loop): CHUNKED_PREFILL (Sarathi-Serve; `_ChunkedPrefill`) takes every iteration's decodes and prompt chunks in
one pass up to a token budget (presets.mixed_step_graph). FCFS_PREFILL_FIRST (vLLM's default): at every iteration, if requests are
waiting, the ones at the head of the queue whose prompt fits the free KV blocks (and the batch limit) are
admitted and prefilled, one after another, in that iteration; their first token comes out at its end.
Otherwise every running request decodes one token in one batched step (attention per sequence against
its own cache: presets.decode_step_graph with per-sequence cache lengths). The KV cache is paged in
blocks of `block_tokens` positions; a request holds ceil(cached positions / block_tokens) blocks. When a
decode step needs more blocks than are free, the running request admitted last is preempted by
RECOMPUTE (vLLM's default): its blocks are freed and it goes back to the head of the queue, keeping the
tokens it generated; when it is admitted again its prefill covers its prompt and those tokens. A request
that could never fit alone is refused before the run with a one-line error.

Iteration costs come from a `StepCosts` (tests use hand-set costs); SimulatedCosts maps the prefill and
decode graphs with the same passes as `nvdla map` / `nvdla generate`, each distinct prefill length and
each distinct multiset of cache lengths once; the iterations of one batch composition (how many sequences
share each cache length, and each prefill chunk's size) share a step template (studies.step_template:
lowered and scheduled once, only the attention re-timed for each set of lengths, exactly).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import random
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from nvdla_mapper.frontends.presets import (
    ModelSpec,
    build_graph,
    check_generative,
    decode_step_graph,
    mixed_step_graph,
)
from nvdla_mapper.options import KvPlan, MapOptions, WeightTreatment
from nvdla_mapper.passes import map_model, new_memo
from nvdla_mapper.results import demand_profile
from nvdla_mapper.studies.generate import kv_bytes_per_token, kv_room
from nvdla_mapper.studies.progress import Progress, quiet
from nvdla_mapper.studies.step_template import StepTemplate
from nvdla_sim.config import HwConfig
from nvdla_sim.errors import NvdlaError, check_int
from nvdla_sim.precision import Precision
from nvdla_sim.system.host import HostOp, HostWork, host_model
from nvdla_sim.system.shared_memory import Capacity, speeds


class Policy(enum.Enum):
    FCFS_PREFILL_FIRST = "fcfs-prefill-first"  # waiting prompts first, then a decode step for all running
    CHUNKED_PREFILL = "chunked-prefill"  # every iteration: all decodes, then prompt chunks up to a token budget


class Preemption(enum.Enum):
    RECOMPUTE = "recompute"  # free the KV blocks, prefill prompt + generated tokens again on return
    SWAP = "swap"  # copy the KV blocks out to host memory and back in on return (StepCosts.swap each way)


class IterationKind(enum.Enum):
    PREFILL = "prefill"
    DECODE = "decode"
    MIXED = "mixed"  # decodes and prompt chunks in one pass (chunked prefill)


class Latency(enum.Enum):
    """A request's latencies, by the key serve.json and the reports give them (ms)."""

    TTFT = "ttft_ms"  # arrival to the first output token
    TPOT = "tpot_ms"  # per output token after the first
    E2E = "e2e_ms"  # arrival to the last output token


@dataclass(frozen=True)
class Request:
    id: int
    arrival_cycle: int
    prompt: int  # tokens
    output: int  # tokens to generate (the first comes from the prefill)


@dataclass(frozen=True)
class ServeSettings:
    block_tokens: int = 16  # KV positions per block (vLLM's default)
    max_batch: int = 32  # requests running at once
    policy: Policy = Policy.FCFS_PREFILL_FIRST
    preemption: Preemption = Preemption.RECOMPUTE
    chunk_tokens: int = 256  # CHUNKED_PREFILL: tokens an iteration takes (decodes first, then prompt chunks)

    def __post_init__(self) -> None:
        for name in ("block_tokens", "max_batch", "chunk_tokens"):
            check_int(getattr(self, name), f"--{name.replace('_', '-')}")


@dataclass(frozen=True)
class Iteration:
    kind: IterationKind
    start: int  # cycles
    end: int
    requests: tuple[int, ...]  # ids prefilled, or decoded
    blocks_used: int  # KV blocks held after the iteration
    preempted: tuple[int, ...] = ()  # ids preempted before it
    swapped_in: tuple[int, ...] = ()  # ids whose KV blocks were copied back in before it
    swap_cycles: int = 0  # of its time: the KV copies out (preemption by swap) and in
    decodes: int = 0  # requests that decoded a token in it (all of a DECODE iteration's; some of a MIXED one's)


@dataclass(frozen=True)
class RequestResult:
    request: Request
    first_token_cycle: int
    finish_cycle: int
    preemptions: int


class StepCosts(Protocol):
    def prefill(self, tokens: int) -> int: ...

    def decode(self, kv_lens: tuple[int, ...]) -> int: ...

    def swap(self, positions: int) -> int: ...  # copy one sequence's KV cache of `positions` out or in

    def mixed(self, seqs: tuple[tuple[int, int], ...], emitting: int) -> int: ...  # (cached, new) per sequence


@dataclass
class _Running:
    request: Request
    cached: int = 0  # positions in the KV cache
    generated: int = 0
    first_token: int = -1
    preemptions: int = 0
    admitted: int = 0  # admission order (the last admitted is preempted first)
    swapped: int = 0  # positions of its KV cache in host memory (preempted by swap)
    target: int = 0  # CHUNKED_PREFILL: positions its (re)prefill puts in the cache before it decodes


def blocks_for(positions: int, block_tokens: int) -> int:
    return math.ceil(positions / block_tokens)


@dataclass
class _Pool:
    """The KV blocks both schedulers hand out, and the admission order (the last admitted is preempted first)."""

    capacity: int
    block_tokens: int
    free: int = -1
    order: int = 0

    def __post_init__(self) -> None:
        self.free = self.capacity

    def blocks(self, positions: int) -> int:
        return blocks_for(positions, self.block_tokens)

    def grow(self, x: _Running, new: int) -> int:
        """Blocks `x` needs beyond its own to cache `new` more positions."""
        return self.blocks(x.cached + new) - self.blocks(x.cached)

    def admit(self, x: _Running) -> None:
        self.order += 1
        x.admitted = self.order

    def swap_in(self, x: _Running) -> bool:
        """Copy a swapped request's cache back in when it and its next token fit (no swap in, swap out at once)."""
        if self.blocks(x.swapped + 1) > self.free:
            return False
        self.free -= self.blocks(x.swapped)
        x.cached, x.swapped = x.swapped, 0
        self.admit(x)
        return True

    def preempt(self, x: _Running, preemption: Preemption, costs: StepCosts) -> int:
        """Free `x`'s blocks; by SWAP (a request past its prefill) its cache goes to host memory: the copy's
        cycles. A request preempted while still prefilling (chunked) starts its prefill again."""
        self.free += self.blocks(x.cached)
        cycles = 0
        if preemption is Preemption.SWAP and x.cached >= x.target:
            cycles = costs.swap(x.cached)
            x.swapped = x.cached
        x.cached = x.target = 0
        x.preemptions += 1
        return cycles

    def check(self, running: list[_Running]) -> None:
        """The blocks the running requests hold and the free ones add up to the cache, at every iteration."""
        held = sum(self.blocks(x.cached) for x in running)
        if held + self.free != self.capacity or self.free < 0:
            raise AssertionError(f"KV blocks do not add up: {held} held + {self.free} free != {self.capacity}")


@dataclass
class _Queue:
    """What a scheduling policy works on: the requests not yet arrived, the waiting ones (first come, first
    served; a preempted request goes back to the head), the running ones, the KV blocks, the finished."""

    pending: deque[Request]
    pool: _Pool
    costs: StepCosts
    settings: ServeSettings
    finished: Callable[[int], None]  # hears how many requests have finished
    waiting: deque[_Running] = field(default_factory=deque)
    running: list[_Running] = field(default_factory=list)
    done: dict[int, RequestResult] = field(default_factory=dict)

    def arrive(self, t: int) -> None:
        while self.pending and self.pending[0].arrival_cycle <= t:
            self.waiting.append(_Running(self.pending.popleft()))

    def finish(self, x: _Running, at: int) -> None:
        """`x` (no longer running) made its last token at `at`: its blocks are free."""
        self.pool.free += self.pool.blocks(x.cached)
        self.done[x.request.id] = RequestResult(x.request, x.first_token, at, x.preemptions)
        self.finished(len(self.done))

    def preempt_last(self, among: list[_Running]) -> tuple[_Running, int]:
        """Preempt the last admitted of `among` (running): back to the head of the queue; the cycles of its
        cache's copy out when preempted by swap."""
        victim = max(among, key=lambda x: x.admitted)
        self.running.remove(victim)
        cycles = self.pool.preempt(victim, self.settings.preemption, self.costs)
        self.waiting.appendleft(victim)
        return victim, cycles


class _PrefillFirst:
    """FCFS_PREFILL_FIRST (vLLM's default; module docstring): the waiting requests that fit are admitted and
    prefilled one after another in one iteration; else every running request decodes a token."""

    def __call__(self, q: _Queue, t: int) -> Iteration | None:
        s, pool, costs = q.settings, q.pool, q.costs
        admitted: list[_Running] = []
        swapped_in: list[_Running] = []
        while q.waiting and len(q.running) + len(admitted) + len(swapped_in) < s.max_batch:
            head = q.waiting[0]
            if head.swapped:
                if not pool.swap_in(head):
                    break
                swapped_in.append(q.waiting.popleft())
                continue
            tokens = head.request.prompt + max(head.generated - 1, 0)  # what the prefill puts in the cache
            if pool.blocks(tokens) > pool.free:
                break
            q.waiting.popleft()
            pool.free -= pool.blocks(tokens)
            head.cached = tokens
            pool.admit(head)
            admitted.append(head)
        swap_in = sum(costs.swap(x.cached) for x in swapped_in)
        q.running.extend(swapped_in)
        back = tuple(x.request.id for x in swapped_in)
        if admitted:
            end = t + swap_in + sum(costs.prefill(x.cached) for x in admitted)
            for x in admitted:
                if x.generated == 0:
                    x.generated, x.first_token = 1, end
                if x.generated >= x.request.output:
                    q.finish(x, end)
                else:
                    q.running.append(x)
            ids = tuple(x.request.id for x in admitted)
            return Iteration(IterationKind.PREFILL, t, end, ids, pool.capacity - pool.free, swapped_in=back,
                             swap_cycles=swap_in)  # fmt: skip
        if not q.running:
            return None
        preempted = []
        swap_out = 0
        while sum(pool.grow(x, 1) for x in q.running) > pool.free:
            victim, cycles = q.preempt_last(q.running)
            swap_out += cycles
            preempted.append(victim.request.id)
        if not q.running:  # cannot happen (every request fits alone, checked before the run)
            raise AssertionError("every running request was preempted")
        end = t + swap_in + swap_out + costs.decode(tuple(x.cached for x in q.running))
        batch = tuple(x.request.id for x in q.running)
        for x in q.running:
            pool.free -= pool.grow(x, 1)
            x.cached += 1
            x.generated += 1
        for x in [x for x in q.running if x.generated >= x.request.output]:
            q.running.remove(x)
            q.finish(x, end)
        return Iteration(IterationKind.DECODE, t, end, batch, pool.capacity - pool.free, tuple(preempted), back,
                         swap_in + swap_out, len(batch))  # fmt: skip


class _ChunkedPrefill:
    """CHUNKED_PREFILL (Sarathi-Serve, vLLM's chunked prefill): every iteration takes up to `chunk_tokens`
    tokens, one per running request that decodes, then the prompts of the requests still prefilling in
    admission order, then new requests (FCFS, the batch limit, their first chunk's blocks free), each a
    chunk of what budget is left; all in one pass (StepCosts.mixed). A request's first token comes at the
    end of the iteration that takes its prompt's last chunk. When the decodes and continuing chunks need
    more blocks than are free, the last admitted is preempted (recompute: its cache is dropped and its
    prompt and generated tokens are prefilled again, in chunks; swap: copied out and back in)."""

    def __call__(self, q: _Queue, t: int) -> Iteration | None:
        s, pool, costs = q.settings, q.pool, q.costs
        swapped_in: list[_Running] = []
        while q.waiting and q.waiting[0].swapped and len(q.running) < s.max_batch:  # swapped requests first
            if not pool.swap_in(q.waiting[0]):
                break
            swapped_in.append(q.waiting.popleft())
            q.running.append(swapped_in[-1])
        # what the running requests take: a decode token each, then their prompts' chunks
        budget = s.chunk_tokens
        plan: list[tuple[_Running, int]] = []
        by_age = sorted(q.running, key=lambda x: x.admitted)
        for x in (x for x in by_age if x.cached >= x.target):  # decodes first, a token each
            if budget < 1:
                break
            plan.append((x, 1))
            budget -= 1
        for x in (x for x in by_age if x.cached < x.target):  # then the prompts still prefilling
            if budget < 1:
                break
            plan.append((x, min(x.target - x.cached, budget)))
            budget -= plan[-1][1]
        preempted, swap_out = [], 0
        while sum(pool.grow(x, n) for x, n in plan) > pool.free:
            victim, cycles = q.preempt_last([x for x, _ in plan])
            plan = [(x, n) for x, n in plan if x is not victim]
            swap_out += cycles
            preempted.append(victim.request.id)
        pool.free -= sum(pool.grow(x, n) for x, n in plan)
        # new requests take what budget is left, while their first chunk's blocks are free
        while not preempted and budget > 0 and q.waiting and not q.waiting[0].swapped and len(q.running) < s.max_batch:
            head = q.waiting[0]
            target = head.request.prompt + max(head.generated - 1, 0)
            new = min(target, budget)
            if pool.blocks(new) > pool.free:
                break
            q.waiting.popleft()
            head.target, head.cached = target, 0
            pool.admit(head)
            q.running.append(head)
            plan.append((head, new))
            pool.free -= pool.blocks(new)
            budget -= new
        if not plan:
            if q.running or swapped_in:  # cannot happen: a running request always fits alone (checked)
                raise AssertionError("an iteration with nothing to run")
            return None
        decoding = {id(x) for x, _ in plan if x.cached >= x.target}
        emits = sum(1 for x, n in plan if id(x) in decoding or (x.cached + n >= x.target and x.generated == 0))
        seqs = tuple((x.cached, n) for x, n in plan)
        swap_in = sum(costs.swap(x.cached) for x in swapped_in)
        decoding_only = len(decoding) == len(plan)
        step = costs.decode(tuple(c for c, _ in seqs)) if decoding_only else costs.mixed(seqs, emits)
        end = t + swap_in + swap_out + step
        for x, n in plan:
            x.cached += n
            if id(x) in decoding:
                x.generated += 1
            elif x.cached >= x.target and x.generated == 0:
                x.generated, x.first_token = 1, end
        for x in [x for x, _ in plan if x.generated >= x.request.output]:
            q.running.remove(x)
            q.finish(x, end)
        kind = IterationKind.DECODE if decoding_only else IterationKind.MIXED
        return Iteration(kind, t, end, tuple(x.request.id for x, _ in plan), pool.capacity - pool.free,
                         tuple(preempted), tuple(x.request.id for x in swapped_in), swap_in + swap_out,
                         len(decoding))  # fmt: skip


# Each policy plans and runs one iteration from the queue at time t (None: nothing can run until an arrival)
POLICIES: dict[Policy, Callable[[_Queue, int], Iteration | None]] = {
    Policy.FCFS_PREFILL_FIRST: _PrefillFirst(),
    Policy.CHUNKED_PREFILL: _ChunkedPrefill(),
}


def simulate_serving(
    requests: list[Request],
    costs: StepCosts,
    *,
    capacity_blocks: int,
    settings: ServeSettings | None = None,
    progress: Progress = quiet,
    what: str = "requests served",
) -> ServeResult:
    """Run the requests through the scheduler (module docstring) and return every iteration and request;
    `progress` hears of every request finished, as `what`. One event loop (_Server): arrivals join the
    queue, the policy (POLICIES) runs an iteration, the clock moves to its end (or to the next arrival when
    nothing can run)."""
    server = _Server(requests, costs, capacity_blocks, settings or ServeSettings(), progress, what)
    while server.busy:
        it = server.next_iteration()
        if it is not None:
            server.ended(it, it.end)
    return server.result()


class _Server:
    """One instance's serving loop: its queue under the policy, its clock (cycles), its iterations. A
    request that could never fit alone is refused here, before the run."""

    def __init__(self, requests: list[Request], costs: StepCosts, capacity_blocks: int, s: ServeSettings,
                 progress: Progress, what: str) -> None:  # fmt: skip
        b = s.block_tokens
        for r in requests:
            need = blocks_for(r.prompt + r.output - 1, b)  # the last token's K/V is never written
            if need > capacity_blocks:
                raise NvdlaError(
                    f"request {r.id} ({r.prompt} prompt + {r.output} output tokens) needs {need} KV blocks of {b} "
                    f"positions alone; the cache holds {capacity_blocks}: {need - capacity_blocks} too many"
                )
        self.requests, self.capacity_blocks, self.settings = requests, capacity_blocks, s
        self.q = _Queue(
            deque(sorted(requests, key=lambda r: (r.arrival_cycle, r.id))), _Pool(capacity_blocks, b), costs, s,
            lambda n: progress(what, n, len(requests)),
        )  # fmt: skip
        self.policy = POLICIES[s.policy]
        self.iterations: list[Iteration] = []
        self.t = 0  # its clock: when it may start its next iteration

    @property
    def busy(self) -> bool:
        """Whether requests are still to arrive, waiting or running."""
        q = self.q
        return bool(q.pending or q.waiting or q.running)

    def next_iteration(self) -> Iteration | None:
        """At its clock, the arrivals so far join the queue and the policy plans and runs an iteration (its
        end as alone); None when nothing can run until the next arrival (the clock moves to it)."""
        q = self.q
        q.arrive(self.t)
        it = self.policy(q, self.t)
        if it is None and q.pending:
            self.t = q.pending[0].arrival_cycle
        return it

    def ended(self, it: Iteration, end: int) -> None:
        """Iteration `it` ended at `end` (later than alone where a shared memory slowed it: the first tokens
        and the finishes it made move with it); the clock moves there."""
        q = self.q
        if end != it.end and it.end > it.start:
            old = it.end  # no earlier iteration ended this late: a time equal to it is this one's
            for x in q.running:
                if x.first_token == old:
                    x.first_token = end
            for rid in it.requests:
                r = q.done.get(rid)
                if r is not None and r.finish_cycle == old:
                    first = end if r.first_token_cycle == old else r.first_token_cycle
                    q.done[rid] = dataclasses.replace(r, first_token_cycle=first, finish_cycle=end)
            it = dataclasses.replace(it, end=end)
        self.iterations.append(it)
        self.t = end
        q.pool.check(q.running)

    def result(self) -> ServeResult:
        return ServeResult([self.q.done[r.id] for r in self.requests], self.iterations, self.capacity_blocks,
                           self.settings)  # fmt: skip


MAX_REPLICAS = 64  # instances a serving run may spread its requests over


def serve_replicas(
    requests: list[Request], costs: StepCosts, replicas: int, *, capacity_blocks: int,
    settings: ServeSettings | None = None, progress: Progress = quiet, shared: Capacity | None = None,
) -> list[ServeResult]:  # fmt: skip
    """The requests served by `replicas` instances of one build, each with the whole model and its own KV cache
    of `capacity_blocks`: request i in order of arrival to replica i mod `replicas` (round robin, as a load
    balancer that does not look at the replicas' queues), each replica's loop as simulate_serving's (one
    `costs` for all: a step's cost is timed once). Each on a DRAM port of its own; or, with `shared` (the
    one DRAM's rate for what its masters ask: system.capacity), all on one DRAM, their loops advancing
    together (_serve_together; `costs` must count its traffic: SimulatedCosts(traffic=True))."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= MAX_REPLICAS:
        raise NvdlaError(f"--replicas {replicas!r}: a whole number of instances from 1 to {MAX_REPLICAS}")
    ordered = sorted(requests, key=lambda r: (r.arrival_cycle, r.id))
    shares = [ordered[k::replicas] for k in range(replicas)]
    if any(not share for share in shares):
        raise NvdlaError(f"--replicas {replicas}: more replicas than the {len(requests)} requests")
    if shared is not None:
        if getattr(costs, "traffic", None) is None:
            raise NvdlaError("replicas on one shared DRAM: the step costs must count their DRAM traffic "
                             "(SimulatedCosts(..., traffic=True))")  # fmt: skip
        s = settings or ServeSettings()
        servers = [
            _Server(share, costs, capacity_blocks, s, progress, f"requests served (replica {k + 1} of {replicas})")
            for k, share in enumerate(shares)
        ]
        _serve_together(servers, costs, shared, costs.hw.clock_mhz)
        return [server.result() for server in servers]
    return [
        simulate_serving(
            share,
            costs,
            capacity_blocks=capacity_blocks,
            settings=settings,
            progress=progress,
            what=f"requests served (replica {k + 1} of {replicas})",
        )
        for k, share in enumerate(shares)
    ]


def _serve_together(servers: list[_Server], costs, capacity: Capacity, clock_mhz: float) -> None:
    """The servers' loops advancing together on one DRAM: each iteration is planned at its server's clock as
    alone (its cycles and its DRAM bytes, `costs.traffic`'s growth over its planning), then runs through its
    time alone at the speed the memory gives it (shared_memory.speeds: max-min fair shares of the memory's
    rate for what the running iterations ask together, each asking its bytes evenly over its time alone; an
    iteration asking while the others ask nothing runs as alone); it ends when it has run its time alone,
    its alone end moved by the time it lost (rounded up to a cycle; exactly none where it ran at full speed
    throughout, whatever the clock), and its server plans its next at that end, or waits for its next
    arrival. An event loop of the fluid sharing; what it leaves out is share_jobs's."""
    ns = 1e3 / clock_mhz

    @dataclasses.dataclass
    class Run:  # an iteration under way
        it: Iteration
        left: float  # cycles of its time alone still to run
        ask: tuple[float, float]  # (read, written) bytes a ns it asks, its bytes over its time alone
        lost: float = 0.0  # cycles it has lost to the others so far

    running: dict[int, Run] = {}
    wall = 0.0  # cycles

    def plan(k: int) -> None:
        server = servers[k]
        while server.busy and server.t <= wall:
            read, written = costs.traffic
            it = server.next_iteration()
            if it is None:
                continue  # its clock moved to the next arrival
            alone = it.end - it.start
            now_read, now_written = costs.traffic
            ask = ((now_read - read) / (alone * ns), (now_written - written) / (alone * ns)) if alone else (0.0, 0.0)
            running[k] = Run(it, float(alone), ask)
            return

    for k in range(len(servers)):
        plan(k)
    while running or any(s.busy for s in servers):
        keys = sorted(running)
        speed = dict(zip(keys, speeds([running[k].ask for k in keys], capacity), strict=True))
        # the next event: an iteration running out its time alone, or an idle server's next arrival
        events = [(running[k].left / speed[k], 0, k) for k in keys]
        events += [(s.t - wall, 1, k) for k, s in enumerate(servers) if k not in running and s.busy]
        step, kind, first = min(events)
        wall = float(servers[first].t) if kind else wall + step  # an arrival's clock exactly
        for k in keys:
            run = running[k]
            run.left -= step * speed[k]
            run.lost += step * (1.0 - speed[k])  # exactly 0.0 while it runs at full speed
            if (kind == 0 and k == first) or run.left <= 1e-9 * (run.it.end - run.it.start):
                del running[k]
                servers[k].ended(run.it, run.it.end + math.ceil(run.lost - 1e-6))
        for k in range(len(servers)):
            if k not in running:
                plan(k)


def replicas_percentiles(results: list[ServeResult]) -> dict[Latency, Percentiles | None]:
    """Latency percentiles over every replica's requests together."""
    out: dict[Latency, list[float]] = {k: [] for k in Latency}
    for res in results:
        for k, v in res.latencies_ms().items():
            out[k] += v
    return {k: Percentiles.of(v) for k, v in out.items()}


@dataclass(frozen=True)
class Percentiles:
    """p50, p90 and p99 of a latency over the requests (ms)."""

    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values: list[float]) -> Percentiles | None:
        if not values:
            return None
        return cls(*(round(float(np.percentile(values, q)), 4) for q in (50, 90, 99)))

    def at(self, q: int) -> float:
        return getattr(self, f"p{q}")


@dataclass(frozen=True)
class ServeSummary:
    """A serving run's figures (ServeResult.summary): latency percentiles per kind (ttft_ms, tpot_ms,
    e2e_ms; None where no request has one), throughput over the span from the first arrival to the last
    finish, preemptions and their KV copies, iterations by kind, the decode batch and the KV blocks held."""

    requests: int
    percentiles: dict[Latency, Percentiles | None]
    output_tokens_per_s: float
    requests_per_s: float
    preemptions: int
    swap_ms: float
    iterations: dict[IterationKind, int]
    mean_decode_batch: float
    peak_kv_blocks: int
    span_ms: float


@dataclass
class ServeResult:
    requests: list[RequestResult]
    iterations: list[Iteration]
    capacity_blocks: int
    settings: ServeSettings
    clock_mhz: float = 1000.0
    meta: dict[str, Any] = field(default_factory=dict)

    def _ms(self, cycles: float) -> float:
        return cycles / self.clock_mhz / 1e3

    def latencies_ms(self) -> dict[Latency, list[float]]:
        """Per request: time to first token, time per output token after it, end to end."""
        ttft = [self._ms(r.first_token_cycle - r.request.arrival_cycle) for r in self.requests]
        tpot = [
            self._ms((r.finish_cycle - r.first_token_cycle) / (r.request.output - 1))
            for r in self.requests
            if r.request.output > 1
        ]
        e2e = [self._ms(r.finish_cycle - r.request.arrival_cycle) for r in self.requests]
        return {Latency.TTFT: ttft, Latency.TPOT: tpot, Latency.E2E: e2e}

    def timeline(self) -> list[dict[str, Any]]:
        """Every iteration: kind, start and end (ms), batch, KV blocks held after it, requests preempted."""
        return [
            {"kind": it.kind.value, "start_ms": round(self._ms(it.start), 6), "end_ms": round(self._ms(it.end), 6),
             "batch": len(it.requests), "decodes": it.decodes, "kv_blocks": it.blocks_used, "preempted": list(it.preempted),
             "swapped_in": list(it.swapped_in), "swap_ms": round(self._ms(it.swap_cycles), 6)}
            for it in self.iterations
        ]  # fmt: skip

    def request_rows(self) -> list[dict[str, Any]]:
        """Every request: arrival, lengths, TTFT and end-to-end latency (ms), preemptions."""
        rows = []
        for r in self.requests:
            a = r.request.arrival_cycle
            rows.append(
                {"id": r.request.id, "arrival_ms": round(self._ms(a), 6), "prompt": r.request.prompt,
                 "output": r.request.output, "ttft_ms": round(self._ms(r.first_token_cycle - a), 6),
                 "e2e_ms": round(self._ms(r.finish_cycle - a), 6), "preemptions": r.preemptions}
            )  # fmt: skip
        return rows

    def summary(self) -> ServeSummary:
        start = min(r.request.arrival_cycle for r in self.requests)
        end = max(r.finish_cycle for r in self.requests)
        seconds = self._ms(end - start) / 1e3
        tokens = sum(r.request.output for r in self.requests)
        decode = [it for it in self.iterations if it.decodes]
        return ServeSummary(
            requests=len(self.requests),
            percentiles={k: Percentiles.of(v) for k, v in self.latencies_ms().items()},
            output_tokens_per_s=round(tokens / seconds, 3) if seconds else 0.0,
            requests_per_s=round(len(self.requests) / seconds, 3) if seconds else 0.0,
            preemptions=sum(r.preemptions for r in self.requests),
            swap_ms=round(self._ms(sum(it.swap_cycles for it in self.iterations)), 4),
            iterations={k: sum(1 for it in self.iterations if it.kind is k) for k in IterationKind},
            mean_decode_batch=round(sum(it.decodes for it in decode) / len(decode), 3) if decode else 0.0,
            peak_kv_blocks=max((it.blocks_used for it in self.iterations), default=0),
            span_ms=round(self._ms(end - start), 4),
        )

    def to_dict(self) -> dict[str, Any]:
        """Every figure as serve.json stores it, after the caller's `meta` (the one place a run becomes plain data)."""
        sm = self.summary()
        return {
            **self.meta,
            "requests": sm.requests,
            "policy": self.settings.policy.value,
            "preemption": self.settings.preemption.value,
            "block_tokens": self.settings.block_tokens,
            "max_batch": self.settings.max_batch,
            "chunk_tokens": self.settings.chunk_tokens if self.settings.policy is Policy.CHUNKED_PREFILL else None,
            "kv_capacity_blocks": self.capacity_blocks,
            "percentiles": {k.value: None if v is None else dataclasses.asdict(v) for k, v in sm.percentiles.items()},
            "throughput": {"output_tokens_per_s": sm.output_tokens_per_s, "requests_per_s": sm.requests_per_s},
            "preemptions": sm.preemptions,
            "swap_ms": sm.swap_ms,
            "iterations": {k.value: n for k, n in sm.iterations.items()},
            "mean_decode_batch": sm.mean_decode_batch,
            "peak_kv_blocks": sm.peak_kv_blocks,
            "span_ms": sm.span_ms,
        }


def kv_capacity_blocks(
    spec: ModelSpec, hw: HwConfig, precision: Precision, block_tokens: int, *, kv_precision: Precision | None = None,
    sharing: int = 1,
) -> int:  # fmt: skip
    """KV blocks that fit beside the model's weights in the memory NVDLA can address (generate.memory_limit),
    each of `block_tokens` positions at the caches' precision (`kv_precision`, else the model's); with
    `sharing` replicas on that one memory, each replica's: the room beside their `sharing` copies of the
    weights, split evenly."""
    room, limit, what = kv_room(spec, hw, precision)
    weights = limit - room
    per_block = kv_bytes_per_token(spec, kv_precision or precision) * block_tokens
    room = limit - sharing * weights
    if room < sharing * per_block:
        copies = f"{sharing} copies of " if sharing > 1 else ""
        raise NvdlaError(
            f"{copies}{spec.name}'s weights ({sharing * weights / 2**30:.2f} GiB, {precision.value}) leave no "
            f"room for {'a KV block each' if sharing > 1 else 'one KV block'} in {what}"
        )
    return room // sharing // per_block


class SimulatedCosts:
    """Iteration cycles from the mapper's own simulation: a prefill of n tokens is `nvdla generate`'s
    prefill at batch 1 (the prompt's pass with the LM head on its last position), a decode step is one
    step of the running sequences, each against its own cache (decode_step_graph with per-sequence
    lengths). Each distinct prefill length and multiset of cache lengths is mapped once. `weights` prunes
    and/or compresses the static weights in every pass, as `nvdla generate --prune/--weight-compression`
    does (the KV caches are activations and stay dense). `kv_precision` keeps the caches, and runs the
    attention against them, at that precision (`nvdla generate --kv-precision`)."""

    def __init__(
        self,
        spec: ModelSpec,
        hw: HwConfig,
        precision: Precision | None = None,
        weights: WeightTreatment | None = None,
        *,
        options: MapOptions | None = None,
        kv_precision: Precision | None = None,
        kv_plan: KvPlan | str | None = None,
        traffic: bool = False,
    ) -> None:
        check_generative(spec)
        if spec.decoder_layers:
            raise NvdlaError(f"{spec.name}: serving is modelled for decoder-only models (gpt2, llama family)")
        self.options = MapOptions.of(
            options, precision=precision, weights=weights, kv_precision=kv_precision, kv_plan=kv_plan
        )
        self.spec, self.hw = spec, hw
        self.precision, self.kv_precision = self.options.precision, self.options.kv_precision
        self.weights, self.kv_plan = self.options.weights, self.options.kv_plan
        self.host = host_model(hw.host)
        self.memo = new_memo(hw, self.options)
        # each part's (cycles, DRAM read bytes, written bytes) by its key (the bytes: with `traffic`)
        self._prefill: dict[int, tuple[int, float, float]] = {}
        self._decode: dict[tuple[int, ...], tuple[int, float, float]] = {}
        self._mixed: dict[tuple, tuple[int, float, float]] = {}
        self._templates: dict[tuple, StepTemplate] = {}
        # with `traffic`: the DRAM bytes (read, written) of every part asked for so far, each part's demand
        # profile's (results.demand_profile: its layers', copies' and host tasks' traffic); an iteration's
        # are what its parts add (serve_replicas on one shared DRAM)
        self.traffic: tuple[float, float] | None = (0.0, 0.0) if traffic else None

    @property
    def mapped(self) -> tuple[int, int]:
        """(distinct prefill lengths, distinct decode and mixed iterations) mapped so far."""
        return len(self._prefill), len(self._decode) + len(self._mixed)

    def prefill(self, tokens: int) -> int:
        if tokens not in self._prefill:
            g = build_graph(self.spec, batch=1, seq=tokens, head="lm_last")
            run = map_model(g, self.hw, self.options, with_baseline=False, memo=self.memo)
            self._prefill[tokens] = (
                run.total_cycles,
                *(demand_profile(run).nbytes() if self.traffic is not None else (0, 0)),
            )
        return self._asked(self._prefill[tokens])

    def _asked(self, part: tuple[int, float, float]) -> int:
        """A part's cycles, its bytes added to the traffic asked for."""
        cycles, read, written = part
        if self.traffic is not None:
            self.traffic = (self.traffic[0] + read, self.traffic[1] + written)
        return cycles

    def _timed(self, template: StepTemplate, shape) -> tuple[int, float, float]:
        """A step template's iteration at `shape`: (cycles, read bytes, written bytes)."""
        if self.traffic is None:
            return template.figures(shape).total_cycles, 0.0, 0.0
        figures, profile = template.figures_and_profile(shape)
        return (figures.total_cycles, *profile.nbytes())

    def swap(self, positions: int) -> int:
        """One sequence's KV cache copied between NVDLA's memory and the host's by the host CPU (the config's
        host model: a copy, every byte read and written, plus one hand-off)."""
        nbytes = positions * kv_bytes_per_token(self.spec, self.kv_precision or self.precision)
        cycles = self.host.cycles(HostWork(HostOp.COPY, 0, 2 * nbytes), self.hw.clock_mhz)
        return self._asked((cycles, nbytes, nbytes) if self.traffic is not None else (cycles, 0.0, 0.0))

    def mixed(self, seqs: tuple[tuple[int, int], ...], emitting: int) -> int:
        key = (tuple(sorted(seqs)), emitting)
        if all(n == 1 for _, n in key[0]):  # decodes only: mixed_step_graph is decode_step_graph
            return self.decode(tuple(c for c, _ in key[0]))
        if key not in self._mixed:  # one template per composition: (sequences, new tokens) of each group
            groups = sorted(Counter(key[0]).items())
            composition = ("mixed", tuple((k, n) for (_, n), k in groups), emitting)
            template = self._template(composition, lambda s, q: mixed_step_graph(s, q, emitting=emitting))
            self._mixed[key] = self._timed(template, key[0])
        return self._asked(self._mixed[key])

    def decode(self, kv_lens: tuple[int, ...]) -> int:
        key = tuple(sorted(kv_lens))
        if key not in self._decode:  # one template per composition: how many sequences share each length
            composition = ("decode", tuple(k for _, k in sorted(Counter(key).items())))
            template = self._template(composition, lambda s, lens: decode_step_graph(s, batch=len(lens), kv_len=lens))
            self._decode[key] = self._timed(template, key)
        return self._asked(self._decode[key])

    def _template(self, composition: tuple, build) -> StepTemplate:
        """The step template of an iteration's batch composition (step_template: lowered and scheduled once,
        re-timed for each set of cache lengths)."""
        t = self._templates.get(composition)
        if t is None:
            t = self._templates[composition] = StepTemplate(self.spec, build, self.memo)
        return t


def poisson_requests(
    n: int, rate_per_s: float, *, prompt: int, output: int, clock_mhz: float, seed: int = 0
) -> list[Request]:
    """`n` requests arriving as a Poisson process of `rate_per_s` (exponential gaps, seeded), each with the
    given prompt and output lengths."""
    check_int(n, "--requests")
    if not rate_per_s > 0:
        raise NvdlaError(f"--rate must be a positive number of requests per second, not {rate_per_s!r}")
    for name, v in (("--prompt", prompt), ("--output", output)):
        check_int(v, name)
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        out.append(Request(i, round(t * clock_mhz * 1e6), prompt, output))
        t += rng.expovariate(rate_per_s)
    return out


def read_trace(path, clock_mhz: float) -> list[Request]:
    """Requests from a CSV with columns arrival_s, prompt, output (one request per row; other columns are
    allowed). A file that cannot be read, or a line that is not a request, is a one-line error naming the
    file and the line."""
    import csv

    rows = []
    need = ("arrival_s", "prompt", "output")
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f, skipinitialspace=True)
            if reader.fieldnames is not None:  # a header written "arrival_s, prompt , output" still names them
                reader.fieldnames = [c.strip() for c in reader.fieldnames]
            missing = [c for c in need if c not in (reader.fieldnames or ())]
            if missing:
                raise NvdlaError(f"{path}: missing column(s) {missing}; the first line names arrival_s, prompt, output")
            for i, row in enumerate(reader):
                line = reader.line_num
                if None in row or any(row[c] is None for c in need):
                    fields = sum(v is not None for k, v in row.items() if k is not None) + len(row.get(None) or ())
                    raise NvdlaError(
                        f"{path}:{line}: {fields} fields where the header has {len(reader.fieldnames)}; "
                        "each line is arrival_s, prompt, output"
                    )
                try:
                    arrival, prompt, output = float(row["arrival_s"]), int(row["prompt"]), int(row["output"])
                except ValueError:
                    raise NvdlaError(
                        f"{path}:{line}: {[row[c] for c in need]} is not arrival_s (seconds), prompt, output (integers)"
                    ) from None
                if not (0 <= arrival < math.inf) or prompt < 1 or output < 1:
                    raise NvdlaError(
                        f"{path}:{line}: arrival_s must be a finite number >= 0 and prompt, output >= 1, not "
                        f"{row['arrival_s']}, {prompt}, {output}"
                    )
                rows.append(Request(i, round(arrival * clock_mhz * 1e6), prompt, output))
    except OSError as e:
        raise NvdlaError(f"--trace {path}: cannot read it ({e.strerror or e})") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise NvdlaError(f"--trace {path}: not a CSV text file ({e})") from None
    if not rows:
        raise NvdlaError(f"{path}: no requests (a header line arrival_s,prompt,output and one line per request)")
    return rows


# ---- request rates: the latency-throughput curve and the highest rate that meets a latency target ----


@dataclass(frozen=True)
class Slo:
    """A latency target: the given percentile of time to first token and of time per output token (ms)
    at most these (None: not part of the target)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    percentile: int = 99

    def __post_init__(self) -> None:
        if self.ttft_ms is None and self.tpot_ms is None:
            raise NvdlaError("a latency target needs --slo-ttft-ms, --slo-tpot-ms or both")
        for name in ("ttft_ms", "tpot_ms"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not v > 0):
                raise NvdlaError(f"--slo-{name.replace('_', '-')} must be a positive number of ms, not {v!r}")
        if self.percentile not in (50, 90, 99):
            raise NvdlaError(f"--slo-percentile must be 50, 90 or 99, not {self.percentile!r}")

    def met(self, summary: ServeSummary) -> bool:
        """Whether a run meets the target."""
        pct = summary.percentiles
        for key, limit in ((Latency.TTFT, self.ttft_ms), (Latency.TPOT, self.tpot_ms)):
            if limit is not None and pct[key] is not None and pct[key].at(self.percentile) > limit:
                return False
        return True

    def describe(self) -> str:
        parts = [f"{k} <= {v:g} ms" for k, v in (("TTFT", self.ttft_ms), ("TPOT", self.tpot_ms)) if v is not None]
        return f"p{self.percentile} " + " and ".join(parts)


@dataclass(frozen=True)
class RatePoint:
    rate_per_s: float
    summary: ServeSummary  # the run at this rate
    meets: bool | None  # None: no target

    def row(self) -> dict[str, Any]:
        """The figures of a latency-throughput table: one row per rate (sweep.csv)."""
        pct = self.summary.percentiles
        row: dict[str, Any] = {"rate_per_s": self.rate_per_s}
        for key in Latency:
            for q in (50, 99):
                row[f"{key.value[:-3]}_p{q}_ms"] = pct[key].at(q) if pct[key] else None
        row |= {
            "output_tokens_per_s": self.summary.output_tokens_per_s,
            "requests_per_s": self.summary.requests_per_s,
            "mean_decode_batch": self.summary.mean_decode_batch,
            "preemptions": self.summary.preemptions,
            "meets_slo": self.meets,
        }
        return row


@dataclass(frozen=True)
class RateSweep:
    points: tuple[RatePoint, ...]  # by rate; bisection's points included
    slo: Slo | None
    best_rate_per_s: float | None  # the highest rate run that meets the target (None: none did, or no target)
    bracket: tuple[float, float] | None  # (meets, does not) around the limit after bisection

    def to_dict(self) -> dict[str, Any]:
        return {
            "slo": None if self.slo is None else self.slo.describe(),
            "highest_rate_meeting_slo_per_s": self.best_rate_per_s,
            "bracket_per_s": None if self.bracket is None else list(self.bracket),
            "rates": [p.row() for p in self.points],
        }


def sweep_rates(
    arrivals: Callable[[float], list[Request]],
    rates: list[float],
    costs: StepCosts,
    *,
    capacity_blocks: int,
    settings: ServeSettings | None = None,
    clock_mhz: float = 1000.0,
    slo: Slo | None = None,
    bisect_steps: int = 4,
    progress: Progress = quiet,
) -> RateSweep:
    """Serve `arrivals(rate)` at every rate; with `slo`, bisect `bisect_steps` times (geometric midpoints)
    between the highest swept rate that meets it and the next that does not. Latency is taken to grow with
    the rate between those two points; the result says which rates were run."""
    if not rates or any(isinstance(r, bool) or not isinstance(r, int | float) or not r > 0 for r in rates):
        raise NvdlaError(f"--rates must be positive numbers of requests per second, not {rates!r}")
    if isinstance(bisect_steps, bool) or not isinstance(bisect_steps, int) or bisect_steps < 0:
        raise NvdlaError(f"--bisect must be a whole number >= 0, not {bisect_steps!r}")

    def run(rate: float) -> RatePoint:
        res = simulate_serving(
            arrivals(rate), costs, capacity_blocks=capacity_blocks, settings=settings, progress=progress,
            what=f"rate {rate:,.4g}/s: requests served",
        )  # fmt: skip
        res.clock_mhz = clock_mhz
        summary = res.summary()
        return RatePoint(float(rate), summary, None if slo is None else slo.met(summary))

    points = {float(r): run(r) for r in sorted(set(rates))}
    best = bracket = None
    if slo is not None:
        ordered = [points[r] for r in sorted(points)]
        first_miss = next((i for i, p in enumerate(ordered) if not p.meets), None)
        if first_miss is None:
            best = ordered[-1].rate_per_s
        elif first_miss > 0:
            lo, hi = ordered[first_miss - 1].rate_per_s, ordered[first_miss].rate_per_s
            for _ in range(bisect_steps):
                mid = math.sqrt(lo * hi)
                points[mid] = run(mid)
                lo, hi = (mid, hi) if points[mid].meets else (lo, mid)
            best, bracket = lo, (lo, hi)
    return RateSweep(tuple(points[r] for r in sorted(points)), slo, best, bracket)
