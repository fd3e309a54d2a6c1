"""Run an NVDLA register program (trace test) through the model: cycles per operation and unit.

An operation's cycles run from its D_OP_ENABLE write to the interrupt, as measured on NVIDIA's RTL:

    launch (op enable -> first DMA request)
    + the layer's streaming time (tile pipeline: fetch, compute, drain, writes, memory latency)
    + the unit's pipeline depth (data in -> result written)
    + completion (last write -> interrupt)

Each constant is a field of HwConfig.timing with its measurement in docs/modelling.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.stats import LayerStats
from nvdla_sim.errors import TraceError
from nvdla_sim.layers import HwLayer
from nvdla_sim.processors import fixed_latency, register_view, simulate
from nvdla_sim.processors.lut import decode_lut
from nvdla_sim.processors.registers import ProgramLuts
from nvdla_sim.program.decode import Decoded, Operation, decode_program
from nvdla_sim.program.execute import execute, execute_program
from nvdla_sim.program.sequence import SequenceRun, decode_sequence, replay
from nvdla_sim.registers.trace_io import PAGE_BYTES, MemAccess, Program, memory_from_transfers, parse_program


@dataclass(frozen=True)
class OperationTiming:
    kind: str
    cycles: int
    stats: LayerStats
    launch: int
    pipeline: int
    completion: int
    layer: HwLayer | None = None  # the layer the model timed (for its energy)


@dataclass
class ProgramRun:
    name: str
    decoded: Decoded
    operations: list[OperationTiming]
    checks: list[dict] = field(default_factory=list)  # per check: kind, base, size, golden/model CRC, match
    span: int | None = None  # a program of several convolutions: first op enable -> last interrupt
    # a driver's log (Program.driver_log): the network replayed as the driver ran it (program/sequence.py);
    # its cycles are the span, from the first register access to the last end
    sequence: SequenceRun | None = None

    @property
    def cycles(self) -> int:
        """Cycles from op enable to the last interrupt: the span of a program of convolutions in sequence
        (conv_chain_cycles), else the longest operation (operations of one program run together)."""
        if self.span is not None:
            return self.span
        return max((o.cycles for o in self.operations), default=0)


def conv_chain_cycles(ops: list[Operation], hw: HwConfig, name: str) -> int | None:
    """The span from the first op enable to the last interrupt of a program of two or more operations of
    one processor run in sequence (ping-pong register groups, CBUF reuse between convolutions), as its
    register view times them as one chain (RegisterView.chain_cycles); None for any other program."""
    if len(ops) < 2:
        return None
    view = register_view(ops[0])
    if any(register_view(op) is not view for op in ops[1:]):
        return None
    return view.chain_cycles(ops, hw, name)


def operation_timing(op: Operation, hw: HwConfig, *, name: str = "op", fed: Operation | None = None) -> OperationTiming:
    """Model cycles of one decoded operation, op enable to interrupt. `fed` is the operation it feeds on the
    fly (an SDP pass's PDP pass): the two run as one pipeline, paced by the slower."""
    view = register_view(op)
    layer, plan = view.timed_layer(op, hw, name)
    stats = simulate(layer, hw, plan, record_events=False)
    if fed is not None:  # on the fly, it takes what `op` hands it: its own layer, not its offline read (PDP's split)
        fed_stats = simulate(register_view(fed).hw_layer(fed, name), hw, record_events=False)
        stats = max(stats, fed_stats, key=lambda s: s.cycles)
    launch, pipe, done = fixed_latency(layer, hw)
    cycles = launch + stats.cycles + pipe + done
    return OperationTiming(view.kind, cycles, stats, launch, pipe, done, layer)


def run_operations(ops: list[Operation], hw: HwConfig, *, name: str) -> list[OperationTiming]:
    """Time a program's operations. An operation feeding the next on the fly (SDP to PDP) is one pipelined
    operation (the one it feeds is not timed again)."""
    out = []
    for i, op in enumerate(ops):
        if i and register_view(op).fed(op) and register_view(ops[i - 1]).feeds(ops[i - 1]):
            continue
        nxt = ops[i + 1] if i + 1 < len(ops) else None
        fed = nxt if nxt is not None and register_view(op).feeds(op) and register_view(nxt).fed(nxt) else None
        out.append(operation_timing(op, hw, name=f"{name}.{i}", fed=fed))
    return out


def run_program(path: str | Path, hw: HwConfig, *, strict: bool = True, outputs: bool = True) -> ProgramRun:
    """Decode and time a trace test and, with `outputs`, compute its output bytes bit-exactly from the
    program's memory images and recompute each CRC/file check on them (ProgramRun.checks). A driver's log
    of a whole network (registers by address in hw.driver's address map, ends read from S_INTR_STATUS) is
    decoded and replayed as the driver ran it (run_driver_log)."""
    prog = parse_program(path, address_map=hw.driver.address_map)
    if prog.driver_log:
        return run_driver_log(prog, hw, strict=strict, outputs=outputs)
    decoded = decode_program(prog)
    _refuse_unknown(prog.name, decoded.unknown, strict)
    for op in decoded.operations:
        check_supported(op, hw, prog.name)
    run = ProgramRun(prog.name, decoded, run_operations(decoded.operations, hw, name=prog.name))
    run.span = conv_chain_cycles(decoded.operations, hw, prog.name)
    if outputs:
        _, run.checks = execute_program(prog, decoded, hw)
    else:
        run.checks = [
            {"kind": c.kind, "base": c.base, "size": c.size, "golden_crc": c.crc, "model_crc": None, "match": None}
            for c in prog.checks
            if c.kind != "nothing"
        ]
    return run


def _refuse_unknown(name: str, unknown: list[str], strict: bool) -> None:
    if strict and unknown:
        raise TraceError(
            f"{name}: registers the model does not understand: {', '.join(unknown)} "
            "(pass strict=False / --allow-unknown-registers to time it anyway)"
        )


def run_driver_log(prog: Program, hw: HwConfig, *, strict: bool = True, outputs: bool = True) -> ProgramRun:
    """A whole network from the driver's register log: its operations decoded from the driver's sequence,
    each timed by the model (run_operations), replayed with hw.driver's costs (program/sequence.py). A
    log with NVDLA's memory transfers (a virtual platform's sc.log) is also checked bit-exactly, with
    `outputs` (transfers_check); the kernel-mode driver's .txn logs hold none."""
    seq = decode_sequence(prog)
    _refuse_unknown(prog.name, seq.unknown, strict)
    for s in seq.operations:
        for op in s.ops:
            check_supported(op, hw, s.name)
    timings = [tuple(run_operations(list(s.ops), hw, name=s.name)) for s in seq.operations]
    srun = replay(prog, seq, hw, timings)
    ops = [op for s in seq.operations for op in s.ops]
    run = ProgramRun(prog.name, Decoded(ops, seq.unknown), [t for ts in timings for t in ts], span=srun.cycles,
                     sequence=srun)  # fmt: skip
    if outputs and any(isinstance(c, MemAccess) and c.write and not c.sram for c in prog.commands):
        run.checks = [transfers_check(prog, srun, hw)]
    return run


def transfers_check(prog: Program, srun: SequenceRun, hw: HwConfig) -> dict:
    """A log with NVDLA's memory transfers (a virtual platform's sc.log): its operations executed on the
    memory as NVDLA first read it, in the order they started, and every byte the log wrote to DRAM compared
    with the model's last write of it; `match` None, with the reason, where an operation is not executed
    bit-exactly (its time stands)."""
    memory, last, wrote = memory_from_transfers(prog)
    order = sorted(srun.operations, key=lambda t: (t.start, t.enabled))
    ops = [op for t in order for op in t.operation.ops]
    written = sum(int(m.sum()) for m in wrote.values())
    try:
        units = {u for op in ops if (u := register_view(op).lut_unit(op)) is not None}
        luts = ProgramLuts(**{u: decode_lut(prog, f"NVDLA_{u.upper()}") for u in units})
        execute(ops, memory, hw, name=prog.name, luts=luts)
    except TraceError as e:
        return {"kind": "memory transfers", "bytes_written": written, "mismatched_bytes": None,
                "first_mismatch": None, "match": None, "not_computed": str(e)}  # fmt: skip
    bad, first_bad = 0, None
    for page in sorted(wrote):
        mask = wrote[page]
        base = page * PAGE_BYTES
        diff = mask & (memory.read(base, PAGE_BYTES) != last.read(base, PAGE_BYTES))
        if diff.any():
            bad += int(diff.sum())
            first_bad = base + int(np.argmax(diff)) if first_bad is None else first_bad
    return {"kind": "memory transfers", "bytes_written": written, "mismatched_bytes": bad,
            "first_mismatch": f"{first_bad:#x}" if first_bad is not None else None, "match": bad == 0}  # fmt: skip


def check_supported(op: Operation, hw: HwConfig, name: str) -> None:
    """Refuse what the chosen build lacks, as the RTL does (nv_small has no SDP EW/LUT)."""
    register_view(op).check(op, hw, name)


def unit_cycles(run: ProgramRun) -> dict[str, int]:
    """Busy cycles per unit summed over the program's operations."""
    out: dict[str, int] = {}
    for o in run.operations:
        for u, s in o.stats.units.items():
            out[u.value] = out.get(u.value, 0) + s.busy
    return out
