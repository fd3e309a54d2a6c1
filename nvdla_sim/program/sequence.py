"""A driver's register sequence: a whole network as NVIDIA's firmware programs it, decoded and replayed in time.

The kernel-mode driver does not program NVDLA layer by layer. It programs each processor's next operation
into the free register group while the other runs, enables an operation once its dependencies are met
(a fused convolution's SDP pass before the convolution), and learns of ends by reading GLB S_INTR_STATUS
(nvdla/sw kmd/firmware/scheduler.c, engine_isr.c). docs/driver_programs.md gives the rules this follows:

1. each unit's S_POINTER producer says which register group its D_ writes go to (the RDMAs have their own);
2. an operation of a processor starts at its starting unit's D_OP_ENABLE (RegisterView.starts_on: the
   firmware enables it last, a reader before its unit), with the registers every unit holds in its
   producer group at that moment;
3. the hardware runs a processor's two groups strictly alternately, so its operations run in the order
   g0, g1, g0, ... of their enables, not in the order of the enables;
4. an operation taking its input on the fly (RegisterView.fed_by) joins the k-th operation of the
   processor that hands its output on (RegisterView.hands_on), the k-th of each in execution order;
5. each processor of an operation raises its group's done bit (RegisterView.done; a convolution CACC's, its
   SDP pass SDP's); the first read of S_INTR_STATUS showing a bit after the processor's enable takes it,
   first in first out per bit, and the operation ends at the read that showed the last of its bits; a bit
   counts again once the driver has cleared it. The pairing of rule 4 is checked by the cube handed on
   against the cube taken (RegisterView.cube).

The replay walks the log with a clock: a register write or read costs the config's [driver] cycles; an
operation starts at its last enable, no earlier than the end of the operation before it on each processor
it uses; a read that shows an end waits for it (plus the driver's interrupt cycles). The network's cycles
run from the first access to the last end or the last access, whichever is later.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from nvdla_sim.config import HwConfig
from nvdla_sim.errors import TraceError
from nvdla_sim.processors import REGISTER_VIEWS
from nvdla_sim.processors.registers import RegisterView, Snapshots
from nvdla_sim.program.decode import Operation, describe, operations_of
from nvdla_sim.registers.fields import FIELDS, is_known
from nvdla_sim.registers.trace_io import Program, RegPoll, RegRead, RegWrite

_STATUS = ("NVDLA_GLB", "S_INTR_STATUS_0")


@dataclass(frozen=True)
class _Enable:
    """One processor operation's start: its starting unit's op enable, with every unit's registers then."""

    view: RegisterView
    group: int
    at: int  # index of the enabling write in the program's commands
    line: int
    state: Snapshots  # each unit's producer-group registers (and its shared S_ ones) at the enable
    enabled: frozenset[str]  # the processor's units enabled since its previous operation's start
    transfers: tuple[Snapshots, ...] = ()  # a launch's queued operations, each as its registers were (BDMA)


@dataclass(frozen=True)
class SequencedOperation:
    """An operation of the driver's sequence: one processor's, or a chain on the fly (a convolution with its
    SDP pass and PDP), as the register views decode it."""

    name: str
    processors: tuple[str, ...]  # the kinds it occupies, upstream first ("conv", "sdp")
    groups: tuple[int, ...]  # each processor's register group
    positions: tuple[int, ...]  # its place in each processor's execution order
    enables: tuple[int, ...]  # command index of each processor's enable
    ops: tuple[Operation, ...]  # what the register views decoded from its registers
    enabled_at: int  # command index of its last enable: it may start then
    line: int  # the log line of that enable
    done_bits: tuple[int, ...]  # each processor's S_INTR_STATUS done bit (its group's)
    ended_at: int | None  # command index of the read that showed the last of them (None: the log ends first)


@dataclass
class Sequence:
    name: str
    operations: list[SequencedOperation]
    unknown: list[str] = field(default_factory=list)  # "UNIT.REG" written but not understood


def _done_bit(view: RegisterView, group: int) -> int:
    msb, lsb = FIELDS[_STATUS][f"{view.done}{group}"]
    return lsb


def done_mask() -> int:
    """The S_INTR_STATUS bits that end operations: each register view's done bit of both groups (not CDMA's
    data and weight events, which the hardware raises on its own schedule)."""
    return sum(1 << _done_bit(v, g) for v in REGISTER_VIEWS for g in (0, 1))


def status_reads(prog: Program) -> Iterator[tuple[int, RegRead, int]]:
    """(command index, read, bits it newly shows) for each read of S_INTR_STATUS: the bits set (under its
    mask) that were not already shown since the driver last cleared them (a write of S_INTR_STATUS)."""
    shown = 0
    for at, c in enumerate(prog.commands):
        if not isinstance(c, RegWrite | RegRead) or (c.unit, c.reg) != _STATUS:
            continue
        if isinstance(c, RegWrite):  # the driver clears the bits it writes
            shown &= ~c.value
            continue
        value = c.value & c.mask
        yield at, c, value & ~shown
        shown |= value


def _scan(prog: Program) -> tuple[list[_Enable], list[str]]:
    """Every processor operation's start, in log order, and the registers written but not understood."""
    member_of = {u: v for v in REGISTER_VIEWS for u in v.units}
    pointer: dict[str, int] = {}
    shared: dict[str, dict[str, int]] = {}
    groups: dict[tuple[str, int], dict[str, int]] = {}
    since: dict[str, set[str]] = {}  # per processor kind, its units enabled since its last start
    enables: list[_Enable] = []
    unknown: list[str] = []
    queued: dict[str, list[Snapshots]] = {}  # per unit without pointer groups, its operations since the last launch

    def state_now() -> Snapshots:
        units = set(shared) | {u for u, _ in groups}
        return {u: {**shared.get(u, {}), **groups.get((u, pointer.get(u, 0)), {})} for u in units}

    for i, c in enumerate(prog.commands):
        if not isinstance(c, RegWrite):
            continue
        if not is_known(c.unit, c.reg) and f"{c.unit}.{c.reg}" not in unknown:
            unknown.append(f"{c.unit}.{c.reg}")
        if c.reg == "S_POINTER_0":
            pointer[c.unit] = c.value & 1  # PRODUCER: the group CSB writes go to
            continue
        if c.reg.startswith("S_"):  # one register for both groups
            shared.setdefault(c.unit, {})[c.reg] = c.value
            continue
        regs = groups.setdefault((c.unit, pointer.get(c.unit, 0)), {})
        regs[c.reg] = c.value
        view = member_of.get(c.unit)
        if view is None or not c.value & 1:
            continue
        launch = dict(view.launch_registers)
        if c.reg in launch:  # the operations queued since the last launch run as this group
            if not queued.get(c.unit):
                raise TraceError(f"{prog.where}:{c.line}: {c.unit}.{c.reg} launches a group with nothing queued")
            transfers = tuple(queued.pop(c.unit))
            enables.append(_Enable(view, launch[c.reg], i, c.line, transfers[-1], frozenset({c.unit}), transfers))
            continue
        if c.reg != view.enable_register:
            continue
        if not view.pointer_groups:  # queued (CFG_OP.EN), started by a launch register
            queued.setdefault(c.unit, []).append(state_now())
            continue
        since.setdefault(view.kind, set()).add(c.unit)
        if c.unit != view.starts_on:
            continue
        enables.append(_Enable(view, pointer.get(c.unit, 0), i, c.line, state_now(), frozenset(since.pop(view.kind))))
    return enables, unknown


def _execution_order(enables: list[_Enable], kind: str, where: str) -> list[_Enable]:
    """A processor's operations in the order its hardware runs them: its groups alternately from group 0, or,
    for groups started by launch registers, the order of the launches."""
    if enables and not enables[0].view.pointer_groups:
        return enables
    per_group = ([e for e in enables if e.group == 0], [e for e in enables if e.group == 1])
    if len(per_group[0]) - len(per_group[1]) not in (0, 1):
        extra = per_group[1][len(per_group[0])] if len(per_group[1]) > len(per_group[0]) else per_group[0][-1]
        raise TraceError(
            f"{where}:{extra.line}: {kind} enables {len(per_group[0])} operations in register group 0 and "
            f"{len(per_group[1])} in group 1; its hardware alternates the groups from group 0"
        )
    g0, g1 = per_group
    return [e for n, first in enumerate(g0) for e in ([first, g1[n]] if n < len(g1) else [first])]


def decode_sequence(prog: Program) -> Sequence:
    """The operations of a driver's log (rules in the module's docstring), in the order they may start."""
    enables, unknown = _scan(prog)
    if not enables:
        raise TraceError(f"{prog.where}: the log enables no operation (no D_OP_ENABLE write of 1 that starts one)")
    kinds = list(dict.fromkeys(e.view.kind for e in enables))
    order = {k: _execution_order([e for e in enables if e.view.kind == k], k, prog.where) for k in kinds}
    # chains on the fly: the k-th operation fed by kind K joins the k-th operation of K that hands on
    chains: dict[int, list[_Enable]] = {id(e): [e] for e in enables}
    head: dict[int, int] = {id(e): id(e) for e in enables}  # each enable's chain
    for k in kinds:
        fed = [e for e in order[k] if e.view.fed_by(e.state) is not None]
        for upstream in {e.view.fed_by(e.state) for e in fed}:
            takers = [e for e in fed if e.view.fed_by(e.state) == upstream]
            givers = [e for e in order.get(upstream, []) if e.view.hands_on(e.state)]
            if len(takers) != len(givers):
                first = (takers if len(takers) > len(givers) else givers)[min(len(takers), len(givers))]
                raise TraceError(
                    f"{prog.where}:{first.line}: {len(takers)} {k} operations take their input on the fly from "
                    f"{upstream}, but {len(givers)} {upstream} operations hand theirs on (a log cut short?)"
                )
            for taker, giver in zip(takers, givers, strict=True):
                handed, taken = giver.view.cube(giver.state), taker.view.cube(taker.state)
                if None not in (handed, taken) and handed != taken:
                    raise TraceError(
                        f"{prog.where}:{taker.line}: the {k} operation takes a {taken} cube on the fly, but the "
                        f"{upstream} operation it runs with (line {giver.line}) hands on {handed}"
                    )
                chain = chains.pop(head[id(taker)])
                root = head[id(giver)]
                chains[root] += chain
                for e in chain:
                    head[id(e)] = root
    position = {id(e): n for k in kinds for n, e in enumerate(order[k])}
    ops = [_chain(prog, members, n, position) for n, members in enumerate(sorted(chains.values(), key=_last_enable))]
    return Sequence(prog.name, _with_ends(prog, ops), unknown)


def _last_enable(members: list[_Enable]) -> int:
    return max(e.at for e in members)


def _chain(prog: Program, members: list[_Enable], n: int, position: dict[int, int]) -> SequencedOperation:
    snap: Snapshots = {}
    for e in members:  # each processor's own units from its own enable
        snap.update({u: regs for u, regs in e.state.items() if u not in snap or u in e.view.units})
    enabled = set().union(*(e.enabled for e in members))
    last = max(members, key=lambda e: e.at)
    label = f"{prog.name}.{n}"
    try:
        if any(e.transfers for e in members):  # a launch: each queued operation from its own registers
            ops = tuple(op for e in members for t in e.transfers for op in operations_of(label, t, enabled))
        else:
            ops = tuple(operations_of(label, snap, enabled))
    except TraceError as err:
        raise TraceError(f"{prog.where}:{last.line}: {err}") from None
    return SequencedOperation(
        label,
        tuple(e.view.kind for e in members),
        tuple(e.group for e in members),
        tuple(position[id(e)] for e in members),
        tuple(e.at for e in members),
        ops,
        last.at,
        last.line,
        tuple(_done_bit(e.view, e.group) for e in members),
        None,
    )


def _with_ends(prog: Program, ops: list[SequencedOperation]) -> list[SequencedOperation]:
    """Each operation's end: for each of its processors, the first read of S_INTR_STATUS showing that
    processor's done bit after its enable, first in first out per bit in the processor's execution order; the
    operation ends at the last of them. A bit shown again counts only after a write of S_INTR_STATUS cleared
    it; a bit shown while no operation waiting for it has been enabled is not an end."""
    waiting: dict[int, list[tuple[int, int]]] = {}  # done bit -> (operation, its member), in execution order
    for i, op in enumerate(ops):
        for m, bit in enumerate(op.done_bits):
            waiting.setdefault(bit, []).append((op.positions[m], i, m))
    queue = {bit: [(i, m) for _, i, m in sorted(q)] for bit, q in waiting.items()}
    seen: dict[int, list[int]] = {i: [] for i in range(len(ops))}
    for at, _, new in status_reads(prog):
        for bit, q in queue.items():
            if new >> bit & 1 and q and ops[q[0][0]].enables[q[0][1]] < at:
                i, _ = q.pop(0)
                seen[i].append(at)
    return [
        replace(op, ended_at=max(seen[i]) if len(seen[i]) == len(op.done_bits) else None) for i, op in enumerate(ops)
    ]


@dataclass(frozen=True)
class TimedOperation:
    """One operation of the replay: when it was enabled, started and ended (core clocks from the log's
    first access), and the model's cycles for it (op enable to interrupt)."""

    operation: SequencedOperation
    enabled: float
    start: float
    end: float
    cycles: int
    timings: tuple  # program.run.OperationTiming per timed operation of the chain
    seen: float | None = None  # when the driver's read that showed its end completed (None: never read)


@dataclass(frozen=True)
class TimeSplit:
    """Where a replayed log's cycles went, each cycle of its span counted once, so the four parts add up
    to it: an operation running (the driver's accesses meanwhile are hidden behind it), NVDLA idle while the
    driver reads and writes registers, NVDLA idle between an operation's end and the driver's read that
    showed it (the interrupt and the driver's reaction), and neither. Host work is not in a driver's log (a
    loadable's CPU tasks are executed, not timed)."""

    cycles: int  # the span: first register access to the last end or access
    running: int  # some operation running
    registers: int  # NVDLA idle, the driver accessing registers
    interrupt: int  # NVDLA idle, the driver waiting for an ended operation's interrupt and reacting
    idle: int  # NVDLA idle and the driver neither accessing nor waiting
    hidden_registers: int  # the driver's register accesses while an operation runs

    @classmethod
    def of(cls, cycles: int, running: float, registers: float, interrupt: float, hidden: float) -> TimeSplit:
        """Whole cycles that add up to `cycles` (the span, rounded): each part's end rounded where it falls on
        the running sum, and idle the rest (never negative: the parts lie inside the span)."""
        ends = [round(running), round(running + registers), round(running + registers + interrupt)]
        if ends[-1] > cycles:
            raise ValueError(f"internal: the time split's parts ({ends[-1]} cycles) exceed the span ({cycles})")
        return cls(cycles, ends[0], ends[1] - ends[0], ends[2] - ends[1], cycles - ends[2], round(hidden))

    def to_dict(self) -> dict:
        return {
            "operations_running": self.running,
            "register_programming_nvdla_idle": self.registers,
            "interrupt_and_driver_nvdla_idle": self.interrupt,
            "idle": self.idle,
            "register_programming_hidden": self.hidden_registers,
        }


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Length of the intersection of two unions of disjoint sorted spans."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


@dataclass(frozen=True)
class SequenceRun:
    """A driver's log replayed: the network's cycles and where they went."""

    name: str
    cycles: int
    operations: tuple[TimedOperation, ...]
    writes: int
    reads: int
    csb_cycles: float  # the driver's register accesses (writes and reads at the profile's costs)
    wait_cycles: float  # the driver waiting for operations to end
    profile: str
    costs: tuple[float, float, float]  # the driver's (write, read, interrupt) cycles
    driver: tuple[tuple[str, float, float], ...] = ()  # (what, start, end): register bursts and waits

    def overlap_cycles(self) -> int:
        """Cycles in which two or more operations ran at once (each is timed alone: their shared memory
        port is not modelled, so this is where the replay is optimistic)."""
        edges = sorted(e for t in self.operations for e in ((t.start, 1), (t.end, -1)))
        running, last, over = 0, 0.0, 0.0
        for at, step in edges:
            if running >= 2:
                over += at - last
            running, last = running + step, at
        return round(over)

    def spans(self) -> list[tuple[str, str, int, int]]:
        """(track, name, start, end) for a Perfetto trace (engine.trace.span_events): a track per processor
        with its operations, and the driver's register bursts and waits."""
        out = [
            (k, f"{t.operation.name} {'+'.join(t.operation.processors)}", round(t.start), round(t.end))
            for t in self.operations
            for k in t.operation.processors
        ]
        return out + [("driver", what, round(a), round(b)) for what, a, b in self.driver if b > a]

    def to_dict(self) -> dict:
        """The replay as the CLI's JSON stores it: the driver's figures and each operation's times."""
        write, read, interrupt = self.costs
        return {
            "driver_profile": self.profile,
            "csb_write_cycles": write,
            "csb_read_cycles": read,
            "interrupt_cycles": interrupt,
            "register_writes": self.writes,
            "register_reads": self.reads,
            "register_access_cycles": round(self.csb_cycles),
            "driver_wait_cycles": round(self.wait_cycles),
            "busy_cycles_by_processor": self.busy_by_processor(),
            "time_split": self.time_split().to_dict(),
            "overlap_cycles": self.overlap_cycles(),
            "driver_track": [{"what": what, "start": round(a), "end": round(b)} for what, a, b in self.driver if b > a],
            "operations": [
                {
                    "name": t.operation.name,
                    "processors": list(t.operation.processors),
                    "groups": list(t.operation.groups),
                    "enable_line": t.operation.line,
                    "enabled": round(t.enabled),
                    "start": round(t.start),
                    "end": round(t.end),
                    "cycles": t.cycles,
                    "layers": [describe(op) for op in t.operation.ops],
                }
                for t in self.operations
            ],
        }

    def time_split(self) -> TimeSplit:
        """Each cycle of the span in one part (TimeSplit). The driver's track is one thing at a time (a burst
        of accesses, then a wait, ...), so its spans do not overlap one another; an operation running takes
        precedence over both."""
        running = _union([(t.start, t.end) for t in self.operations])
        bursts = _union([(a, b) for what, a, b in self.driver if what.startswith("registers")])
        waits = _union([(a, b) for what, a, b in self.driver if what.startswith("wait for")])
        busy = sum(b - a for a, b in running)
        hidden = _overlap(bursts, running)
        registers = sum(b - a for a, b in bursts) - hidden
        interrupt = sum(b - a for a, b in waits) - _overlap(waits, running)
        return TimeSplit.of(self.cycles, busy, registers, interrupt, hidden)

    def busy_by_processor(self) -> dict[str, int]:
        """Cycles each processor kind was occupied (start to end of the operations that use it)."""
        out: dict[str, int] = {}
        for t in self.operations:
            for k in t.operation.processors:
                out[k] = out.get(k, 0) + round(t.end - t.start)
        return out


def replay(prog: Program, seq: Sequence, hw: HwConfig, timings: list[tuple]) -> SequenceRun:
    """Time the driver's log on `hw` (module docstring): its accesses at hw.driver's costs, each operation
    taking the model's cycles (`timings`: per operation, program.run.OperationTiming of what it runs), in the
    log's order and each processor's."""
    write, read, interrupt = costs = hw.driver.costs_at(hw.clock_mhz)
    # what run_operations times apart runs in turn (a launch's transfers; a chain on the fly is one timing)
    cycles = [sum(t.cycles for t in ts) for ts in timings]
    # each processor's operations in execution order; an operation starts when it heads every queue it is in
    queues: dict[str, list] = {}
    for i, op in enumerate(seq.operations):
        for k, n in zip(op.processors, op.positions, strict=True):
            queues.setdefault(k, []).append((n, i))
    queues = {k: [i for _, i in sorted(q)] for k, q in queues.items()}
    enabled_by_at: dict[int, list[int]] = {}
    for i, op in enumerate(seq.operations):
        enabled_by_at.setdefault(op.enabled_at, []).append(i)
    ended_by_at: dict[int, list[int]] = {}
    for i, op in enumerate(seq.operations):
        if op.ended_at is not None:
            ended_by_at.setdefault(op.ended_at, []).append(i)
    enabled_t: dict[int, float] = {}
    start: dict[int, float] = {}
    end: dict[int, float] = {}
    free: dict[str, float] = {}

    waiting: list[int] = []  # enabled, not yet started

    def schedule() -> None:
        progress = True
        while progress:
            progress = False
            for i in list(waiting):
                ks = seq.operations[i].processors
                if all(queues[k] and queues[k][0] == i for k in ks):
                    start[i] = max(enabled_t[i], *(free.get(k, 0.0) for k in ks))
                    end[i] = start[i] + cycles[i]
                    for k in ks:
                        free[k] = end[i]
                        queues[k].pop(0)
                    waiting.remove(i)
                    progress = True

    t = 0.0
    csb = wait = 0.0
    writes = reads = 0
    seen: dict[int, float] = {}
    driver: list[tuple[str, float, float]] = []  # the driver's track: register bursts and waits
    burst = (0.0, 0)  # start of the current burst of accesses, and its count
    for at, c in enumerate(prog.commands):
        if not isinstance(c, RegWrite | RegRead | RegPoll):
            continue
        is_write = isinstance(c, RegWrite)
        for i in () if is_write else ended_by_at.get(at, []):  # a read that shows an end waits for it
            if i not in end:
                raise TraceError(
                    f"{prog.where}:{c.line}: the log reads the end of {seq.operations[i].name} before the "
                    "operations its processors run first were enabled"
                )
            ready = end[i] + interrupt
            if ready > t:
                if burst[1]:
                    driver.append((f"registers ({burst[1]} accesses)", burst[0], t))
                driver.append((f"wait for {seq.operations[i].name}", t, ready))
                wait += ready - t
                t = ready
                burst = (t, 0)
        burst = (burst[0], burst[1] + 1)
        cost = write if is_write else read
        t += cost
        csb += cost
        writes += is_write
        reads += not is_write
        if is_write:
            for i in enabled_by_at.get(at, []):
                enabled_t[i] = t
                waiting.append(i)
            schedule()
        else:
            for i in ended_by_at.get(at, []):
                seen[i] = t
    missing = [seq.operations[i].name for i in range(len(seq.operations)) if i not in end]
    if missing:
        raise TraceError(f"{prog.where}: operations never start (their processors' earlier ones are never enabled): "
                         f"{', '.join(missing[:5])}")  # fmt: skip
    if burst[1]:
        driver.append((f"registers ({burst[1]} accesses)", burst[0], t))
    total = max(t, max(end.values(), default=0.0))
    timed = tuple(
        TimedOperation(op, enabled_t[i], start[i], end[i], cycles[i], timings[i], seen.get(i))
        for i, op in enumerate(seq.operations)
    )
    return SequenceRun(seq.name, round(total), timed, writes, reads, csb, wait, hw.driver.profile, costs, tuple(driver))
