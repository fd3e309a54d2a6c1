"""Emit NVDLA register programs in NVIDIA's trace-test format: the inverse of regdecode.

An operation (ConvOp with its fused SDP and PDP, SdpOp, PdpOp, CdpOp) and the bytes of its inputs become
a trace test (`<name>.cfg` + `.dat` memory images) that NVIDIA's testbench, the reference runner
(validation/nvdla_rtl) and `nvdla simulate --trace-test` all read. The expected output CRC in its
`check_crc` line is the bit-exact model's (regexec), so running the program on the RTL checks the model.

Only registers with a meaning for the operation are written; the rest keep their reset values. The
register sequence follows NVIDIA's trace tests (hw@nv_small:verif/tests/trace_tests): pointers, the
layer registers, a CBUF flush poll before a convolution, then the op enables from the last unit of the
pipeline back to the first, and one interrupt wait per operation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.errors import ShapeError, TraceError
from nvdla_sim.files import write_text
from nvdla_sim.layers import ConvShape, PoolSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors import register_view
from nvdla_sim.processors.conv.registers import CbufReuse, ConvOp
from nvdla_sim.processors.pdp.registers import PdpOp
from nvdla_sim.processors.registers import RegisterWriter
from nvdla_sim.processors.sdp.registers import SdpEwCfg, SdpOp, SdpStageCfg, SdpStream
from nvdla_sim.program.decode import Operation
from nvdla_sim.program.execute import execute, program_luts
from nvdla_sim.registers.trace_io import SparseMemory, crc32
from nvdla_sim.units import cbuf, cdma
from nvdla_sim.units.lut import LutParams
from nvdla_sim.units.memory_format import Surface, cube_size
from nvdla_sim.units.pdp import recip

RECORD_BYTES = 32  # bytes per `.dat` record


@dataclass
class TraceProgram:
    """A trace test ready to write: command lines and the memory images they load."""

    name: str
    lines: list[str] = field(default_factory=list)
    images: dict[str, bytes] = field(default_factory=dict)
    expected: list[tuple[int, int, int]] = field(default_factory=list)  # (base, size, model CRC)

    def write(self, folder: str | Path) -> Path:
        """Write `<folder>/<name>/<name>.cfg` and its `.dat` files; returns the test folder."""
        d = Path(folder) / self.name
        d.mkdir(parents=True, exist_ok=True)
        write_text(d / f"{self.name}.cfg", "\n".join(self.lines) + "\n")
        for fname, data in self.images.items():
            write_text(d / fname, _dat_text(data))
        return d


def _dat_text(data: bytes) -> str:
    rows = ["{"]
    for off in range(0, len(data), RECORD_BYTES):
        chunk = data[off : off + RECORD_BYTES]
        payload = " ".join(f"0x{b:02x}" for b in chunk)
        rows.append(f"{{offset:0x{off:x}, size:{len(chunk)}, payload:{payload}}},")
    rows.append("}")
    return "\n".join(rows) + "\n"


@dataclass(frozen=True)
class Step:
    """One hardware layer of a program: its operation, the (address, bytes) images it reads and the
    (address, size) regions it writes."""

    op: Operation
    inputs: list[tuple[int, np.ndarray]]
    outputs: list[tuple[int, int]]


def emit_program(
    name: str,
    op: Operation,
    inputs: list[tuple[int, np.ndarray]],
    outputs: list[tuple[int, int]],
    hw: HwConfig,
    *,
    lut: LutParams | None = None,
) -> TraceProgram:
    """One hardware layer as a trace test. `inputs` are (address, bytes) memory images, `outputs` the
    (address, size) regions the layer writes: zeroed first, then checked against the model's CRC."""
    return emit_sequence(name, [Step(op, inputs, outputs)], hw, lut=lut)


def emit_sequence(
    name: str, steps: list[Step], hw: HwConfig, *, lut: LutParams | None = None, memory: SparseMemory | None = None
) -> TraceProgram:
    """Hardware layers in sequence, as a driver with ping-pong register groups runs them: layer i is
    programmed into register group i % 2 (S_POINTER of every unit it writes) and enabled while the
    previous one runs; from the third layer on, the driver first waits for the interrupt of the layer
    that last used the group (`intr_notify` before the writes: the RTL runner makes it a wait for the
    interrupt and a write clearing that done bit). The hardware orders the layers (CDMA waits for CBUF
    space, reuse takes what the previous layer left). Each layer's outputs are checked against the model's
    CRC at the end (the last two layers' interrupts), the model running the layers in order on one memory
    and one CBUF (execute), on `memory` when given (the caller reads what the layers wrote there)."""
    if not steps:
        raise TraceError(f"{name}: a program holds at least one hardware layer")
    prog = TraceProgram(name)
    b = RegisterWriter(prog.lines)
    b.line(f"// {name}: emitted by nvdla_sim.program.emit")
    mem = memory if memory is not None else SparseMemory()
    for i, (base, data) in enumerate(a for st in steps for a in st.inputs):
        raw = np.ascontiguousarray(data).view(np.uint8).ravel()
        fname = f"{name}_in{i}.dat"
        prog.images[fname] = raw.tobytes()
        b.line(f"mem_init(pri_mem, 0x{base:x}, 0x{len(raw):x}, ALL_ZERO);")
        b.line(f'mem_load(pri_mem, 0x{base:x}, "{fname}");')
        mem.write(base, raw)
    for base, size in (o for st in steps for o in st.outputs):
        b.line(f"mem_init(pri_mem, 0x{base:x}, 0x{size:x}, ALL_ZERO);")
        mem.write(base, np.zeros(size, np.uint8))
    dones = []
    for i, st in enumerate(steps):
        group = i % 2
        if i >= 2:  # the group is free once the layer that last used it has ended
            b.line(f"intr_notify({dones[i - 2]}, sync_id_{i - 2});")
        first = len(prog.lines)
        b.units = {}
        emitted = register_view(st.op).emit(b, st.op, hw, lut, name)
        enables, done = emitted.enables, emitted.interrupt
        if i:
            pointers = [f"reg_write(NVDLA_{u}.S_POINTER_0, 0x{group:x});" for u in b.units if u != "GLB"]
            prog.lines[first:first] = pointers
        for unit in enables:
            b.line(f"reg_write(NVDLA_{unit}.D_OP_ENABLE_0, 0x1);")
        dones.append(done[: done.rindex("_")] + f"_{group}")
    last = range(max(0, len(steps) - 2), len(steps))
    for i in last:
        b.line(f"intr_notify({dones[i]}, sync_id_{i});")
    execute([st.op for st in steps], mem, hw, name=name, luts=program_luts([st.op for st in steps], lut, name))
    for i, st in enumerate(steps):
        for base, size in st.outputs:
            crc = crc32(mem.read(base, size))
            prog.expected.append((base, size, crc))
            sync = i if i in last else last[-1]  # earlier layers' outputs are final by the last interrupt
            b.line(f"check_crc(sync_id_{sync}, 1, 0x{base:x}, 0x{size:x}, 0x{crc:08x});")
    return prog


def packed_surface(addr: int, w: int, h: int, p: Precision, hw: HwConfig) -> Surface:
    """A packed feature cube at `addr`: lines of w atoms, surfaces of h lines."""
    line = w * hw.memory.memory_atomic_bytes
    return Surface(addr, line, line * h)


def place(alloc: Alloc, w: int, h: int, c: int, p: Precision, hw: HwConfig) -> Surface:
    """A packed w x h x c feature cube at the allocator's next address (its bytes reserved)."""
    surf = packed_surface(alloc.take(0), w, h, p, hw)
    alloc.take(cube_size(surf, c, p, hw))
    return surf


# ---- building operations ----------------------------------------------------------------------------


@dataclass
class Alloc:
    """A bump allocator for memory regions, 256-byte aligned (the weight alignment of format.rst)."""

    next_addr: int = 0x80000000
    align: int = 0x100

    def take(self, size: int) -> int:
        addr = self.next_addr
        self.next_addr += -(-max(size, 1) // self.align) * self.align
        return addr


def sdp_pass(
    w: int,
    h: int,
    c: int,
    *,
    flying: bool,
    src: Surface | None = None,
    dst: Surface | None = None,
    to_pdp: bool = False,
    precision: Precision = Precision.INT8,
    out_precision: Precision | None = None,
    x1: SdpStageCfg | None = None,
    x2: SdpStageCfg | None = None,
    cvt: tuple[int, int, int] = (0, 1, 0),
    streams: tuple = (),
    ew: SdpEwCfg | None = None,
) -> SdpOp:
    """An SDP pass: on the fly behind a convolution (`flying`) or reading `src` from memory; `ew` the Y
    stage (None: bypassed)."""
    return SdpOp(
        width=w,
        height=h,
        channels=c,
        flying=flying,
        src=src,
        dst=None if to_pdp else dst,
        to_pdp=to_pdp,
        proc_precision=precision,
        out_precision=out_precision or precision,
        in_precision=precision,
        x1=x1,
        x2=x2,
        ew_enabled=ew is not None,
        lut_enabled=ew is not None and ew.lut,
        cvt_offset=cvt[0],
        cvt_scale=cvt[1],
        cvt_shift=cvt[2],
        operand_streams=tuple(streams),
        ew=ew,
    )


def pool_pass(
    w: int, h: int, c: int, spec: PoolSpec, src: Surface, dst: Surface, precision: Precision, pad_values: tuple
) -> PdpOp:
    """An offline PDP pass over a w x h x c cube with `spec`'s window; `pad_values` are the seven
    pre-multiplied padding registers (n = 1..7 padded elements), used by average pooling."""
    ow, oh = spec.out_size(w, h)
    method = spec.mode
    return PdpOp(
        w, h, c, ow, oh, method, spec.kernel_w, spec.kernel_h, spec.stride_x, spec.stride_y,
        spec.pad_left, spec.pad_right, spec.pad_top, spec.pad_bottom, tuple(pad_values),
        recip(spec.kernel_w), recip(spec.kernel_h), 1, (0, 0, 0), (0, 0, 0), False, src, dst, precision,
    )  # fmt: skip


def conv_layer(
    shape: ConvShape,
    precision: Precision,
    hw: HwConfig,
    alloc: Alloc,
    *,
    x1: SdpStageCfg | None = None,
    x2: SdpStageCfg | None = None,
    cvt: tuple[int, int, int] = (0, 1, 0),
    streams: tuple[SdpStream, ...] = (),
    ew: SdpEwCfg | None = None,
    clip: int = 0,
    pad_value: int = 0,
    data_banks: int | None = None,
    reuse: CbufReuse | None = None,
    weight_banks: int | None = None,
    out_precision: Precision | None = None,
) -> tuple[ConvOp, Surface, int, int]:
    """A direct convolution with packed input, weights and output placed by `alloc`, followed on the fly
    by SDP stages `x1`, `x2` (operands from `streams`) and the output convertor `cvt` (offset, scale,
    shift). Returns (op, input surface, weight address, output address); the CBUF split holds the whole
    input and at least one kernel group of weights (the programming guide's "full input, partial weight"
    mode: CDMA refills the weight ring as CSC releases kernel groups), or raises ShapeError naming what
    does not fit. `reuse` keeps or takes the input or weights in CBUF across hardware layers; kept or taken
    weights must all fit the weight banks. SDP writes the output at `out_precision` (None: the layer's)."""
    s = shape
    data = packed_surface(alloc.take(0), s.in_w, s.in_h, precision, hw)
    alloc.take(cube_size(data, s.in_c, precision, hw))
    bpk = s.kernel_w * s.kernel_h * s.in_c * precision.bytes
    wbytes = cdma.weight_bytes(s.out_k, bpk, hw)  # in whole CBUF entries (what CSC reads, cdma.weight_bytes)
    waddr = alloc.take(wbytes)
    written = out_precision or precision
    out = packed_surface(alloc.take(0), s.out_w, s.out_h, written, hw)
    alloc.take(cube_size(out, s.out_k, written, hw))
    eps = cbuf.entry_per_slice(s.in_w, s.in_c, precision, hw)
    need_d = cbuf.banks_for(eps * s.in_h, hw)
    # the weights stream through the weight ring ("full input, partial weight"): one kernel group must fit
    need_w = cbuf.banks_for(cbuf.weight_entries(min(s.out_k, hw.kernels_per_atomic(precision)), bpk, hw), hw)
    db = data_banks or need_d
    wb = weight_banks or hw.cbuf.bank_count - db
    if db < need_d or wb < need_w or db + wb > hw.cbuf.bank_count:
        raise ShapeError(
            f"convolution needs {need_d} CBUF banks for its input and {need_w} for a kernel group of its "
            f"weights; {hw.name} has {hw.cbuf.bank_count} (split the layer into bands of rows)"
        )
    reuse = reuse or CbufReuse()
    all_w = cbuf.banks_for(cbuf.weight_entries(s.out_k, bpk, hw), hw)
    if (reuse.weight_reuse or reuse.skip_weight_rls) and all_w > wb:
        raise ShapeError(f"weights kept in or reused from CBUF need {all_w} weight banks, not {wb}, on {hw.name}")
    sdp = sdp_pass(
        s.out_w,
        s.out_h,
        s.out_k,
        flying=True,
        dst=out,
        precision=precision,
        out_precision=written,
        x1=x1,
        x2=x2,
        cvt=cvt,
        streams=streams,
        ew=ew,
    )
    op = ConvOp(
        shape=s,
        precision=precision,
        pixel_input=False,
        data_banks=db,
        weight_banks=wb,
        entries_per_slice=eps,
        fetch_grain=1,
        weight_bytes=wbytes,
        compressed_weights=False,
        data=data,
        weight_addr=waddr,
        pad_value=pad_value & 0xFFFF,
        clip_truncate=clip,
        out=out,
        sdp=sdp,
        reuse=reuse,
    )
    return op, data, waddr, out.addr
