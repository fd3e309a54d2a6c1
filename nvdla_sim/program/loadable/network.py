"""A loadable's DLA task as the firmware sees it: the network descriptor, and each operation's common,
op and surface descriptors, with every data cube's address resolved to its memory.

The firmware (nvdla/sw kmd/firmware scheduler.c, dla_read_network_config) reads the network descriptor
from the task's first address entry; its *_index fields name the address entries of the dependency
graph, the operation and surface lists and the LUTs; operation i is entry i of each list
(`sizeof(union dla_operation_container)` apart), and a data cube's `address` is an entry of the same
address list, its `offset` bytes into it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nvdla_sim.program.loadable.container import Interface, Loadable, LoadableError, MemoryFlags, TaskEntry
from nvdla_sim.program.loadable.descriptors import (
    LATEST,
    OLDEST,
    OP_DESC,
    SURFACE_DESC,
    CommonOpDesc,
    DataCube,
    Event,
    LutParam,
    MemType,
    NetworkDesc,
    OpType,
    op_container_size,
    sizeof,
    surface_container_size,
    unpack,
)


@dataclass(frozen=True)
class CubePlace:
    """Where a data cube lives: the memory entry and the byte offset in it (the address entry's offset
    plus the cube's own), or on the fly (MemType.HW: no memory)."""

    mem_type: MemType
    mem_id: int | None
    offset: int


@dataclass(frozen=True)
class DlaOperation:
    index: int  # in the dependency graph
    op_type: OpType
    common: CommonOpDesc
    op: Any  # descriptors.OP_DESC[op_type]
    surface: Any  # descriptors.SURFACE_DESC[op_type]

    @property
    def name(self) -> str:
        return f"{self.op_type.name.lower()}{self.index}"

    @property
    def source(self) -> DataCube | None:
        """The cube it reads (None: BDMA, whose transfers say)."""
        return getattr(self.surface, "src_data", None)

    @property
    def destination(self) -> DataCube | None:
        return getattr(self.surface, "dst_data", None)

    def consumers(self) -> tuple[tuple[int, Event], ...]:
        """(operation index, event) of each operation it signals."""
        return tuple(
            (c.index, Event(c.event) if c.event in Event._value2member_map_ else Event.NONE)
            for c in self.common.consumers
            if c.index >= 0
        )


@dataclass(frozen=True)
class DlaNetwork:
    loadable: Loadable
    task: TaskEntry
    desc: NetworkDesc
    operations: tuple[DlaOperation, ...]
    luts: tuple[LutParam, ...]
    interface: tuple[int, int]  # the firmware interface version its descriptors were read at

    def place(self, cube: DataCube) -> CubePlace:
        """Where `cube` is: its memory and offset, from the task's address list."""
        kind = MemType(cube.type) if cube.type in MemType._value2member_map_ else None
        if kind is None:
            raise LoadableError(
                f"{self.loadable.path}: data cube memory type {cube.type} is not 0 (DRAM), 1 (SRAM) or 2 (on the fly)"
            )
        if kind is MemType.HW or cube.address < 0:
            return CubePlace(kind, None, cube.offset)
        entry = self.loadable.address(_entry(self.task, self.loadable.path, cube.address, "data cube"))
        return CubePlace(kind, entry.mem_id, entry.offset + cube.offset)

    def cube_text(self, cube: DataCube | None) -> str:
        """`28x28x1 mem2+0`, `24x24x20 on the fly`."""
        if cube is None:
            return "-"
        place = self.place(cube)
        where = "on the fly" if place.mem_id is None else f"mem{place.mem_id}+{place.offset}"
        if place.mem_type is MemType.CV:
            where += " (SRAM)"
        return f"{cube.whc} {where}"

    def inputs(self) -> tuple[int, ...]:
        """Memory entries the caller binds as inputs (MemoryFlags.INPUT)."""
        return tuple(m.id for m in self.loadable.memories if MemoryFlags.INPUT in m.flags)

    def outputs(self) -> tuple[int, ...]:
        """Memory entries the caller binds as outputs (MemoryFlags.OUTPUT)."""
        return tuple(m.id for m in self.loadable.memories if MemoryFlags.OUTPUT in m.flags)


def _entry(task: TaskEntry, path: str, index: int, what: str) -> int:
    """The address entry id at `index` of the task's address list (`what` it is for the error)."""
    if not 0 <= index < len(task.address_list):
        raise LoadableError(
            f"{path}: task {task.id}'s {what} is address list entry {index}; the task has {len(task.address_list)}"
        )
    return task.address_list[index]


def dla_tasks(loadable: Loadable) -> tuple[TaskEntry, ...]:
    return tuple(t for t in loadable.tasks if t.interface is Interface.DLA1)


def dla_network(loadable: Loadable, task_id: int | None = None) -> DlaNetwork:
    """The DLA task `task_id` (default: the loadable's only DLA task) as the firmware reads it."""
    tasks = dla_tasks(loadable)
    if not tasks:
        kinds = ", ".join(sorted({t.interface.name for t in loadable.tasks})) or "none"
        raise LoadableError(f"{loadable.path}: no DLA task (tasks for: {kinds})")
    if task_id is None:
        if len(tasks) > 1:
            ids = ", ".join(str(t.id) for t in tasks)
            raise LoadableError(f"{loadable.path}: {len(tasks)} DLA tasks ({ids}); choose one")
        task = tasks[0]
    else:
        found = [t for t in tasks if t.id == task_id]
        if not found:
            raise LoadableError(
                f"{loadable.path}: no DLA task {task_id} (DLA tasks: {', '.join(str(t.id) for t in tasks)})"
            )
        task = found[0]

    def blob(index: int, what: str) -> bytes:
        return loadable.address_bytes(_entry(task, loadable.path, index, what))

    version = _interface(loadable, _entry(task, loadable.path, 0, "network descriptor"))
    try:
        desc = unpack(NetworkDesc, blob(0, "network descriptor"), 0, version)
        n = desc.num_operations
        deps = blob(desc.dependency_graph_index, "dependency graph")
        ops = blob(desc.operation_desc_index, "operation list")
        surfs = blob(desc.surface_desc_index, "surface list")
        op_size, surface_size = op_container_size(version), surface_container_size(version)
        operations = []
        for i in range(n):
            common = unpack(CommonOpDesc, deps, i * sizeof(CommonOpDesc, version), version)
            if common.op_type not in OpType._value2member_map_:
                raise LoadableError(
                    f"{loadable.path}: operation {i} has op_type {common.op_type}; valid 0..5 (DLA_OP_*)"
                )
            kind = OpType(common.op_type)
            op = unpack(OP_DESC[kind], ops, i * op_size, version)
            surface = unpack(SURFACE_DESC[kind], surfs, i * surface_size, version)
            operations.append(DlaOperation(i, kind, common, op, surface))
        luts: tuple[LutParam, ...] = ()
        if desc.num_luts:
            data = blob(desc.lut_data_index, "LUT list")
            luts = tuple(unpack(LutParam, data, i * sizeof(LutParam, version), version) for i in range(desc.num_luts))
    except ValueError as e:  # a blob shorter than its descriptors
        raise LoadableError(f"{loadable.path}: task {task.id}: {e}") from None
    return DlaNetwork(loadable, task, desc, tuple(operations), luts, version)


def _interface(loadable: Loadable, address_id: int) -> tuple[int, int]:
    """The firmware interface version (major, minor) of the network descriptor's blob; the latest this reader
    follows where the blob declares none (0.0.0)."""
    memory = loadable.memory(loadable.address(address_id).mem_id)
    for name in memory.contents:
        v = loadable.blob(name).version
        if v is not None and (v.major, v.minor, v.sub_minor) != (0, 0, 0):
            found = (v.major, v.minor)
            if not OLDEST <= found <= LATEST:
                known = f"{'.'.join(map(str, OLDEST))} to {'.'.join(map(str, LATEST))}"
                raise LoadableError(
                    f"{loadable.path}: blob {name!r} is for firmware interface {v}; this reader knows {known}"
                )
            return found
    return LATEST
