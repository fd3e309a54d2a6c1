"""Bit-exact execution of a decoded NVDLA register program on its memory image.

Each operation is run by its processor's register view (nvdla_sim.processors: `execute.py` in each
processor's package): it reads its cubes from memory in NVDLA's formats (doc/hw/format.rst), computes with
the same functional models the rest of the simulator uses (conv.run_conv, sdp.sdp_apply, pdp.pool,
cdp.lrn), and writes its result with the destination strides, so that the trace test's CRC checks can
be recomputed and compared with NVIDIA's golden values:

- feature data: atoms of `memory_atomic_bytes` (8 on nv_small) holding consecutive channels, lines of
  atoms at the line stride, surfaces of atoms at the surface stride; channels padded to whole atoms;
- direct-convolution weights: kernel groups of `kernels_per_atomic` kernels, each kernel cut into
  1x1x`atomic_c` channel blocks, scanned C' -> K -> W -> H -> C and packed with no gaps;
- SDP operands: per-kernel 1x1xC or per-element cubes with their own strides, 1 or 2 bytes a component,
  two components (ALU, MUL) packed per element when both are used.

Register arithmetic follows NVIDIA's bit-accurate C model (hw@master:cmod), each point cited where used.
"""

from __future__ import annotations

from nvdla_sim.config import HwConfig
from nvdla_sim.errors import TraceError
from nvdla_sim.processors import register_view
from nvdla_sim.processors.lut import decode_lut
from nvdla_sim.processors.registers import ExecState, ProgramLuts
from nvdla_sim.program.decode import Decoded, Operation
from nvdla_sim.registers.trace_io import Check, Program, SparseMemory, crc32, initial_memory
from nvdla_sim.units.lut import LutParams

_NO_LUTS = ProgramLuts()


def _lut_users(ops: list[Operation]) -> set[str]:
    """The units whose LUT the operations read ("sdp", "cdp": ProgramLuts' fields)."""
    return {u for op in ops if (u := register_view(op).lut_unit(op)) is not None}


def program_luts(ops: list[Operation], lut: LutParams | None, name: str) -> ProgramLuts:
    """The one LUT an emitted program writes, given to the unit whose operations use it."""
    users = _lut_users(ops)
    if len(users) > 1:
        raise TraceError(f"{name}: a program with both a CDP and an SDP LUT pass is not emitted (one LUT per program)")
    return ProgramLuts(**{u: lut for u in users})


def execute(
    ops: list[Operation], mem: SparseMemory, hw: HwConfig, *, name: str = "program", luts: ProgramLuts = _NO_LUTS
) -> None:
    """Run the operations in order on `mem` (modified in place) with the program's LUTs."""
    st = ExecState(mem, hw, luts)
    for op in ops:
        register_view(op).execute(op, st, name)


def execute_program(prog: Program, decoded: Decoded, hw: HwConfig) -> tuple[SparseMemory, list[dict]]:
    """The program's memory after its operations, and its CRC/file checks recomputed on it."""
    mem = initial_memory(prog)
    ops = decoded.operations
    luts = ProgramLuts(**{u: decode_lut(prog, f"NVDLA_{u.upper()}") for u in _lut_users(ops)})
    execute(ops, mem, hw, name=prog.name, luts=luts)
    return mem, check_results(prog.checks, mem)


def check_results(checks: list[Check], mem: SparseMemory) -> list[dict]:
    """Each CRC/file check recomputed on the model's memory: kind, base, size, golden and model CRC, match."""
    rows = []
    for c in checks:
        if c.kind == "nothing":
            continue
        got = crc32(mem.read(c.base, c.size))
        rows.append(
            {
                "kind": c.kind,
                "base": c.base,
                "size": c.size,
                "golden_crc": c.crc,
                "model_crc": got,
                "match": got == c.crc,
            }
        )
    return rows
