"""A loadable's CPU tasks (interface EMU1): the operations NVIDIA's runtime runs on the host between DLA tasks
(nvdla/sw umd/core/src/runtime/Emulator.cpp: power and softmax), executed on the loadable's memories.

Each task's network descriptor is its address entry 0 (emu_network_desc: the indices of its operation
and buffer lists, and their count); operation i is the i-th union of the operation list (emu_power_op_desc
or emu_softmax_op_desc) and of the buffer list (a source and a destination emu_buffer_desc, each aligned to
256 bytes). Two layouts exist under the same emulator version 0.0.1:

* nvdla/sw's regression loadables (2018): an operation is its type byte and then its fields, packed, in a
  16-byte union (power: power, scale, shift; softmax: axis); a buffer is {address index, size, format,
  width, height, channel, line stride, surface stride}, the format as EMUInterfaceEnums' DLA_FEATURE_*
  (0 INT8, 1 INT16, 2 FP16);
* the open compiler (2019, emu_interface.h): the type byte is followed by the INT8 input and output scale
  factors (a 24-byte union); a buffer has an offset after its address index, and the formats are numbered
  EMU_FORMAT_* (EMUInterface.h: 0 INT8, 1 INT8_8, 2 INT16, 3 FF16, ...).

A task's buffers are read in the layout whose fields are consistent with their memories, and its
operations in the same one.

Arithmetic as the runtime's: FP32 (numpy float32: its exp may differ from glibc's expf in the last bit of
FP32, below what an FP16 result keeps except on a rounding edge) and FP16 results rounded as nvdla/sw's
half.h does (to nearest, ties away). The tasks' time is the host's, not modelled here.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

import numpy as np

from nvdla_sim.floats import fp16_round_away
from nvdla_sim.program.loadable.container import Interface, Loadable, LoadableError, TaskEntry
from nvdla_sim.program.loadable.firmware.base import MemoryLayout
from nvdla_sim.registers.trace_io import SparseMemory

BUFFER_ALIGN = 256  # emu_buffer_desc and emu_network_desc: __attribute__((packed, aligned(256)))
_COMMON = {2018: struct.Struct("<B"), 2019: struct.Struct("<Bff")}  # op type (2019: input/output scale)
_POWER = struct.Struct("<fff")  # power, scale, shift
_OP_SIZE = {2018: 16, 2019: 24}  # union emu_operation_container: the power op's fields, aligned to 4


class EmuOp(enum.IntEnum):
    POWER = 0  # NVDLA_EMU_OP_POWER: (shift + scale x) ** power
    SOFTMAX = 1  # NVDLA_EMU_OP_SOFTMAX


class EmuFormat(enum.Enum):
    INT8 = "int8"  # 32 channels to a 32-byte group
    INT8_8 = "int8 x8"  # 8 channels to an 8-byte group
    FP16 = "fp16"  # 16 channels to a 32-byte group


# each layout's format numbers (the others are refused)
_FORMATS_2018 = {0: EmuFormat.INT8, 2: EmuFormat.FP16}  # EMUInterfaceEnums DLA_FEATURE_*_FORMAT
_FORMATS_2019 = {0: EmuFormat.INT8, 1: EmuFormat.INT8_8, 3: EmuFormat.FP16}  # EMUInterface.h EMU_FORMAT_*
_LAYOUT_2018 = struct.Struct("<hIHHHHII")
_LAYOUT_2019 = struct.Struct("<hIIHHHHII")


@dataclass(frozen=True)
class EmuBuffer:
    address_index: int  # in the task's address list
    offset: int
    size: int
    format: EmuFormat
    width: int
    height: int
    channel: int
    line_stride: int
    surf_stride: int

    @property
    def bytes_per_element(self) -> int:
        return 2 if self.format is EmuFormat.FP16 else 1

    def offsets(self, dims: tuple[int, int, int] | None = None) -> np.ndarray:
        """Byte offsets of the elements in C, H, W order (Emulator::getAddrOffset: 32-byte groups, or 8 for
        INT8_8); `dims` (channel, height, width) another buffer's, as the runtime walks the source's over
        the destination."""
        bpe = self.bytes_per_element
        group = (8 if self.format is EmuFormat.INT8_8 else 32) // bpe
        nc, nh, nw = dims or (self.channel, self.height, self.width)
        c, h, w = np.meshgrid(np.arange(nc), np.arange(nh), np.arange(nw), indexing="ij")
        return (c // group) * self.surf_stride + h * self.line_stride + w * group * bpe + (c % group) * bpe


@dataclass(frozen=True)
class EmuOperation:
    op: EmuOp
    input_scale: float
    output_scale: float
    power: float
    scale: float
    shift: float
    src: EmuBuffer
    dst: EmuBuffer


def _buffer(data: bytes, where: str, memory_size) -> tuple[EmuBuffer, int]:
    """A buffer descriptor in whichever layout (2018 or 2019) is consistent with its memory (module
    docstring), and that layout's year."""
    found = []
    for year, layout, formats in ((2018, _LAYOUT_2018, _FORMATS_2018), (2019, _LAYOUT_2019, _FORMATS_2019)):
        has_offset = year == 2019
        fields = list(layout.unpack_from(data.ljust(layout.size, b"\0"), 0))
        offset = fields.pop(1) if has_offset else 0
        index, size, fmt, w, h, c, line, surf = fields
        if fmt not in formats or min(w, h, c) < 1 or index < 0:
            continue
        buf = EmuBuffer(index, offset, size, formats[fmt], w, h, c, line, surf)
        need = int(buf.offsets().max()) + buf.bytes_per_element
        if need <= size and offset + size <= memory_size(index):
            found.append((buf, year))
    if len(found) != 1:
        raise LoadableError(f"{where}: an emu_buffer_desc in {'neither' if not found else 'both'} known layout(s)")
    return found[0]


def emu_operations(loadable: Loadable, task: TaskEntry) -> tuple[EmuOperation, ...]:
    """The CPU task's operations, read as the runtime's Emulator::processTask reads them."""
    where = f"{loadable.path}: task {task.id} (EMU1)"

    def entry(index: int) -> bytes:
        if not 0 <= index < len(task.address_list):
            raise LoadableError(f"{where}: address list entry {index}; the task has {len(task.address_list)}")
        return loadable.address_bytes(task.address_list[index])

    def memory_size(index: int) -> int:
        if not 0 <= index < len(task.address_list):
            return -1
        a = loadable.address(task.address_list[index])
        return loadable.memory(a.mem_id).size - a.offset

    net = entry(0)
    if len(net) < 6:
        raise LoadableError(f"{where}: its network descriptor holds {len(net)} bytes, not 6")
    op_index, buffer_index, count = struct.unpack_from("<hhH", net, 0)
    ops, buffers = entry(op_index), entry(buffer_index)
    out = []
    for i in range(count):
        at = 2 * i * BUFFER_ALIGN
        src, year = _buffer(buffers[at : at + BUFFER_ALIGN], f"{where} operation {i} source", memory_size)
        dst, dst_year = _buffer(buffers[at + BUFFER_ALIGN : at + 2 * BUFFER_ALIGN], f"{where} operation {i} "
                                "destination", memory_size)  # fmt: skip
        if dst_year != year:
            raise LoadableError(f"{where}: operation {i}'s buffers are in two layouts ({year}, {dst_year})")
        size, common = _OP_SIZE[year], _COMMON[year]
        raw = ops[i * size : (i + 1) * size]
        if len(raw) < size:
            raise LoadableError(f"{where}: operation {i} needs {size} bytes of its list; it holds {len(raw)}")
        kind, *scales = common.unpack_from(raw, 0)
        if kind not in EmuOp._value2member_map_:  # the runtime skips it (its output left as it was): refused here
            raise LoadableError(f"{where}: operation {i} has type {kind}; known: 0 power, 1 softmax")
        in_scale, out_scale = scales or (1.0, 1.0)
        power, scale, shift = _POWER.unpack_from(raw, common.size) if kind == EmuOp.POWER else (0.0, 0.0, 0.0)
        if src.format is not dst.format:
            raise LoadableError(
                f"{where}: operation {i} converts {src.format.value} to {dst.format.value} (the runtime refuses)"
            )
        out.append(EmuOperation(EmuOp(kind), in_scale, out_scale, power, scale, shift, src, dst))
    return tuple(out)


def _read(mem: SparseMemory, addr: int, buf: EmuBuffer, offsets: np.ndarray) -> np.ndarray:
    raw = mem.read(addr, buf.size)
    if buf.format is EmuFormat.FP16:
        return np.stack([raw[offsets], raw[offsets + 1]], axis=-1).view(np.float16)[..., 0].astype(np.float32)
    return raw[offsets].view(np.int8).astype(np.float32)


def _write(mem: SparseMemory, addr: int, buf: EmuBuffer, offsets: np.ndarray, values: np.ndarray) -> None:
    raw = mem.read(addr, buf.size)
    if buf.format is EmuFormat.FP16:
        pairs = fp16_round_away(values).view(np.uint8).reshape(*values.shape, 2)
        raw[offsets], raw[offsets + 1] = pairs[..., 0], pairs[..., 1]
    else:  # saturate<NvF32, NvS8> (nvdla/sw priv/Type.h): clamped, then cast, truncating toward zero
        raw[offsets] = np.trunc(np.clip(values, -128, 127)).astype(np.int8).view(np.uint8)
    mem.write(addr, raw)


def run_emu_task(loadable: Loadable, task: TaskEntry, layout: MemoryLayout, mem: SparseMemory) -> int:
    """Execute a CPU task's operations on `mem` (modified in place); the number of operations."""
    if task.interface is not Interface.EMU1:
        raise LoadableError(f"{loadable.path}: task {task.id} is for {task.interface.name}, not the CPU (EMU1)")
    ops = emu_operations(loadable, task)
    for o in ops:
        src_addr = layout.address(o.src.address_index, task) + o.src.offset
        dst_addr = layout.address(o.dst.address_index, task) + o.dst.offset
        fp16 = o.src.format is EmuFormat.FP16
        if o.op is EmuOp.POWER:  # Emulator::executePower, element by element over the source's C, H, W
            src_off = o.src.offsets()
            dst_off = o.dst.offsets((o.src.channel, o.src.height, o.src.width))
            if int(dst_off.max()) + o.dst.bytes_per_element > o.dst.size:
                raise LoadableError(
                    f"{loadable.path}: task {task.id}: the power's destination is smaller than its source"
                )
            x = _read(mem, src_addr, o.src, src_off)
            if not fp16:
                x = x * np.float32(o.input_scale)
            with np.errstate(all="ignore"):
                y = np.power(np.float32(o.shift) + np.float32(o.scale) * x, np.float32(o.power), dtype=np.float32)
            _write(mem, dst_addr, o.dst, dst_off, y if fp16 else y / np.float32(o.output_scale))
        else:  # Emulator::executeSoftmax: the source's first `channel` elements, contiguous, to the destination's
            n = o.src.channel
            if n * o.dst.bytes_per_element > o.dst.size:
                raise LoadableError(f"{loadable.path}: task {task.id}: the softmax's destination holds fewer than {n}")
            src_off = np.arange(n) * o.src.bytes_per_element
            x = _read(mem, src_addr, o.src, src_off)
            if not fp16:  # scaled into FP16 first
                x = fp16_round_away(x * np.float32(o.input_scale)).astype(np.float32)
            with np.errstate(all="ignore"):
                e = np.exp(x - x.max(), dtype=np.float32)
                total = np.float32(0)
                for v in e:  # the runtime's sequential FP32 sum
                    total = np.float32(total + v)
                y = (e / total).astype(np.float32)
            if not fp16:
                y = fp16_round_away(y).astype(np.float32) / np.float32(o.output_scale)
            _write(mem, dst_addr, o.dst, np.arange(n) * o.dst.bytes_per_element, y)
    return len(ops)
