"""The DLA firmware's scheduler (nvdla/sw kmd/firmware scheduler.c, engine.c, engine_isr.c) running one
DLA task over the processors' programming (firmware.registry), as the register accesses it makes.

* Each processor's first operation (the network's op_head) is submitted, and the processor's next one (the
  tail operation's consumer of its own type) dequeued into its other register group.
* An operation is programmed into a free group (utils_get_free_group: with both free, the group the
  hardware's consumer pointer shows; else the other one) once the processor is ready for it, and enabled once
  its dependency count is zero.
* Each event (programmed, enabled, completed) counts down its consumers' dependencies (and its fused
  parent's) and enables those that reach zero.
* The interrupt reads S_INTR_MASK and S_INTR_STATUS, writes the status back to clear it and reads both
  again; then each processor's events are handled, its groups from the one after the last completed. A
  completion frees the group, programs (and enables) a group left pending, and dequeues the processor's
  next operation.

Which running operation ends first, when two could, is the hardware's answer, asked of an `EndOrder`: the
register accesses depend on it, and loadable.run's replay tells it back until the two agree.

A convolution's CDMA data and weight done interrupts (unmasked at reset) come as one interrupt before the
convolution's end; when CDMA finishes fetching is not modelled, so the replay does not wait for them. An
operation that needs no hardware (a BDMA operation of no transfers) is handled at the next interrupt, as the
firmware does, or at once when nothing runs (the firmware would wait for ever).

Not followed (refused): ROIs beyond the first, dynamic ROIs and statistics (STAT_ENABLE); each processor's
module says what else it refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nvdla_sim.program.loadable.container import LoadableError
from nvdla_sim.program.loadable.descriptors import Event, MemType, OpType
from nvdla_sim.program.loadable.firmware.base import Csb, FirmwareProcessor, Mask, MemoryLayout, Target
from nvdla_sim.program.loadable.firmware.registry import PROCESSORS
from nvdla_sim.program.loadable.network import DlaNetwork, DlaOperation
from nvdla_sim.registers.trace_io import Command


@dataclass
class _Group:
    """struct dla_processor_group: one register group of a processor, as the firmware tracks it."""

    id: int
    op: DlaOperation | None = None
    pending: bool = False  # prepared, not yet programmed
    active: bool = False  # enabled, not yet completed
    rdma_needed: bool = False
    rdma_id: int = 0
    lut_index: int = -1
    programming: bool = False  # in dla_program_operation: not enabled until it returns
    completed: bool = False  # its interrupt was seen (DLA_EVENT_OP_COMPLETED)
    early: set[Event] = field(default_factory=set)  # events of its early interrupts seen, not yet handled
    early_seen: bool = False  # its early interrupts have come (they come once an operation)


@dataclass
class _State:
    """struct dla_processor's state, and the hardware's pointers the firmware reads."""

    fw: FirmwareProcessor
    groups: tuple[_Group, _Group] = field(default_factory=lambda: (_Group(0), _Group(1)))
    group_status: int = 0
    rdma_status: int = 0
    tail: DlaOperation | None = None
    last_group: int = 1
    completed: int = 0  # operations the hardware finished: its consumer pointer is this mod 2
    rdma_completed: int = 0


@dataclass(frozen=True)
class End:
    """What the next interrupt reports: a chain of operations that end together (operation indices), or,
    with `early`, the interrupts an operation raises before its end (a convolution's CDMA done)."""

    ops: tuple[int, ...]
    early: bool = False


# the hardware's answer to "which interrupt comes next": given the candidates (in enable order), the first
EndOrder = Callable[[list[End]], End]


def enable_order(candidates: list[End]) -> End:
    """The candidate enabled first comes first (the order NVIDIA's chain-dependent networks have)."""
    return candidates[0]


@dataclass(frozen=True)
class FirmwareRun:
    """The firmware's register accesses for one DLA task, and which of them started which operation."""

    commands: tuple[Command, ...]
    enables: dict[int, int]  # operation index -> command index of its starting unit's enable
    end_reads: tuple[tuple[int, tuple[int, ...]], ...]  # (command index of the status read, operations it ended)
    choices: int  # interrupts at which two or more running chains could have ended first (EndOrder asked)


def _fused(op: DlaOperation) -> tuple[tuple[int, Event], ...]:
    fp = op.common.fused_parent
    if fp.index < 0:
        return ()
    return ((fp.index, Event(fp.event) if fp.event in Event._value2member_map_ else Event.NONE),)


class Firmware:
    """The DLA firmware's scheduler for one task (module docstring)."""

    def __init__(self, net: DlaNetwork, mem: MemoryLayout, *, atom: int, end_order: EndOrder | None = None) -> None:
        self.target = Target(net, mem, atom)
        self.net, self.end_order = net, end_order or enable_order
        self.csb = Csb()
        self.ops = net.operations
        where = net.loadable.path
        d = net.desc
        if d.num_rois != 1 or d.dynamic_roi or d.stat_list_index != -1:
            raise LoadableError(
                f"{where}: {d.num_rois} ROIs, dynamic ROI {d.dynamic_roi}, statistics list {d.stat_list_index}: "
                "only one static ROI without statistics is modelled (what NVIDIA's compiler writes: 1, 0, -1)"
            )
        for op in self.ops:
            if op.op_type not in PROCESSORS:
                raise LoadableError(
                    f"{where}: {op.name} runs on {op.op_type.name}, which the model does not have yet (modelled: "
                    f"{', '.join(k.name for k in PROCESSORS)})"
                )
            parent = op.common.fused_parent.index
            if parent >= 0 and (parent >= len(self.ops) or self.ops[parent].op_type != op.op_type - 1):
                raise LoadableError(  # scheduler.c dla_program_operation: "Invalid fused op type"
                    f"{where}: {op.name}'s fused parent is operation {parent}, not a {OpType(op.op_type - 1).name} "
                    "operation"
                    if op.op_type > 0
                    else f"{where}: {op.name} ({op.op_type.name}) has a fused parent"
                )
        self.deps = {op.index: op.common.dependency_count for op in self.ops}
        self.procs = {k: _State(p) for k, p in PROCESSORS.items()}
        self.done = 0
        self.mask = 0  # GLB S_INTR_MASK at reset; programming clears a processor's done bits (dla_enable_intr)
        self.enables: dict[int, int] = {}
        self.running: list[int] = []  # enabled, not completed, in enable order
        self.end_reads: list[tuple[int, tuple[int, ...]]] = []
        self.choices = 0
        self._links = self._on_the_fly()

    def run(self) -> FirmwareRun:
        for i, head in enumerate(self.net.desc.op_head):  # dla_initiate_processors
            if head < 0:
                continue
            if head >= len(self.ops):
                raise LoadableError(f"{self.net.loadable.path}: op_head[{i}] = {head}; the network has {len(self.ops)}")
            op = self.ops[head]
            self._submit(self.procs[op.op_type], op)
            self._dequeue(self.procs[op.op_type])
        while self.done < len(self.ops):
            if not self.running and any(g.completed for p in self.procs.values() for g in p.groups):
                # completed without hardware (a BDMA operation of no transfers): the firmware handles it at the
                # next interrupt, and with nothing running would wait for ever; the model handles it at once
                self._process_events()
                continue
            self._interrupt()
        return FirmwareRun(tuple(self.csb.commands), dict(self.enables), tuple(self.end_reads), self.choices)

    # -- programming (scheduler.c) --

    def _free_group(self, p: _State) -> tuple[int, int] | None:
        """engine.c utils_get_free_group: (group, rdma group), None when both are taken."""
        p.fw.read_pointers(self.csb, p.completed % 2, p.rdma_completed % 2)
        if p.group_status == 0x3:
            return None
        group = p.completed % 2 if not p.group_status else int(not (p.group_status >> 1))
        rdma_id = p.rdma_completed % 2 if not p.rdma_status else int(not (p.rdma_status >> 1))
        return group, rdma_id

    def _submit(self, p: _State, op: DlaOperation) -> None:
        """dla_submit_operation: prepare, program if ready, enable if no dependency is left."""
        free = self._free_group(p)
        if free is None:
            return
        g = p.groups[free[0]]
        g.op, g.rdma_id, g.pending = op, free[1], True
        p.group_status |= 1 << g.id
        g.rdma_needed = p.fw.rdma_needed(op)
        if g.rdma_needed:
            p.rdma_status |= 1 << g.rdma_id
        p.tail = op
        if not self._ready(p, g):
            return
        self._program(p, g)
        if self.deps[op.index] == 0:
            self._enable(p, op)

    def _dequeue(self, p: _State) -> None:
        """dla_dequeue_operation: the processor's next operation, the tail's consumer of its own type."""
        index = p.tail.common.consumers[p.fw.kind].index if p.tail is not None else -1
        if index < 0:
            return
        if index >= len(self.ops) or self.ops[index].op_type is not p.fw.kind:
            raise LoadableError(
                f"{self.net.loadable.path}: {p.tail.name}'s next {p.fw.kind.name} operation is {index}, not a "
                f"{p.fw.kind.name} operation of the network"
            )
        self._submit(p, self.ops[index])

    def _ready(self, p: _State, g: _Group) -> bool:
        other = p.groups[1 - g.id]
        return p.fw.ready(g.op, bool(p.group_status >> other.id & 1), other.active, other.lut_index)

    def _program(self, p: _State, g: _Group) -> None:
        """dla_program_operation: the producer pointers, the processor's registers, then OP_PROGRAMMED."""
        g.programming = True
        p.fw.set_producer(self.csb, g.id, g.rdma_id)
        mask = p.fw.masks(g.op)
        if mask is Mask.BEFORE:
            self._enable_intr(p.fw)
        p.fw.program(self.csb, self.target, g.op, g.id, g.rdma_needed, p.groups[1 - g.id].active)
        if mask is Mask.AFTER:
            self._enable_intr(p.fw)
        g.lut_index = p.fw.lut_index(g.op)
        g.pending = False
        self._update_consumers(g.op, Event.OP_PROGRAMMED)
        g.programming = False

    def _enable_intr(self, fw: FirmwareProcessor) -> None:
        """engine.c dla_enable_intr: read S_INTR_MASK, write it back with the processor's done bits cleared."""
        self.csb.read("GLB", "S_INTR_MASK", self.mask)
        self.mask &= ~(fw.done_bit(0) | fw.done_bit(1))
        self.csb.write("GLB", "S_INTR_MASK", self.mask)

    def _enable(self, p: _State, op: DlaOperation) -> None:
        """dla_enable_operation: the group holding `op`, programmed and not active, is enabled."""
        g = next((g for g in p.groups if p.group_status >> g.id & 1 and g.op is op and not g.pending), None)
        if g is None or g.active or g.programming:
            return  # programmed later (or being programmed): enabled where its programming returns
        p.fw.set_producer(self.csb, g.id, g.rdma_id)
        at = p.fw.enable(self.csb, op, g.id, g.rdma_needed)
        g.active, g.early_seen = True, not p.fw.early
        if at is None:
            g.completed = True
        else:
            self.enables[op.index] = at
            self.running.append(op.index)
        self._update_consumers(op, Event.OP_ENABLED)

    def _update_consumers(self, op: DlaOperation, event: Event) -> None:
        """dla_update_consumers: each consumer (and the fused parent) waiting for `event` counts down, and
        is enabled at zero."""
        for index, wanted in op.consumers() + _fused(op):
            if wanted is not event:
                continue
            if index >= len(self.ops) or self.deps[index] <= 0:
                raise LoadableError(
                    f"{self.net.loadable.path}: {op.name} signals operation {index} on {event.name}, which has no "
                    "dependency left to count down"
                )
            self.deps[index] -= 1
            if self.deps[index] == 0:
                target = self.ops[index]
                self._enable(self.procs[target.op_type], target)

    # -- the interrupt (engine_isr.c) and the events (scheduler.c dla_process_events) --

    def _on_the_fly(self) -> dict[int, set[int]]:
        """Operations joined on the fly (an operation reading from its fused parent), both ways."""
        linked: dict[int, set[int]] = {}
        for op in self.ops:
            parent = op.common.fused_parent.index
            if parent >= 0 and op.source is not None and op.source.type == MemType.HW:
                linked.setdefault(op.index, set()).add(parent)
                linked.setdefault(parent, set()).add(op.index)
        return linked

    def _chain(self, i: int) -> list[int]:
        chain, todo = {i}, [i]
        while todo:
            for j in self._links.get(todo.pop(), ()):
                if j not in chain:
                    chain.add(j)
                    todo.append(j)
        return sorted(chain, key=lambda j: self.running.index(j) if j in self.running else len(self.running))

    def _group_of(self, i: int) -> tuple[_State, _Group]:
        p = self.procs[self.ops[i].op_type]
        return p, next(g for g in p.groups if g.op is not None and g.op.index == i)

    def _candidates(self) -> list[End]:
        """What can raise the next interrupt: a running operation's early interrupts, or the end of a chain
        of operations that end together (each processor's oldest running operation, with the operations it
        feeds or is fed by on the fly, all of them running and past their early interrupts)."""
        heads: dict[OpType, int] = {}
        for i in self.running:
            heads.setdefault(self.ops[i].op_type, i)
        head_set = set(heads.values())
        out, seen = [], set()
        for i in self.running:
            if not self._group_of(i)[1].early_seen:
                out.append(End((i,), early=True))
        for i in self.running:
            if i in head_set and i not in seen:
                chain = self._chain(i)
                if all(j in head_set and self._group_of(j)[1].early_seen for j in chain):
                    out.append(End(tuple(chain)))
                    seen |= set(chain)
        return sorted(out, key=lambda e: min(self.running.index(j) for j in e.ops))

    def _interrupt(self) -> None:
        candidates = self._candidates()
        if not candidates:
            waiting = [op.name for op in self.ops if self.deps[op.index] > 0]
            raise LoadableError(
                f"{self.net.loadable.path}: the firmware waits for an interrupt, but no enabled operation can "
                f"raise one ({len(self.ops) - self.done} operations left; waiting on dependencies: "
                f"{', '.join(waiting[:5]) or 'none'})"
            )
        self.choices += len(candidates) > 1
        nxt = self.end_order(candidates) if len(candidates) > 1 else candidates[0]
        status = 0
        for i in nxt.ops:
            p, g = self._group_of(i)
            if nxt.early:
                status |= p.fw.early_bits(g.id)
                g.early |= {event for _, event in p.fw.early}
                g.early_seen = True
                continue
            status |= p.fw.done_bit(g.id)
            g.completed = True
            self.running.remove(i)
            p.completed += 1
            p.rdma_completed += g.rdma_needed
        # dla_isr_handler
        self.csb.read("GLB", "S_INTR_MASK", self.mask)
        self.csb.read("GLB", "S_INTR_STATUS", status)
        if not nxt.early:
            self.end_reads.append((len(self.csb.commands) - 1, nxt.ops))
        self.csb.write("GLB", "S_INTR_STATUS", status)
        self.csb.read("GLB", "S_INTR_MASK", self.mask)
        self.csb.read("GLB", "S_INTR_STATUS", 0)
        self._process_events()

    def _process_events(self) -> None:
        """dla_process_events: each processor in DLA_OP order, its groups from the one after the last done."""
        for kind in sorted(self.procs):
            p = self.procs[kind]
            gid = 1 - p.last_group
            for _ in range(2):
                g = p.groups[gid]
                for event in (Event.CDMA_WT_DONE, Event.CDMA_DT_DONE):  # dla_handle_events' order
                    if event in g.early:
                        self._update_consumers(g.op, event)
                g.early.clear()
                if g.completed:
                    g.completed = False
                    self._completion(p, g)
                gid = 1 - gid

    def _completion(self, p: _State, g: _Group) -> None:
        """dla_op_completion: free the group, signal the consumers, program a pending group, dequeue."""
        op = g.op
        self.done += 1
        p.group_status &= ~(1 << g.id)
        if g.rdma_needed:
            g.rdma_needed = False
            p.rdma_status &= ~(1 << g.rdma_id)
            g.rdma_id = 0
        g.active, g.lut_index, g.op = False, -1, None
        p.last_group = g.id
        self._update_consumers(op, Event.OP_COMPLETED)
        if self.done == len(self.ops):
            return
        nxt = p.groups[1 - g.id]
        if nxt.pending and self._ready(p, nxt):
            self._program(p, nxt)
            if self.deps[nxt.op.index] == 0:
                self._enable(p, nxt.op)
        self._dequeue(p)
