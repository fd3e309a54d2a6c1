"""A loadable's container: the flatbuffer NVIDIA's compiler writes (`nvdla_compiler` -> `*.nvdla`, and
nvdla/sw's regression/flatbufs), read into typed entries.

The layout is nvdla/sw `umd/core/src/common/loadable.fbs` (namespace nvdla.loadable, version 0.7.0): a
root `Loadable` table of lists — tasks, memories, addresses, events, blobs, tensor descriptions,
relocations and submits. Each table field is read by its slot (the field's order in the schema) with the
`flatbuffers` runtime; a field the writer left out has the schema's default. The firmware descriptors a
DLA task points at (network, operations, surfaces, dependency graph, LUTs) are blobs of C structs, read by
nvdla_sim.program.loadable.descriptors.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import flatbuffers
from flatbuffers import number_types as fb_types
from flatbuffers.table import Table

from nvdla_sim.errors import NvdlaError

T = TypeVar("T")

# the loadable.fbs versions this reader knows (LoadableVersionMajor/Minor/SubMinor)
LOADABLE_VERSION = (0, 7, 0)
MAX_MEMORY_BYTES = 1 << 32  # a memory entry NVDLA can address (its DMA addresses of the driver's buffers)


class LoadableError(NvdlaError):
    """A loadable is not a flatbuffer of loadable.fbs, or refers to entries it lacks."""


class Interface(enum.IntEnum):
    """Who a task or a blob is for (loadable.fbs Interface)."""

    NONE = 0  # raw data: weights, an input image
    DLA1 = 1  # the DLA firmware
    EMU1 = 2  # the CPU emulator (software layers)


class MemoryDomain(enum.IntEnum):
    SYSTEM = 0  # DRAM
    SRAM = 1  # the DLA's second memory interface (CV-SRAM)


class MemoryFlags(enum.IntFlag):
    NONE = 0
    ALLOC = 1  # allocate the region
    SET = 2  # fill it from the blobs named in `contents`, at `offsets`
    INPUT = 4  # a top-level input the caller binds
    OUTPUT = 8  # a top-level output the caller binds


class EventOp(enum.IntEnum):
    WAIT = 0
    SIGNAL = 1


class DataType(enum.IntEnum):
    UNKNOWN = 0
    FLOAT = 1
    HALF = 2
    INT16 = 3
    INT8 = 4


class DataCategory(enum.IntEnum):
    IMAGE = 0
    WEIGHT = 1
    FEATURE = 2
    PLANAR = 3
    BIAS = 4


@dataclass(frozen=True)
class Version:
    major: int
    minor: int
    sub_minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.sub_minor}"


@dataclass(frozen=True)
class TaskEntry:
    id: int
    interface: Interface
    instance: int  # -1: any DLA instance
    address_list: tuple[int, ...]  # AddressEntry ids the task's descriptors index (dla_data_cube.address)
    pre_actions: tuple[int, ...]  # EventEntry ids waited for before it runs
    post_actions: tuple[int, ...]  # EventEntry ids signalled after it


@dataclass(frozen=True)
class MemoryEntry:
    id: int
    domain: MemoryDomain
    flags: MemoryFlags
    size: int
    alignment: int
    contents: tuple[str, ...]  # blob names, with SET
    offsets: tuple[int, ...]  # where each blob goes in the region
    bind_id: int
    tensor_desc_id: int


@dataclass(frozen=True)
class AddressEntry:
    id: int
    mem_id: int
    offset: int
    size: int


@dataclass(frozen=True)
class EventEntry:
    id: int
    type: int
    target: int
    value: int
    op: EventOp


@dataclass(frozen=True)
class Blob:
    name: str
    size: int
    interface: Interface
    # what a firmware blob holds (NvDlaLoadable.h SUB_INTERFACE_DLA1_*: 1 network, 2 dependency graph, 3 ops,
    # 4 surfaces, 5 LUTs), where the writer set it (nvdla_compiler's whole networks leave it 0); the task's
    # address list, not this, says which blob is which (network.dla_network)
    sub_interface: int
    version: Version | None  # the firmware interface version the blob was written for
    data: bytes


@dataclass(frozen=True)
class TensorDesc:
    name: str
    id: int
    mem_id: int
    size: int
    offset: int
    data_format: int  # 1 NCHW, 2 NHWC
    data_type: DataType
    data_category: DataCategory
    pixel_format: int  # loadable.fbs PixelFormat (36: FEATURE)
    pixel_mapping: int
    nchw: tuple[int, int, int, int]
    strides: tuple[int, ...]  # stride_0..7, bytes


@dataclass(frozen=True)
class RelocEntry:
    address_id: int
    write_id: int
    offset: int
    interface: int
    sub_interface: int
    reloc_type: int


@dataclass(frozen=True)
class SubmitEntry:
    id: int
    task_ids: tuple[int, ...]  # tasks that may be submitted together


@dataclass(frozen=True)
class Loadable:
    """What a loadable holds, entry by entry (loadable.fbs)."""

    path: str
    version: Version
    tasks: tuple[TaskEntry, ...]
    memories: tuple[MemoryEntry, ...]
    addresses: tuple[AddressEntry, ...]
    events: tuple[EventEntry, ...]
    blobs: tuple[Blob, ...]
    tensors: tuple[TensorDesc, ...]
    relocs: tuple[RelocEntry, ...]
    submits: tuple[SubmitEntry, ...]

    def blob(self, name: str) -> Blob:
        return _find(self.blobs, "name", name, f"{self.path}: no blob named {name!r}")

    def memory(self, mem_id: int) -> MemoryEntry:
        return _find(
            self.memories, "id", mem_id, f"{self.path}: no memory entry {mem_id} (it has {len(self.memories)})"
        )

    def address(self, address_id: int) -> AddressEntry:
        why = f"{self.path}: no address entry {address_id} (it has {len(self.addresses)})"
        return _find(self.addresses, "id", address_id, why)

    def contents(self, mem_id: int) -> bytes:
        """A memory region's initial bytes: its SET blobs at their offsets, zeros elsewhere."""
        return self._region(self.memory(mem_id), 0, None)

    def address_bytes(self, address_id: int) -> bytes:
        """The initial bytes an address entry points at: its memory's from its offset, its size (size 0:
        to the memory's end, as nvdla_compiler writes the entries of its descriptor blobs)."""
        a = self.address(address_id)
        m = self.memory(a.mem_id)
        end = m.size if a.size == 0 else a.offset + a.size
        if a.offset > m.size or end > m.size:
            raise LoadableError(f"{self.path}: address entry {a.id} ({a.offset}+{a.size}) overruns memory {a.mem_id}")
        return self._region(m, a.offset, end)

    def _region(self, m: MemoryEntry, start: int, end: int | None) -> bytes:
        """Bytes start..end (None: its size) of memory `m` as loaded: the parts of its SET blobs that fall
        there, zeros elsewhere (only the range asked for is built)."""
        if m.size > MAX_MEMORY_BYTES:
            raise LoadableError(f"{self.path}: memory {m.id} is {m.size:,} bytes; NVDLA addresses at most 4 GiB")
        if MemoryFlags.SET in m.flags and len(m.contents) != len(m.offsets):
            raise LoadableError(
                f"{self.path}: memory {m.id} names {len(m.contents)} blobs but {len(m.offsets)} offsets for them"
            )
        end = m.size if end is None else end
        region = bytearray(end - start)
        if MemoryFlags.SET in m.flags:
            for name, offset in zip(m.contents, m.offsets, strict=True):
                data = self.blob(name).data
                if offset + len(data) > m.size:
                    raise LoadableError(
                        f"{self.path}: blob {name!r} ({len(data)} bytes at {offset}) overruns memory {m.id} ({m.size} bytes)"
                    )
                lo, hi = max(offset, start), min(offset + len(data), end)
                if lo < hi:
                    region[lo - start : hi - start] = data[lo - offset : hi - offset]
        return bytes(region)


def _find(entries, key: str, value, missing: str):
    """The entry whose `key` field is `value`, else a LoadableError saying `missing`."""
    for e in entries:
        if getattr(e, key) == value:
            return e
    raise LoadableError(missing)


# ---- the flatbuffer's tables, read by field slot ------------------------------------------------------


class _Reader:
    """One table of the buffer: its fields read by slot (the n-th field of the schema's table)."""

    def __init__(self, table: Table, where: str) -> None:
        self.t, self.where = table, where

    def _offset(self, slot: int) -> int:
        return self.t.Offset(4 + 2 * slot)

    def scalar(self, slot: int, kind, default: int = 0) -> int:
        o = self._offset(slot)
        return self.t.Get(kind, self.t.Pos + o) if o else default

    def string(self, slot: int) -> str:
        o = self._offset(slot)
        return self.t.String(self.t.Pos + o).decode("utf-8", "replace") if o else ""

    def version(self, slot: int) -> Version | None:
        """A Version struct (three ubytes, inline in the table)."""
        o = self._offset(slot)
        if not o:
            return None
        at = self.t.Pos + o
        b = self.t.Bytes
        return Version(b[at], b[at + 1], b[at + 2])

    def scalars(self, slot: int, kind) -> tuple[int, ...]:
        o = self._offset(slot)
        if not o:
            return ()
        start, n, size = self.t.Vector(o), self.t.VectorLen(o), kind.bytewidth
        return tuple(self.t.Get(kind, start + i * size) for i in range(n))

    def strings(self, slot: int) -> tuple[str, ...]:
        o = self._offset(slot)
        if not o:
            return ()
        start, n = self.t.Vector(o), self.t.VectorLen(o)
        return tuple(self.t.String(start + 4 * i).decode("utf-8", "replace") for i in range(n))

    def ubytes(self, slot: int) -> bytes:
        o = self._offset(slot)
        if not o:
            return b""
        start, n = self.t.Vector(o), self.t.VectorLen(o)
        if start + n > len(self.t.Bytes):
            raise LoadableError(f"{self.where}: a {n:,}-byte vector runs past the file's end (truncated?)")
        return bytes(self.t.Bytes[start : start + n])

    def tables(self, slot: int, read: Callable[[_Reader], T], what: str) -> tuple[T, ...]:
        o = self._offset(slot)
        if not o:
            return ()
        start, n = self.t.Vector(o), self.t.VectorLen(o)
        out = []
        for i in range(n):
            at = start + 4 * i
            out.append(read(_Reader(Table(self.t.Bytes, self.t.Indirect(at)), f"{self.where} {what}[{i}]")))
        return tuple(out)


def _enum(kind: type[T], value: int, r: _Reader, field: str) -> T:
    try:
        return kind(value)  # type: ignore[call-arg]
    except ValueError:
        valid = ", ".join(f"{e.value} ({e.name})" for e in kind)  # type: ignore[attr-defined]
        raise LoadableError(f"{r.where}: {field} {value} is not one of {valid}") from None


U8, U16, I16, U32, I32, U64 = (
    fb_types.Uint8Flags, fb_types.Uint16Flags, fb_types.Int16Flags, fb_types.Uint32Flags, fb_types.Int32Flags,
    fb_types.Uint64Flags,
)  # fmt: skip


def _task(r: _Reader) -> TaskEntry:
    return TaskEntry(
        r.scalar(0, U16), _enum(Interface, r.scalar(1, U32), r, "interface"), r.scalar(2, I16),
        r.scalars(3, U16), r.scalars(4, U16), r.scalars(5, U16),
    )  # fmt: skip


def _memory(r: _Reader) -> MemoryEntry:
    return MemoryEntry(
        r.scalar(0, U16), _enum(MemoryDomain, r.scalar(1, U8), r, "domain"), MemoryFlags(r.scalar(2, U16)),
        r.scalar(3, U64), r.scalar(4, U32), r.strings(5), r.scalars(6, U64), r.scalar(7, U16), r.scalar(8, U16),
    )  # fmt: skip


def _address(r: _Reader) -> AddressEntry:
    return AddressEntry(r.scalar(0, U16), r.scalar(1, U16), r.scalar(2, U64), r.scalar(3, U64))


def _event(r: _Reader) -> EventEntry:
    return EventEntry(
        r.scalar(0, U16), r.scalar(1, U8), r.scalar(2, U16), r.scalar(3, U32), _enum(EventOp, r.scalar(4, U8), r, "op")
    )


def _blob(r: _Reader) -> Blob:
    interface = _enum(Interface, r.scalar(2, U32), r, "interface")
    blob = Blob(r.string(0), r.scalar(1, U64), interface, r.scalar(3, U32), r.version(4), r.ubytes(5))
    if blob.size != len(blob.data):
        raise LoadableError(f"{r.where} ({blob.name!r}): size {blob.size:,} but {len(blob.data):,} bytes of data")
    return blob


def _tensor(r: _Reader) -> TensorDesc:
    return TensorDesc(
        r.string(0), r.scalar(1, U16), r.scalar(2, U16), r.scalar(3, U64), r.scalar(4, U64), r.scalar(5, U8),
        _enum(DataType, r.scalar(6, U8), r, "data_type"), _enum(DataCategory, r.scalar(7, U8), r, "data_category"),
        r.scalar(8, U8), r.scalar(9, U8), tuple(r.scalar(i, I32) for i in range(10, 14)),
        tuple(r.scalar(i, U32) for i in range(14, 22)),
    )  # fmt: skip


def _reloc(r: _Reader) -> RelocEntry:
    return RelocEntry(
        r.scalar(0, U16), r.scalar(1, U16), r.scalar(2, U64), r.scalar(3, U32), r.scalar(4, U32), r.scalar(5, U8)
    )


def _submit(r: _Reader) -> SubmitEntry:
    return SubmitEntry(r.scalar(0, U16), r.scalars(1, U16))


def parse_loadable(data: bytes, path: str = "<bytes>") -> Loadable:
    """A loadable from its bytes; a one-line LoadableError for anything that is not one this reader knows."""
    if len(data) < 8:
        raise LoadableError(f"{path}: {len(data)} bytes is too short for a flatbuffer loadable")
    buf = bytearray(data)
    try:
        root = flatbuffers.encode.Get(fb_types.UOffsetTFlags.packer_type, buf, 0)
        r = _Reader(Table(buf, root), path)
        version = r.version(0)
        if version is None:
            raise LoadableError(f"{path}: no version (loadable.fbs requires one): not a loadable")
        if (version.major, version.minor) != LOADABLE_VERSION[:2]:
            want = ".".join(map(str, LOADABLE_VERSION))
            raise LoadableError(f"{path}: loadable version {version}; this reader knows {want} (nvdla/sw loadable.fbs)")
        return Loadable(
            path, version, r.tables(1, _task, "task_list"), r.tables(2, _memory, "memory_list"),
            r.tables(3, _address, "address_list"), r.tables(4, _event, "event_list"), r.tables(5, _blob, "blobs"),
            r.tables(6, _tensor, "tensor_desc_list"), r.tables(7, _reloc, "reloc_list"),
            r.tables(8, _submit, "submit_list"),
        )  # fmt: skip
    except LoadableError:
        raise
    except (IndexError, ValueError, OverflowError, TypeError, struct.error) as e:  # not a flatbuffer of this schema
        raise LoadableError(f"{path}: not a loadable flatbuffer (nvdla/sw loadable.fbs): {e}") from None


def read_loadable(path: str | Path) -> Loadable:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise LoadableError(f"{p}: cannot read the loadable: {e.strerror or e}") from None
    return parse_loadable(data, str(p))
