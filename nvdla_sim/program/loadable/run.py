"""A loadable run through the model as NVIDIA's firmware runs it: registers, time, and output bytes.

The firmware's register accesses (loadable.firmware) are a driver's log like those the virtual platform
records; program.sequence decodes its operations from them and replays them with the config's [driver]
costs, each operation timed by the model, and the operations run bit-exactly on the loadable's memories
(program.execute). Which operation ends first, when two run at once, changes the firmware's accesses, so
the firmware runs again with the ends the replay found until the order of ends no longer changes.

The output tensors come out as NVIDIA's runtime writes them (nvdla/sw umd/apps/runtime: Tensor2DIMG and
NvDlaImage::serialize, `o_000000.dimg`), so a regression golden's md5 can be compared byte for byte.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.errors import TraceError
from nvdla_sim.processors import register_view
from nvdla_sim.processors.lut import decode_lut
from nvdla_sim.processors.registers import ProgramLuts
from nvdla_sim.program.execute import execute
from nvdla_sim.program.loadable.container import DataType, Interface, LoadableError, TensorDesc, read_loadable
from nvdla_sim.program.loadable.emulator import run_emu_task
from nvdla_sim.program.loadable.firmware.base import MemoryLayout, memory_layout
from nvdla_sim.program.loadable.firmware.scheduler import End, EndOrder, Firmware, FirmwareRun
from nvdla_sim.program.loadable.network import DlaNetwork, dla_network
from nvdla_sim.program.run import OperationTiming, check_supported, run_operations
from nvdla_sim.program.sequence import Sequence, SequenceRun, decode_sequence, replay
from nvdla_sim.registers.trace_io import Program, SparseMemory

MAX_ROUNDS = 6  # firmware runs to settle the order of ends (each changes only where two operations overlap)


@dataclass(frozen=True)
class OutputImage:
    """An output tensor as NVIDIA's runtime dumps it (a DIMG file: header, metadata, the data in C, H, W
    order, each element from its place in the surface layout)."""

    tensor: str
    data: bytes  # the whole file

    @property
    def md5(self) -> str:
        return hashlib.md5(self.data).hexdigest()


@dataclass(frozen=True)
class GoldenCheck:
    """A regression golden compared with the model's output: the file's md5 and, element by element, the
    values the two hold."""

    folder: str
    golden_md5: str
    model_md5: str
    elements: int
    mismatched: int

    @property
    def match(self) -> bool:
        return self.golden_md5 == self.model_md5


@dataclass(frozen=True)
class LoadableRun:
    name: str
    net: DlaNetwork
    memory: MemoryLayout
    firmware: FirmwareRun
    program: Program
    sequence: Sequence
    timings: tuple[tuple[OperationTiming, ...], ...]
    run: SequenceRun
    rounds: int  # firmware runs until the order of ends settled
    outputs: tuple[OutputImage, ...] = ()
    checks: tuple[GoldenCheck, ...] = ()
    not_computed: str | None = None  # why the outputs were not computed (an operation not executed bit-exactly)
    memory_image: SparseMemory | None = None  # every memory after the run, at MemoryLayout's addresses

    @property
    def cycles(self) -> int:
        return self.run.cycles


def run_loadable(
    path: str | Path, hw: HwConfig, *, task: int | None = None, outputs: bool = True, golden: str | Path | None = None
) -> LoadableRun:
    """Run a loadable's DLA task on `hw` (module docstring); `golden`: a regression golden folder (holding
    dla/o_000000.dimg and dla/lead.md5, or those files directly) to compare the output with."""
    path = Path(path)
    net = dla_network(read_loadable(path), task)
    mem = memory_layout(net.loadable, net.task)
    atom = hw.memory.memory_atomic_bytes
    order: dict[int, float] | None = None
    seen: list[tuple] = []
    rounds = 0
    while rounds < MAX_ROUNDS:
        rounds += 1
        fw = Firmware(net, mem, atom=atom, end_order=_by_end(order)).run()
        ends = tuple(ops for _, ops in fw.end_reads)
        prog = Program(path.name, path.parent, list(fw.commands), path=path)
        seq = decode_sequence(prog)
        _check_decoded(seq, hw, path)
        timings = tuple(tuple(run_operations(list(s.ops), hw, name=s.name)) for s in seq.operations)
        srun = replay(prog, seq, hw, list(timings))
        if ends in seen or not fw.choices:  # settled, or no two operations ever ran at once
            break
        seen.append(ends)
        order = _ends(fw, srun)
    result = LoadableRun(path.name, net, mem, fw, prog, seq, timings, srun, rounds)
    if not outputs:
        return result
    try:
        images, image = _execute(result, hw)
    except TraceError as e:  # an operation the model times but does not compute bit-exactly
        if golden is not None:
            raise LoadableError(f"{path}: cannot compare with the golden: {e}") from None
        return replace(result, not_computed=str(e))
    checks = (compare_golden(images, golden),) if golden is not None else ()
    return replace(result, outputs=images, checks=checks, memory_image=image)


def _check_decoded(seq: Sequence, hw: HwConfig, path: Path) -> None:
    if seq.unknown:
        raise LoadableError(
            f"{path}: the firmware wrote registers the model does not understand: {', '.join(seq.unknown)}"
        )
    for s in seq.operations:
        for op in s.ops:
            try:
                check_supported(op, hw, s.name)
            except TraceError as e:
                raise LoadableError(f"{path}: {e} (a loadable compiled for another build?)") from None


def _by_end(end: dict[int, float] | None) -> EndOrder | None:
    """The firmware's EndOrder from the replay's end times per operation (None: enable order)."""
    if end is None:
        return None

    def first(candidates: list[End]) -> End:
        # a convolution's early (CDMA) interrupt is placed just before its end: when CDMA finishes is not modelled
        return min(candidates, key=lambda c: (max(end.get(i, float("inf")) for i in c.ops), not c.early))

    return first


def _ends(fw: FirmwareRun, run: SequenceRun) -> dict[int, float]:
    """Each DLA operation's end in the replay: its sequenced operation's (found by the enables)."""
    by_command = {at: i for i, at in fw.enables.items()}
    out = {}
    for t in run.operations:
        for at in t.operation.enables:
            if at in by_command:
                out[by_command[at]] = t.end
    return out


# ---- data --------------------------------------------------------------------------------------------


def initial_memory(mem: MemoryLayout) -> SparseMemory:
    """The loadable's memories at their addresses, each filled from its blobs (zero elsewhere: the runtime
    binds the inputs and outputs a loadable leaves empty, and NVIDIA's regression runs bind no input)."""
    out = SparseMemory()
    for m in mem.loadable.memories:
        if m.contents:
            out.write(mem.bases[m.id], mem.loadable.contents(m.id))
    return out


def _execute(result: LoadableRun, hw: HwConfig) -> tuple[tuple[OutputImage, ...], SparseMemory]:
    """Run the loadable's tasks in their submit order on its memories, as the runtime does: the DLA task's
    operations in the order they started (program.execute), a CPU task's by the emulator; the output
    images, and the memory after."""
    lo = result.net.loadable
    memory = initial_memory(result.memory)
    order = sorted(result.run.operations, key=lambda t: (t.start, t.enabled))
    ops = [op for t in order for op in t.operation.ops]
    units = {u for op in ops if (u := register_view(op).lut_unit(op)) is not None}
    luts = ProgramLuts(**{u: decode_lut(result.program, f"NVDLA_{u.upper()}") for u in units})
    submitted = [i for s in lo.submits for i in s.task_ids] or [t.id for t in lo.tasks]
    for task_id in submitted:
        task = next((t for t in lo.tasks if t.id == task_id), None)
        if task is None:
            raise LoadableError(f"{lo.path}: a submit names task {task_id}, which the loadable lacks")
        if task.id == result.net.task.id:
            execute(ops, memory, hw, name=result.name, luts=luts)
        elif task.interface is Interface.EMU1:
            run_emu_task(lo, task, result.memory, memory)
        else:
            raise TraceError(f"task {task.id} is another {task.interface.name} task; one DLA task a run is modelled")
    outs = [t for t in result.net.loadable.tensors if t.mem_id in result.net.outputs()]
    return tuple(OutputImage(t.name, dimg(t, memory, result.memory.bases[t.mem_id])) for t in outs), memory


# ---- NVIDIA's runtime image format -------------------------------------------------------------------

# NvDlaImage surface formats of the runtime that made nvdla/sw's regression goldens (2017-2018): 40
# D_F8_CxHWx_x32_I, 41 D_F16_CxHWx_x16_I, 42 D_F16_CxHWx_x16_F, as the goldens' headers hold them. (nvdla/sw's
# own DlaImage.h, published in 2019, inserts D_F8_CxHWx_x8_I at 41 and moves the others up.) Tensor2DIMG
# picks the format from the tensor's data type: (code, bytes per element, channels per group)
_FORMATS = {DataType.INT8: (40, 1, 32), DataType.INT16: (41, 2, 16), DataType.HALF: (42, 2, 16)}


def dimg(t: TensorDesc, memory: SparseMemory, base: int) -> bytes:
    """The runtime's DIMG of tensor `t` (NvDlaImage::serialize with the stable hash): 'DIMG', version 0,
    the metadata (format, width, height, channels, line and surface stride, buffer size) and each element
    in C, H, W order from its offset in the buffer; FP16 NaNs written as one value."""
    if t.data_type not in _FORMATS:
        raise LoadableError(f"tensor {t.name!r}: data type {t.data_type.name} has no runtime image format")
    code, bpe, group = _FORMATS[t.data_type]
    _, c, h, w = t.nchw
    line, surface = t.strides[1], t.strides[2]
    buf = memory.read(base + t.offset, t.size)
    ci, hi, wi = np.meshgrid(np.arange(c), np.arange(h), np.arange(w), indexing="ij")
    offsets = (ci // group) * surface + hi * line + wi * group * bpe + (ci % group) * bpe
    if offsets.size and int(offsets.max()) + bpe > t.size:
        raise LoadableError(f"tensor {t.name!r}: its elements reach past its {t.size}-byte buffer")
    data = np.stack([buf[offsets.ravel() + k] for k in range(bpe)], axis=1)
    if t.data_type is DataType.HALF:
        # the stable hash: a NaN becomes half(0x7C00), i.e. the value 31744.0 (0x77C0) as half_float assigns it
        values = data.view(np.float16).ravel().copy()
        values[np.isnan(values)] = np.float16(31744.0)
        data = values.view(np.uint8)
    meta = struct.pack("<4sI7I", b"DIMG", 0, code, w, h, c, line, surface, t.size)
    return meta + data.tobytes()


def _golden_files(folder: Path) -> tuple[Path, Path]:
    for d in (folder / "dla", folder):
        if (d / "o_000000.dimg").is_file():
            return d / "o_000000.dimg", d / "lead.md5"
    raise LoadableError(f"{folder}: no o_000000.dimg (a regression golden folder holds dla/o_000000.dimg)")


def compare_golden(images: tuple[OutputImage, ...], folder: str | Path) -> GoldenCheck:
    """The model's output image against a regression golden's (nvdla/sw regression/golden/<test>)."""
    folder = Path(folder)
    image_path, md5_path = _golden_files(folder)
    if len(images) != 1:
        raise LoadableError(f"{folder}: a golden holds one output image; the loadable has {len(images)} outputs")
    golden = image_path.read_bytes()
    lead = md5_path.read_text().split()[0] if md5_path.is_file() else hashlib.md5(golden).hexdigest()
    model = images[0].data
    if golden[:36] != model[:36]:
        raise LoadableError(
            f"{image_path}: the golden's header {struct.unpack('<4sI7I', golden[:36])[2:]} differs from the "
            f"output tensor's {struct.unpack('<4sI7I', model[:36])[2:]} (another test's golden?)"
        )
    a, b = np.frombuffer(golden[36:], np.uint8), np.frombuffer(model[36:], np.uint8)
    bpe = _FORMATS_BY_CODE[struct.unpack("<I", golden[8:12])[0]]
    n = min(len(a), len(b)) // bpe
    diff = (a[: n * bpe].reshape(n, bpe) != b[: n * bpe].reshape(n, bpe)).any(axis=1)
    return GoldenCheck(str(folder), lead, images[0].md5, n, int(diff.sum()) + abs(len(a) - len(b)) // bpe)


_FORMATS_BY_CODE = {code: bpe for code, bpe, _ in _FORMATS.values()}
