"""Run an NVDLA register program (trace test) through the model: cycles per operation and unit.

An operation's cycles run from its D_OP_ENABLE write to the interrupt, as measured on NVIDIA's RTL:

    launch (op enable -> first DMA request)
    + the layer's streaming time (tile pipeline: fetch, compute, drain, writes, memory latency)
    + the unit's pipeline depth (data in -> result written)
    + completion (last write -> interrupt)

Each constant is a field of HwConfig.timing with its measurement in docs/modelling.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.conv import simulate_chain
from nvdla_sim.engine.stats import LayerStats
from nvdla_sim.engine.tiling import LoopOrder, TilePlan, illegal_reason
from nvdla_sim.errors import TraceError
from nvdla_sim.layers import CdpLayer, ConvLayer, HwLayer
from nvdla_sim.processors import fixed_latency, simulate
from nvdla_sim.program.decode import CdpOp, ConvOp, Decoded, Operation, PdpOp, SdpOp, decode_program, hw_layer
from nvdla_sim.program.execute import execute_program
from nvdla_sim.program.trace_io import parse_program


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

    @property
    def cycles(self) -> int:
        """Cycles from op enable to the last interrupt: the span of a program of convolutions in sequence
        (conv_chain_cycles), else the longest operation (operations of one program run together)."""
        if self.span is not None:
            return self.span
        return max((o.cycles for o in self.operations), default=0)


def conv_chain_cycles(ops: list[Operation], hw: HwConfig, name: str) -> int | None:
    """The span from the first op enable to the last interrupt of a program of two or more convolutions
    run in sequence (ping-pong register groups, CBUF reuse between them), timed as one chain of hardware
    layers (engine.conv.simulate_chain); None for any other program."""
    if len(ops) < 2 or not all(isinstance(o, ConvOp) and o.pdp is None for o in ops):
        return None
    steps = [_conv_plan(op, hw, f"{name}.{i}") for i, op in enumerate(ops)]
    return simulate_chain(steps, hw).cycles + sum(fixed_latency(steps[0][0], hw))


def _conv_plan(op: ConvOp, hw: HwConfig, name: str) -> tuple[ConvLayer, TilePlan]:
    """A decoded convolution as the model's layer and its one-hardware-layer plan (the program's CBUF
    split), refused with a one-line error when the split does not fit the model's config."""
    layer = hw_layer(op, name)
    plan = TilePlan(op.data_banks, op.weight_banks, op.shape.out_h, op.shape.out_k, LoopOrder.DATA_STATIONARY)
    reason = illegal_reason(layer, plan, hw)
    if reason is not None:
        raise TraceError(f"{name}: the program's CBUF split does not fit the model's {hw.name}: {reason}")
    return layer, plan


def _time_conv(op: ConvOp, hw: HwConfig, name: str, flying_pdp: PdpOp | None) -> tuple[HwLayer, LayerStats]:
    layer, plan = _conv_plan(op, hw, name)
    return layer, simulate(layer, hw, plan, record_events=False)


def _time_sdp(op: SdpOp, hw: HwConfig, name: str, flying_pdp: PdpOp | None) -> tuple[HwLayer, LayerStats]:
    layer = hw_layer(op, name)
    stats = simulate(layer, hw, record_events=False)
    if flying_pdp is not None:  # the two run as one pipeline, paced by the slower
        pdp_stats = simulate(hw_layer(flying_pdp, name), hw, record_events=False)
        stats = max(stats, pdp_stats, key=lambda s: s.cycles)
    return layer, stats


def _time_pdp(op: PdpOp, hw: HwConfig, name: str, flying_pdp: PdpOp | None) -> tuple[HwLayer, LayerStats]:
    layer = hw_layer(op, name)
    if op.split_num > 1:
        # Split-width mode (a line wider than the PDP line buffer): each part re-reads the
        # kernel-overlap columns of its neighbour (pdp_16x6x16_4x2_split: 20 of 16 columns read).
        read_w = op.in_w + (op.split_num - 1) * max(0, op.kernel_w - op.stride_x)
        layer = dataclasses.replace(layer, width=read_w)
    return layer, simulate(layer, hw, record_events=False)


def _time_cdp(op: CdpOp, hw: HwConfig, name: str, flying_pdp: PdpOp | None) -> tuple[HwLayer, LayerStats]:
    layer = CdpLayer(name, op.width, op.height, op.channels, op.precision, window=op.normalz_len)
    return layer, simulate(layer, hw, record_events=False)


# one timing per operation kind, and the kind's name in results
_TIMERS = {ConvOp: _time_conv, SdpOp: _time_sdp, PdpOp: _time_pdp, CdpOp: _time_cdp}
_KIND = {ConvOp: "conv", SdpOp: "sdp", PdpOp: "pdp", CdpOp: "cdp"}


def operation_timing(
    op: Operation, hw: HwConfig, *, name: str = "op", flying_pdp: PdpOp | None = None
) -> OperationTiming:
    """Model cycles of one decoded operation, op enable to interrupt. `flying_pdp` is the PDP pass an SDP
    operation feeds on the fly: the two run as one pipeline, paced by the slower."""
    layer, stats = _TIMERS[type(op)](op, hw, name, flying_pdp)
    kind = _KIND[type(op)]
    launch, pipe, done = fixed_latency(layer, hw)
    cycles = launch + stats.cycles + pipe + done
    return OperationTiming(kind, cycles, stats, launch, pipe, done, layer)


def run_operations(ops: list[Operation], hw: HwConfig, *, name: str) -> list[OperationTiming]:
    """Time a program's operations. An SDP pass feeding PDP on the fly is one pipelined operation
    (the PDP op of the pair is not timed again)."""
    out = []
    for i, op in enumerate(ops):
        if isinstance(op, PdpOp) and op.flying and i and isinstance(ops[i - 1], SdpOp):
            continue
        nxt = ops[i + 1] if i + 1 < len(ops) else None
        fed = nxt if isinstance(op, SdpOp) and op.to_pdp and isinstance(nxt, PdpOp) else None
        out.append(operation_timing(op, hw, name=f"{name}.{i}", flying_pdp=fed))
    return out


def run_program(path: str | Path, hw: HwConfig, *, strict: bool = True, outputs: bool = True) -> ProgramRun:
    """Decode and time a trace test and, with `outputs`, compute its output bytes bit-exactly from the
    program's memory images and recompute each CRC/file check on them (ProgramRun.checks)."""
    prog = parse_program(path)
    decoded = decode_program(prog)
    if strict and decoded.unknown:
        raise TraceError(
            f"{prog.name}: registers the model does not understand: {', '.join(decoded.unknown)} "
            "(pass strict=False / --allow-unknown-registers to time it anyway)"
        )
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


def check_supported(op: Operation, hw: HwConfig, name: str) -> None:
    """Refuse what the chosen build lacks, as the RTL does (nv_small has no SDP EW/LUT)."""
    sdp = op.sdp if isinstance(op, ConvOp) else op if isinstance(op, SdpOp) else None
    if sdp is not None and sdp.ew_enabled and hw.sdp.ew_throughput == 0:
        raise TraceError(
            f"{name}: the program enables SDP's element-wise (Y) unit (SDP.D_DP_EW_CFG_0.EW_BYPASS=0), which "
            f"{hw.name} does not have (sdp.ew_throughput = 0; nv_small is built with SDP_EW_DISABLE)"
        )
    if sdp is not None and sdp.lut_enabled and not hw.sdp.lut:
        raise TraceError(f"{name}: the program enables the SDP LUT, which {hw.name} does not have (sdp.lut = false)")


def unit_cycles(run: ProgramRun) -> dict[str, int]:
    """Busy cycles per unit summed over the program's operations."""
    out: dict[str, int] = {}
    for o in run.operations:
        for u, s in o.stats.units.items():
            out[u.value] = out.get(u.value, 0) + s.busy
    return out
