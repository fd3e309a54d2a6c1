"""Register programs for the mapper's hardware layers: ConvLayer / SdpLayer / PdpLayer -> trace tests.

A hardware layer names shapes and SDP modes only; a program also needs numbers. This module picks them
the way a quantized transformer uses each mode, with seeded random INT8 operands:

* convolution / matmul: INT8 (or INT16, 12-bit values) data and weights (the weights in the direct-convolution format, which is
  also where attention's K and V^T land after their re-layout), 32-bit accumulators (no CACC
  truncation), then SDP on the fly;
* bias PER_KERNEL: an INT16 bias per output channel from memory (B-RDMA, X1 ALU, left-shifted to the
  accumulator scale); bias PER_ELEMENT: a cube of the layer's precision from memory added by the X1 ALU (a
  partial sum of a matmul split over K, without SDP's EW unit);
* scale REG: a per-tensor multiplier in X2 MUL (attention's 1/sqrt(d) folded into QK^T); PER_KERNEL: a
  per-channel INT16 multiplier from memory (N-RDMA); PER_ELEMENT: the residual, a cube of the layer's
  precision from memory added by the X2 ALU (a residual add, fused or not, on configs without SDP's EW unit);
* relu: X1 ReLU (X2's after a residual there); requantization to the layer's precision by the output convertor (CVT scale and shift), chosen from the
  reduction depth so that the outputs spread over the INT8 range instead of saturating.

Every band of output rows of the plan (and in weight-stationary order every kernel tile) is one hardware
layer (full-input mode, tiling.py), so a split layer becomes one program of all of them in the plan's
order (emit.emit_sequence: ping-pong register groups, the operand the plan keeps flagged SKIP_*_RLS and
*_REUSE), each with its band of the input and its kernels. The expected output CRCs are the bit-exact
model's, and `model_cycles` is what the model predicts from the first op enable to the last interrupt
(run.operation_timing for one layer, the plan's chain, engine.conv.simulate_conv, for several): the
numbers the RTL run is compared with.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nvdla_mapper.numerics import layernorm_steps as norm
from nvdla_mapper.numerics.lut_steps import LUT_ENTRY_PEAK, sdp_table
from nvdla_sim.config import HwConfig
from nvdla_sim.engine.conv import simulate_conv
from nvdla_sim.engine.tiling import LoopOrder, TilePlan, band_shape, data_tiles, default_plan, kernel_tiles
from nvdla_sim.errors import TraceError
from nvdla_sim.layers import ConvLayer, ConvShape, HwLayer, OperandMode, PdpLayer, SdpLayer, SdpSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors import fixed_latency
from nvdla_sim.processors.conv.registers import CbufReuse
from nvdla_sim.processors.sdp.registers import (
    EwOperand,
    OperandSource,
    OperandUse,
    Rdma,
    SdpEwCfg,
    SdpOperand,
    SdpStageCfg,
    SdpStream,
)
from nvdla_sim.program.decode import Operation
from nvdla_sim.program.emit import (
    Alloc,
    Step,
    TraceProgram,
    conv_layer,
    emit_program,
    emit_sequence,
    place,
    pool_pass,
    sdp_pass,
)
from nvdla_sim.program.run import operation_timing
from nvdla_sim.registers.trace_io import SparseMemory
from nvdla_sim.units import sdp as sdp_unit
from nvdla_sim.units.lut import (
    LutParams,
    LutPath,
    lut_apply,
)
from nvdla_sim.units.memory_format import (
    Surface,
    cube_size,
    dc_weight_bytes,
    elements_per_atom,
    feature_image,
    read_cube,
)
from nvdla_sim.units.sdp import AluOp


@dataclass(frozen=True)
class _Range:
    """Seeded operands of one precision: integers uniform on [-bound, bound), requantized outputs aimed
    at `target` per standard deviation (about a quarter of the range). INT16 operands use 12 bits so
    that K-deep sums stay inside the 32 bits CACC hands to SDP."""

    bound: int
    std: float  # bound / sqrt(3), rounded: the programs' scales and shifts are computed from it
    target: float
    dtype: str


RANGES = {Precision.INT8: _Range(128, 73.9, 32.0, "i1"), Precision.INT16: _Range(2048, 1182.4, 8192.0, "<i2")}
SCORE_SCALE = 181  # a per-tensor X2 multiplier over an 8-bit MUL shift (0.707: the scale folded into QK^T)


@dataclass(frozen=True)
class LayerProgram:
    """One hardware layer's program, the layer it runs (a band of the mapped layer when split) and the
    model's prediction for it."""

    program: TraceProgram
    layer: HwLayer
    op: Operation
    model_cycles: int  # op enable -> interrupt (regrun.operation_timing)
    band: tuple[int, int] | None = None  # output rows [r0, r1) of the mapped layer (one hardware layer)
    kernels: tuple[int, int] | None = None  # its kernels [k0, k1)
    hardware_layers: int = 1  # a split layer's plan runs as this many hardware layers in one program


def program_name(name: str) -> str:
    """A layer name as a trace-test name (letters, digits, '_' and '-')."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") or "layer"


def layer_programs(
    layer: HwLayer,
    hw: HwConfig,
    *,
    plan: TilePlan | None = None,
    name: str | None = None,
    seed: int | None = None,
) -> list[LayerProgram]:
    """Programs for one mapped hardware layer (one per band of a split convolution). `seed` defaults to
    a hash of the name, so a layer's programs are the same in every run."""
    base = program_name(name or layer.name)
    rng = np.random.default_rng(zlib.crc32(base.encode()) if seed is None else seed)
    if layer.precision not in RANGES:
        raise TraceError(f"{base}: programs are emitted for INT8 and INT16 layers, not {layer.precision.value}")
    hw.check_precision(layer.precision)
    spec = getattr(layer, "sdp", None)
    if spec is not None and spec.uses_y:
        sdp_unit.elements_per_cycle(spec, hw)  # a build without the Y unit or its LUT: a one-line error
    if isinstance(layer, ConvLayer):
        return _conv_programs(layer, plan or default_plan(layer, hw), hw, base, rng)
    if isinstance(layer, SdpLayer):
        return [_sdp_program(layer, hw, base, rng)]
    if isinstance(layer, PdpLayer):
        return [_pdp_program(layer, hw, base, rng)]
    raise TraceError(f"{base}: emitting {type(layer).__name__} programs from the mapper is not supported")


# ---- quantization choices ----------------------------------------------------------------------------


def _rand(rng: np.random.Generator, shape: tuple[int, ...], p: Precision) -> np.ndarray:
    r = RANGES[p]
    return rng.integers(-r.bound, r.bound, shape).astype(r.dtype)


def requant(acc_std: float, p: Precision = Precision.INT8) -> tuple[int, int]:
    """(CVT scale, CVT shift) mapping an accumulator spread `acc_std` to the precision's target spread:
    the largest shift keeping the 16-bit signed scale in range."""
    ratio = RANGES[p].target / max(acc_std, 1.0)
    shift = min(31, max(0, math.floor(math.log2(32767 / ratio))))
    return max(1, round(ratio * 2**shift)), shift


def _acc_shift(acc_std: float, operand_std: float) -> int:
    """ALU left shift that lifts an operand of spread `operand_std` to about the accumulator's spread."""
    return max(0, min(31, round(math.log2(max(acc_std, 1.0) / operand_std))))


# ---- SDP stages ------------------------------------------------------------------------------------


@dataclass
class _SdpParts:
    x1: SdpStageCfg | None
    x2: SdpStageCfg | None
    streams: tuple[SdpStream, ...]
    inputs: list[tuple[int, np.ndarray]]
    out_std: float  # spread of the value reaching the convertor
    ew: SdpEwCfg | None = None
    lut: LutParams | None = None


def _sdp_parts(
    spec: SdpSpec,
    w: int,
    h: int,
    k: int,
    acc_std: float,
    p: Precision,
    hw: HwConfig,
    alloc: Alloc,
    rng: np.random.Generator,
    *,
    name: str,
    src: Surface | None = None,
) -> _SdpParts:
    inputs: list[tuple[int, np.ndarray]] = []
    streams: list[SdpStream] = []
    x1 = x2 = None
    std = acc_std
    y_std = acc_std  # the spread reaching Y, counting the X1 operand (std, kept for the programs measured
    # before Y programs existed, counts the accumulator alone)
    x1_relu = spec.relu and spec.scale is not OperandMode.PER_ELEMENT  # else after X2's residual add
    q = spec.operand_precision or p  # the X stages' per-element operands: INT16 beside INT8 data where set
    if spec.bias is OperandMode.PER_KERNEL:
        addr = alloc.take(2 * k)
        b = rng.integers(-(2**12), 2**12, k).astype("<i2")
        inputs.append((addr, b.view(np.uint8)))
        streams.append(SdpStream(Rdma.BRDMA, OperandMode.PER_KERNEL, 2, addr, use=OperandUse.ALU))
        shift = _acc_shift(acc_std, 2**12 / math.sqrt(3))
        y_std = math.hypot(acc_std, 2**12 / math.sqrt(3) * 2**shift)
        x1 = SdpStageCfg(
            SdpOperand(OperandSource.MEM, 0, shift, OperandMode.PER_KERNEL, 2), AluOp.ADD, None, False, x1_relu
        )
    elif spec.bias is OperandMode.PER_ELEMENT:
        surf = place(alloc, w, h, k, q, hw)
        inputs.append((surf.addr, feature_image(_rand(rng, (h, w, k), q), surf, q, hw)))
        streams.append(
            SdpStream(
                Rdma.BRDMA,
                OperandMode.PER_ELEMENT,
                q.bytes,
                surf.addr,
                surf.line_stride,
                surf.surface_stride,
                use=OperandUse.ALU,
            )
        )
        shift = _acc_shift(acc_std, RANGES[q].std)
        y_std = math.hypot(acc_std, RANGES[q].std * 2**shift)
        x1 = SdpStageCfg(
            SdpOperand(OperandSource.MEM, 0, shift, OperandMode.PER_ELEMENT, q.bytes),
            AluOp.ADD,
            None,
            False,
            spec.relu,
        )
    elif spec.bias is OperandMode.REG:
        x1 = SdpStageCfg(
            SdpOperand(OperandSource.REG, int(rng.integers(-512, 512)), 0), AluOp.ADD, None, False, spec.relu
        )
    elif spec.relu:
        x1 = SdpStageCfg(None, AluOp.ADD, None, False, True)
    if spec.scale is OperandMode.REG:
        x2 = SdpStageCfg(None, AluOp.ADD, SdpOperand(OperandSource.REG, SCORE_SCALE, 0), False, False, mul_shift=8)
        std = std * SCORE_SCALE / 256
        y_std = y_std * SCORE_SCALE / 256
    elif spec.scale is OperandMode.PER_KERNEL:
        addr = alloc.take(2 * k)
        m = rng.integers(2**14, 2**15, k).astype("<i2")
        inputs.append((addr, m.view(np.uint8)))
        streams.append(SdpStream(Rdma.NRDMA, OperandMode.PER_KERNEL, 2, addr, use=OperandUse.MUL))
        x2 = SdpStageCfg(
            None,
            AluOp.ADD,
            SdpOperand(OperandSource.MEM, 0, 0, OperandMode.PER_KERNEL, 2),
            False,
            False,
            mul_shift=15,
        )
        std = std * 0.75
        y_std = y_std * 0.75
    elif spec.scale is OperandMode.PER_ELEMENT:  # a residual added by X2's ALU (no EW unit: rules._fused_sdp)
        surf = place(alloc, w, h, k, q, hw)
        inputs.append((surf.addr, feature_image(_rand(rng, (h, w, k), q), surf, q, hw)))
        streams.append(
            SdpStream(
                Rdma.NRDMA, OperandMode.PER_ELEMENT, q.bytes, surf.addr, surf.line_stride, surf.surface_stride,
                use=OperandUse.ALU,
            )
        )  # fmt: skip
        shift = _acc_shift(y_std, RANGES[q].std)
        std = math.hypot(std, RANGES[q].std * 2**shift)
        y_std = math.hypot(y_std, RANGES[q].std * 2**shift)
        x2 = SdpStageCfg(
            SdpOperand(OperandSource.MEM, 0, shift, OperandMode.PER_ELEMENT, q.bytes), AluOp.ADD, None, False,
            spec.relu,
        )  # fmt: skip
    parts = _SdpParts(x1, x2, tuple(streams), inputs, std)
    if spec.uses_y:
        # a pass straight from memory (no X stage) sees the input's own range
        bound = RANGES[p].bound if src is not None and x1 is None and x2 is None else None
        parts.out_std = y_std
        _y_parts(parts, spec, name, w, h, k, p, hw, alloc, rng, src, bound)
    return parts


# ---- SDP's Y stage (EW operand, LUT) ---------------------------------------------------------------------


class _EwUse(enum.Enum):
    """What a per-element EW operand does in the mapper's lowering (rules.py)."""

    ADD = "add"  # the residual (ALU), or layernorm's -mean^2 before rsqrt
    MUL = "mul"  # softmax's broadcast 1/sum; layernorm's square (the input times itself)
    BOTH = "both"  # layernorm's normalize: MUL rstd, ALU -mean * rstd, one stream of (ALU, MUL) pairs


# The function behind a LUT pass, by the mapper's step name (rules.py: lower_softmax, lower_layernorm);
# any other LUT pass is an activation (GELU: lower_elementwise, the FFN's fused activation). Each is a
# function of the LUT's input scaled to [-4, 4]; the reciprocals take a sum or a variance, positive, so
# their input is offset onto [1, 9].
_LUT_FUNCTIONS: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {
    "exp": ("exp", np.exp),
    "recip": ("reciprocal", lambda v: 1.0 / (v + 5.0)),
    "rsqrt": ("reciprocal square root", lambda v: 1.0 / np.sqrt(v + 5.0)),
}
_GELU = ("GELU", lambda v: 0.5 * v * (1.0 + np.tanh(0.7978845608 * (v + 0.044715 * v**3))))
_EW_USES = {"square": _EwUse.MUL, "rsqrt": _EwUse.ADD}


def _step(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def lut_function(name: str) -> tuple[str, Callable[[np.ndarray], np.ndarray]]:
    """(description, function) of the LUT pass named `name`."""
    return _LUT_FUNCTIONS.get(_step(name), _GELU)


def ew_use(name: str, spec: SdpSpec) -> _EwUse:
    """What the per-element EW operand of the pass named `name` does."""
    if _step(name) == "normalize":
        return _EwUse.BOTH if spec.scale is not OperandMode.NONE else _EwUse.MUL
    return _EW_USES.get(_step(name), _EwUse.ADD)


def sdp_lut(func: Callable[[np.ndarray], np.ndarray], lo: int, hi: int, in_scale: float) -> LutParams:
    """numerics.lut_steps.sdp_table over the integer inputs [lo, hi) of func(x * in_scale), its entries
    scaled to +-2**14 at the largest |func| sampled over the range."""
    span = max(hi - lo, 2)
    inside = np.arange(lo, hi + 1, max(1, span // 1024), dtype=np.int64)
    out_scale = LUT_ENTRY_PEAK / max(float(np.max(np.abs(func(inside * in_scale)))), 1e-9)  # entries beyond saturate
    return sdp_table(lambda x: func(x * in_scale), lo, hi, out_scale)


def _pair_image(alu: np.ndarray, mul: np.ndarray, surf: Surface, p: Precision, hw: HwConfig) -> np.ndarray:
    """Two per-element operands [h, w, c] as one E-RDMA stream of (ALU, MUL) pairs: each atom's elements
    twice as wide (doc/hw/format.rst, SDP operand formats), lines of `w` such atoms."""
    return operand_image([alu, mul], surf, p, p.bytes, hw)


def operand_surface(alloc: Alloc, w: int, h: int, c: int, p: Precision, size: int, comps: int, hw: HwConfig) -> Surface:
    """Room for a per-element operand stream over a w x h x c cube of `p` data: `comps` components of
    `size` bytes per element, in atoms of the data's elements (operand_image)."""
    line = w * elements_per_atom(p, hw) * comps * size
    surf = Surface(alloc.take(0), line, line * h)
    alloc.take(-(-c // elements_per_atom(p, hw)) * surf.surface_stride)
    return surf


def operand_image(comps: list[np.ndarray], surf: Surface, p: Precision, size: int, hw: HwConfig) -> np.ndarray:
    """Per-element operands [h, w, c] (one or two components: ALU, MUL) of `size` bytes as an SDP RDMA
    reads them over a cube of `p` data: per atom of the data's elements, each element's components of
    `size` bytes (BytesPerAtom = ElementPerAtom x components x bytes, doc/hw/format.rst and
    nvdla_sim.processors.sdp.execute._operand), lines of `w` such atoms, surfaces of an atom's channels."""
    h, w, c = comps[0].shape
    epa = elements_per_atom(p, hw)
    surfaces = -(-c // epa)
    dt = np.dtype("i1") if size == 1 else np.dtype("<i2")
    vals = np.zeros((surfaces, h, w, epa, len(comps)), dt)
    for i, v in enumerate(comps):
        padded = np.zeros((h, w, surfaces * epa), dt)
        padded[:, :, :c] = v
        vals[..., i] = padded.reshape(h, w, surfaces, epa).transpose(2, 0, 1, 3)
    out = np.zeros(surfaces * surf.surface_stride, np.uint8)
    raw = vals.view(np.uint8).reshape(surfaces, h, -1)
    for s_ in range(surfaces):
        for y in range(h):
            o = s_ * surf.surface_stride + y * surf.line_stride
            out[o : o + raw.shape[2]] = raw[s_, y]
    return out


def _y_parts(
    parts: _SdpParts,
    spec: SdpSpec,
    name: str,
    w: int,
    h: int,
    k: int,
    p: Precision,
    hw: HwConfig,
    alloc: Alloc,
    rng: np.random.Generator,
    src: Surface | None,
    bound: int | None,
) -> None:
    """The Y stage as the mapper's lowering uses it: an element-wise operand (a register value, or a
    cube from E-RDMA) and/or a LUT function, numbers chosen so the values spread over the datapath."""
    x_std = parts.out_std  # the value reaching Y
    alu = mul = None
    truncate = 0
    if spec.eltwise is OperandMode.REG:
        alu = EwOperand(OperandSource.REG, round(x_std))
    elif spec.eltwise is OperandMode.PER_ELEMENT:
        use = ew_use(name, spec)
        r = RANGES[p]
        if use is _EwUse.BOTH:
            surf = operand_surface(alloc, w, h, k, p, p.bytes, 2, hw)
            a, m = _rand(rng, (h, w, k), p), _rand(rng, (h, w, k), p)
            parts.inputs.append((surf.addr, _pair_image(a, m, surf, p, hw)))
            stream_use = OperandUse.BOTH
        else:
            if use is _EwUse.MUL and _step(name) == "square" and src is not None:
                surf = src  # the input times itself: E-RDMA reads the source cube again
            else:
                surf = place(alloc, w, h, k, p, hw)
                parts.inputs.append((surf.addr, feature_image(_rand(rng, (h, w, k), p), surf, p, hw)))
            stream_use = OperandUse.MUL if use is _EwUse.MUL else OperandUse.ALU
        parts.streams = (
            *parts.streams,
            SdpStream(
                Rdma.ERDMA, OperandMode.PER_ELEMENT, p.bytes, surf.addr, surf.line_stride, surf.surface_stride,
                use=stream_use,
            ),
        )  # fmt: skip
        if use in (_EwUse.MUL, _EwUse.BOTH):  # x * op >> truncate keeps x's spread
            truncate = max(0, round(math.log2(r.std)))
            mul = EwOperand(OperandSource.MEM)
            x_std = x_std * r.std / 2**truncate
        if use in (_EwUse.ADD, _EwUse.BOTH):  # the operand lifted to x's spread by its convertor
            lift = max(1, min(2**15 - 1, round(x_std / r.std)))
            alu = EwOperand(OperandSource.MEM, cvt_bypass=lift == 1, cvt_scale=lift)
            x_std = x_std * math.sqrt(2)
    lut = None
    if spec.lut:
        _, func = lut_function(name)
        # the table covers +-4 spreads of its input (or the input's range); beyond, the end slopes extrapolate
        span = bound if bound is not None else 4 * x_std
        lut = sdp_lut(func, -round(span), round(span), 4.0 / max(span, 1.0))
        sample = np.linspace(-span, span, 257).round().astype(np.int64)
        x_std = max(float(np.std(lut_apply(sample, lut, path=LutPath.SDP)[0])), 1.0)
    parts.ew = SdpEwCfg(alu, AluOp.ADD, mul, False, truncate, lut is not None)
    parts.lut = lut
    parts.out_std = x_std


# ---- convolutions --------------------------------------------------------------------------------------


def _conv_programs(
    layer: ConvLayer, plan: TilePlan, hw: HwConfig, base: str, rng: np.random.Generator
) -> list[LayerProgram]:
    if layer.image_input or layer.pool is not None or layer.weight_bytes is not None or layer.sparse_mac:
        raise TraceError(
            f"{base}: emitting image-input, fused-pooling, compressed-weight or sparse-MAC convolutions "
            "is not supported"
        )
    s = layer.shape
    p = layer.precision
    images = [_rand(rng, (s.in_h, s.in_w, s.in_c), p) for _ in range(layer.images)]
    wt = _rand(rng, (s.out_k, s.kernel_h, s.kernel_w, s.in_c), p)
    acc_std = RANGES[p].std ** 2 * math.sqrt(s.in_c * s.kernel_w * s.kernel_h)
    alloc = Alloc()
    steps, layers = [], []
    for kt, (image, rows), reuse in plan_hardware_layers(layer, plan):
        step, sub, lut = _conv_step(layer, hw, images[image], wt, rows, kt, acc_std, rng, plan, alloc, reuse)
        steps.append(step)
        layers.append(sub)
    return [_program(layer, plan, hw, base, emit_sequence(base, steps, hw, lut=lut), steps, layers[0].shape)]


def plan_hardware_layers(
    layer: ConvLayer, plan: TilePlan
) -> list[tuple[tuple[int, int], tuple[int, tuple[int, int]], CbufReuse]]:
    """The plan's hardware layers in its order (tile_steps): (kernels [k0, k1), (image, output rows [r0,
    r1)), what it keeps in and takes from CBUF): every band of each image, for each kernel tile in
    weight-stationary order, with the operand the plan keeps kept (SKIP_*_RLS) and taken (*_REUSE)."""
    bands = data_tiles(layer, plan.rows_per_tile)
    ws = plan.order is LoopOrder.WEIGHT_STATIONARY
    tiles = kernel_tiles(layer, plan.kernels_per_tile) if ws else [(0, layer.shape.out_k)]
    return [
        (kt, band, _kept(i, j, len(bands), len(tiles)) if ws else CbufReuse())
        for j, kt in enumerate(tiles)
        for i, band in enumerate(bands)
    ]


def _program(layer: ConvLayer, plan: TilePlan, hw: HwConfig, base: str, prog, steps: list, first: ConvShape):
    """A convolution's program and the model's cycles for it: one hardware layer, op enable to interrupt;
    several, which overlap (the next one fetches while the previous computes), the mapper's plan
    simulation with the fixed latencies of one layer (launch, pipeline, completion)."""
    if len(steps) == 1:
        timing = operation_timing(steps[0].op, hw, name=base)
        sub = dataclasses.replace(layer, name=base, shape=first)
        return LayerProgram(prog, sub, steps[0].op, timing.cycles, (0, first.out_h), (0, first.out_k))
    cycles = simulate_conv(layer, hw, plan, record_events=False).cycles + sum(fixed_latency(layer, hw))
    return LayerProgram(prog, layer, steps[-1].op, cycles, None, None, len(steps))


def _kept(band: int, tile: int, bands: int, tiles: int) -> CbufReuse:
    """Weight-stationary order keeps a kernel tile's weights in CBUF across the bands (or, with one band,
    the input across the kernel tiles): the first hardware layer fetches and keeps it, the next ones take
    it, and all but the last keep it again."""
    if bands > 1:
        return CbufReuse(weight_reuse=band > 0, skip_weight_rls=band < bands - 1)
    return CbufReuse(data_reuse=tile > 0, skip_data_rls=tile < tiles - 1)


def _conv_step(layer, hw, x, wt, rows, kernels, acc_std, rng, plan: TilePlan, alloc: Alloc, reuse: CbufReuse):
    """One hardware layer of a convolution: output rows [r0, r1) of kernels [k0, k1) of one image `x`, with
    its own input band, weights, SDP operands and output in memory. Returns (its Step, the layer it runs:
    one image)."""
    s, p = layer.shape, layer.precision
    r0, r1 = rows
    wt = wt[kernels[0] : kernels[1]]
    k = len(wt)
    sub, i0, i1 = band_shape(dataclasses.replace(s, out_k=k), r0, r1)
    parts = _sdp_parts(layer.sdp, sub.out_w, sub.out_h, k, acc_std, p, hw, alloc, rng, name=layer.name)
    scale, shift = requant(parts.out_std, p)
    op, din, waddr, oaddr = conv_layer(
        sub,
        p,
        hw,
        alloc,
        x1=parts.x1,
        x2=parts.x2,
        cvt=(0, scale, shift),
        streams=parts.streams,
        ew=parts.ew,
        data_banks=plan.data_banks,
        weight_banks=plan.weight_banks,
        reuse=reuse,
    )
    inputs = [
        *parts.inputs,
        (din.addr, feature_image(x[i0:i1], din, p, hw)),
        (waddr, dc_weight_bytes(wt, p, hw)),
    ]
    step = Step(op, inputs, [(oaddr, cube_size(op.out, k, p, hw))])
    return step, dataclasses.replace(layer, shape=sub, images=1), parts.lut


# ---- standalone SDP and PDP ------------------------------------------------------------------------------


def _sdp_program(layer: SdpLayer, hw: HwConfig, base: str, rng: np.random.Generator) -> LayerProgram:
    p = layer.precision
    w, h, c = layer.width, layer.height, layer.channels
    alloc = Alloc()
    src = place(alloc, w, h, c, p, hw)
    dst = place(alloc, w, h, c, p, hw)
    parts = _sdp_parts(layer.sdp, w, h, c, RANGES[p].std, p, hw, alloc, rng, name=layer.name, src=src)
    # the sum of input and operand, back to the layer's precision
    scale, shift = requant(parts.out_std * (math.sqrt(2) if parts.x1 and parts.x1.alu else 1.0), p)
    op = sdp_pass(w, h, c, flying=False, src=src, dst=dst, x1=parts.x1, x2=parts.x2, cvt=(0, scale, shift),
                  streams=parts.streams, ew=parts.ew)  # fmt: skip
    inputs = [(src.addr, feature_image(_rand(rng, (h, w, c), p), src, p, hw)), *parts.inputs]
    prog = emit_program(base, op, inputs, [(dst.addr, cube_size(dst, c, p, hw))], hw, lut=parts.lut)
    return LayerProgram(prog, layer, op, operation_timing(op, hw, name=base).cycles)


def _pdp_program(layer: PdpLayer, hw: HwConfig, base: str, rng: np.random.Generator) -> LayerProgram:
    p, spec = layer.precision, layer.pool
    w, h, c = layer.width, layer.height, layer.channels
    ow, oh = spec.out_size(w, h)
    alloc = Alloc()
    src = place(alloc, w, h, c, p, hw)
    dst: Surface = place(alloc, ow, oh, c, p, hw)
    # padded positions add zero to an average (max and min pooling skip them, as the hardware does)
    op = pool_pass(w, h, c, spec, src, dst, p, (0,) * 7)
    inputs = [(src.addr, feature_image(_rand(rng, (h, w, c), p), src, p, hw))]
    prog = emit_program(base, op, inputs, [(dst.addr, cube_size(dst, c, p, hw))], hw)
    return LayerProgram(prog, layer, op, operation_timing(op, hw, name=base).cycles)


# ---- a layer with given operands (a trained model's; validation/nvdla_rtl/classifier_programs.py) ----------


def given_conv_program(
    name: str,
    layer: ConvLayer,
    plan: TilePlan,
    hw: HwConfig,
    data: np.ndarray,
    kernels: np.ndarray,
    sdp: sdp_unit.SdpParams,
    *,
    expect: np.ndarray | None = None,
    operand: Precision | None = None,
) -> LayerProgram:
    """A convolution-pipeline layer with the operands and SDP numbers a model gives (a trained model's INT8
    matmul: data [H, W, C], kernels [K, R, S, C], the X1 bias and X2 multipliers SDP reads per kernel from
    memory or from a register, a Y stage (_given_y), the output convertor and output precision), as the
    plan's hardware layers in its order and CBUF split (as _conv_programs: every band, for each kernel tile
    in weight-stationary order, with the kept operand kept and taken), each with its band of the input,
    its kernels and their SDP operands (per-element ones of `operand`'s size). The expected CRCs are the
    model's (emit_sequence runs the program through the bit-exact model); `expect`, the output [H', W', K]
    the caller computed, must be what they check (else a TraceError). Timed with the layer's SDP spec when
    it names a Y stage or another output precision (the mapper's), else with the streams the numbers need."""
    base = program_name(name)
    s, p = layer.shape, layer.precision
    hw.check_precision(p)
    out_p = sdp.out_precision
    if layer.images != 1 or layer.pool is not None or layer.weight_bytes is not None or layer.image_input:
        raise TraceError(f"{base}: given-operand programs are emitted for plain one-image convolutions")
    want = (s.in_h, s.in_w, s.in_c), (s.out_k, s.kernel_h, s.kernel_w, s.in_c)
    if data.shape != want[0] or kernels.shape != want[1]:
        raise TraceError(f"{base}: operands {data.shape} and {kernels.shape}; the layer takes {want[0]} and {want[1]}")
    alloc = Alloc()
    steps, wanted = [], []
    lut = None
    for (k0, k1), (_, (r0, r1)), reuse in plan_hardware_layers(layer, plan):
        sub, i0, i1 = band_shape(dataclasses.replace(s, out_k=k1 - k0), r0, r1)
        inputs: list[tuple[int, np.ndarray]] = []
        streams: list[SdpStream] = []
        rows = (r0, r1, s.out_h)
        ks = (k0, k1, s.out_k)
        x1 = _given_stage(sdp.x1, Rdma.BRDMA, ks, rows, alloc, inputs, streams, base, p, hw, operand)
        x2 = _given_stage(sdp.x2, Rdma.NRDMA, ks, rows, alloc, inputs, streams, base, p, hw, operand)
        ew, lut = _given_y(sdp.y, ks, alloc, inputs, streams, base, rows, p, hw)
        op, din, waddr, oaddr = conv_layer(
            sub, p, hw, alloc, x1=x1, x2=x2, cvt=(sdp.cvt.offset, sdp.cvt.scale, sdp.cvt.shift),
            streams=tuple(streams), ew=ew, data_banks=plan.data_banks, weight_banks=plan.weight_banks, reuse=reuse,
            out_precision=out_p,
        )  # fmt: skip
        inputs += [(din.addr, feature_image(data[i0:i1], din, p, hw)), (waddr, dc_weight_bytes(kernels[k0:k1], p, hw))]
        steps.append(Step(op, inputs, [(oaddr, cube_size(op.out, k1 - k0, out_p, hw))]))
        wanted.append((op.out, sub, expect[r0:r1, :, k0:k1] if expect is not None else None))
    mem = SparseMemory()
    prog = emit_sequence(base, steps, hw, lut=lut, memory=mem)
    # the output channels (the atoms' padding lanes hold what SDP made of zeros, which expect does not say)
    for surf, sub, want_out in wanted:
        got = read_cube(mem, surf, sub.out_w, sub.out_h, sub.out_k, out_p, hw)[:, :, : sub.out_k]
        if want_out is not None and not np.array_equal(got, want_out):
            raise TraceError(
                f"{base}: the program's output is not the given one (the SDP numbers were not emitted as run)"
            )
    # timed with the SDP operand streams the numbers need (the given layer may name none)
    mapped = layer.sdp.uses_y or layer.sdp.out_precision is not None
    timed = layer if mapped else dataclasses.replace(layer, sdp=_given_spec(sdp))
    return _program(timed, plan, hw, base, prog, steps, steps[0].op.shape if len(steps) == 1 else s)


def given_sdp_program(
    name: str,
    layer: SdpLayer,
    hw: HwConfig,
    data: np.ndarray,
    sdp: sdp_unit.SdpParams,
    *,
    expect: np.ndarray | None = None,
    operand: Precision | None = None,
) -> LayerProgram:
    """A standalone SDP pass with the data [H, W, C] and numbers a model gives: X stages (_given_stage,
    per-element operands of `operand`'s size), a Y stage (_given_y), the output convertor and precision.
    `expect`, the output [H, W, C] the caller computed, must be what the program checks."""
    base = program_name(name)
    p, w, h, c = layer.precision, layer.width, layer.height, layer.channels
    hw.check_precision(p)
    if data.shape != (h, w, c):
        raise TraceError(f"{base}: data {data.shape}; the pass takes {(h, w, c)}")
    out_p = sdp.out_precision
    alloc = Alloc()
    src = place(alloc, w, h, c, p, hw)
    dst = place(alloc, w, h, c, out_p, hw)
    inputs: list[tuple[int, np.ndarray]] = [(src.addr, feature_image(data.astype(RANGES[p].dtype), src, p, hw))]
    streams: list[SdpStream] = []
    rows, ks = (0, h, h), (0, c, c)
    x1 = _given_stage(sdp.x1, Rdma.BRDMA, ks, rows, alloc, inputs, streams, base, p, hw, operand)
    x2 = _given_stage(sdp.x2, Rdma.NRDMA, ks, rows, alloc, inputs, streams, base, p, hw, operand)
    ew, lut = _given_y(sdp.y, ks, alloc, inputs, streams, base, rows, p, hw)
    op = sdp_pass(
        w, h, c, flying=False, src=src, dst=dst, precision=p, out_precision=out_p, x1=x1, x2=x2,
        cvt=(sdp.cvt.offset, sdp.cvt.scale, sdp.cvt.shift), streams=tuple(streams), ew=ew,
    )  # fmt: skip
    mem = SparseMemory()
    prog = emit_sequence(base, [Step(op, inputs, [(dst.addr, cube_size(dst, c, out_p, hw))])], hw, lut=lut, memory=mem)
    got = read_cube(mem, dst, w, h, c, out_p, hw)[:, :, :c]
    if expect is not None and not np.array_equal(got, expect):
        raise TraceError(f"{base}: the program's output is not the given one (the SDP numbers were not emitted as run)")
    return LayerProgram(prog, layer, op, operation_timing(op, hw, name=base).cycles)


def _given_y(
    y: sdp_unit.EwStage | None,
    kernels: tuple[int, int, int],
    alloc: Alloc,
    inputs: list,
    streams: list,
    base: str,
    rows: tuple[int, int, int] | None = None,
    p: Precision = Precision.INT8,
    hw: HwConfig | None = None,
) -> tuple[SdpEwCfg | None, LutParams | None]:
    """The Y stage's registers for given numbers (None: bypassed), and its LUT: each of its multiplier and
    ALU a 32-bit register value, 16-bit values per kernel from E-RDMA (both per kernel: one stream of
    (ALU, MUL) pairs), or one of them per element [P, K] (a residual: values of the data's precision, read
    as a feature cube; output rows [r0, r1) of the layer's h, `rows`), through their convertors; those of
    kernels [k0, k1) of the layer's k."""
    if y is None:
        return None, None
    if y.alu_op is not sdp_unit.AluOp.ADD or y.mul_prelu:
        raise TraceError(f"{base}: given Y stages add (no max/min/EQL/PReLU)")
    dims = (np.ndim(y.alu_operand), np.ndim(y.mul_operand))  # None and register values: 0
    if 2 in dims and min(dims) > 0:
        raise TraceError(f"{base}: a Y stage with a per-element operand and another from memory is not emitted")
    for v, use in ((y.alu_operand, OperandUse.ALU), (y.mul_operand, OperandUse.MUL)):
        if np.ndim(v) == 2:
            if rows is None or hw is None:
                raise TraceError(f"{base}: a per-element Y operand needs the layer's rows")
            streams.append(_element_stream(v, use, Rdma.ERDMA, kernels, rows, alloc, inputs, base, p, hw))
    stream = _kernel_stream(
        Rdma.ERDMA, _kernel_values(y.alu_operand, kernels, base), _kernel_values(y.mul_operand, kernels, base),
        alloc, inputs,
    )  # fmt: skip
    if stream is not None:
        streams.append(stream)

    def operand(v, cvt: sdp_unit.Convertor | None) -> EwOperand | None:
        if v is None:
            return None
        if np.ndim(v) == 0:
            if not -(2**31) <= int(v) < 2**31:
                raise TraceError(f"{base}: a Y register operand outside 32 bits ({int(v)})")
            return EwOperand(OperandSource.REG, int(v))
        if cvt is None:
            return EwOperand(OperandSource.MEM)
        return EwOperand(OperandSource.MEM, 0, False, cvt.offset, cvt.scale, cvt.shift)

    ew = SdpEwCfg(
        operand(y.alu_operand, y.alu_cvt), AluOp.ADD, operand(y.mul_operand, y.mul_cvt), False, y.mul_truncate,
        y.lut is not None,
    )  # fmt: skip
    return ew, y.lut


def _given_spec(sdp: sdp_unit.SdpParams) -> SdpSpec:
    """The SDP units and operand modes given SDP numbers use, for timing: the X1 stream (its bias, with its
    multipliers as pairs), and X2's (its multipliers per kernel, or a residual per element)."""
    modes = (OperandMode.NONE, OperandMode.REG, OperandMode.PER_KERNEL, OperandMode.PER_ELEMENT)

    def mode(st: sdp_unit.Stage | None) -> OperandMode:
        if st is None:
            return OperandMode.NONE
        used = [modes[min(np.ndim(v), 2) + 1] for v in (st.alu_operand, st.mul_operand) if v is not None]
        return max(used, key=modes.index, default=OperandMode.NONE)

    relu = any(st is not None and st.relu for st in (sdp.x1, sdp.x2))
    pairs = sdp.x1 is not None and np.ndim(sdp.x1.alu_operand) == np.ndim(sdp.x1.mul_operand) == 1
    return SdpSpec(bias=mode(sdp.x1), scale=mode(sdp.x2), relu=relu, bias_pairs=pairs)


def _given_stage(
    st: sdp_unit.Stage | None,
    rdma: Rdma,
    kernels: tuple[int, int, int],
    rows: tuple[int, int, int],
    alloc: Alloc,
    inputs: list,
    streams: list,
    base: str,
    p: Precision,
    hw: HwConfig,
    operand: Precision | None = None,
) -> SdpStageCfg | None:
    """An X stage's registers for given numbers: each operand a register value (a scalar), 16-bit values
    per kernel from memory through `rdma` (both operands per kernel: one stream of (ALU, MUL) pairs), or
    one operand per element [P, K] (a residual added, or a per-row statistic multiplied: values of
    `operand`'s size, the layer's precision by default, read in atoms of the data's elements), those of
    kernels [k0, k1) of the layer's k (`kernels`) and output rows [r0, r1) of its h (`rows`)."""
    if st is None:
        return None
    if st.alu_op is not sdp_unit.AluOp.ADD or st.prelu:
        raise TraceError(f"{base}: given SDP stages add (no max/min/PReLU)")
    dims = (np.ndim(st.alu_operand), np.ndim(st.mul_operand))  # None and register values: 0
    if 2 in dims and min(dims) > 0:
        raise TraceError(f"{base}: an X stage with a per-element operand and another from memory is not emitted")

    def from_memory(mode: OperandMode, size: int, shift: int) -> SdpOperand:
        return SdpOperand(OperandSource.MEM, 0, shift, mode, size)

    alu_k, mul_k = _kernel_values(st.alu_operand, kernels, base), _kernel_values(st.mul_operand, kernels, base)
    alu = mul = None
    stream = _kernel_stream(rdma, alu_k, mul_k, alloc, inputs)
    if stream is not None:
        streams.append(stream)
        alu = from_memory(OperandMode.PER_KERNEL, 2, st.alu_shift) if alu_k is not None else None
        mul = from_memory(OperandMode.PER_KERNEL, 2, 0) if mul_k is not None else None
    for v, use in ((st.alu_operand, OperandUse.ALU), (st.mul_operand, OperandUse.MUL)):
        if np.ndim(v) != 2:  # per element: codes [P, K] (a residual, a statistic), the band's rows as a cube
            continue
        el = _element_stream(v, use, rdma, kernels, rows, alloc, inputs, base, p, hw, operand or p)
        streams.append(el)
        if use is OperandUse.ALU:
            alu = from_memory(OperandMode.PER_ELEMENT, el.size_bytes, st.alu_shift)
        else:
            mul = from_memory(OperandMode.PER_ELEMENT, el.size_bytes, 0)
    for v in (st.alu_operand, st.mul_operand):
        if v is not None and np.ndim(v) == 0 and not -(2**15) <= int(v) < 2**15:
            raise TraceError(f"{base}: an SDP register operand outside 16 bits ({int(v)})")
    if st.alu_operand is not None and np.ndim(st.alu_operand) == 0:
        alu = SdpOperand(OperandSource.REG, int(st.alu_operand), st.alu_shift)
    if st.mul_operand is not None and np.ndim(st.mul_operand) == 0:
        mul = SdpOperand(OperandSource.REG, int(st.mul_operand), 0)
    return SdpStageCfg(alu, AluOp.ADD, mul, False, st.relu, mul_shift=st.mul_shift)


def _kernel_values(v, kernels: tuple[int, int, int], base: str) -> np.ndarray | None:
    """An SDP operand given per kernel (a 1-D array of the layer's k, 16-bit values): those of kernels
    [k0, k1); None for a register value, a per-element operand or none."""
    if v is None or np.ndim(v) != 1:
        return None
    k0, k1, k = kernels
    arr = np.asarray(v, np.int64)
    if arr.shape != (k,):
        raise TraceError(f"{base}: {arr.shape[0]} per-kernel SDP operands for {k} kernels")
    if arr.min(initial=0) < -(2**15) or arr.max(initial=0) >= 2**15:
        raise TraceError(f"{base}: an SDP operand outside 16 bits ({arr.min()}..{arr.max()})")
    return arr[k0:k1]


def _kernel_stream(
    rdma: Rdma, alu: np.ndarray | None, mul: np.ndarray | None, alloc: Alloc, inputs: list
) -> SdpStream | None:
    """The per-kernel operands of one RDMA as 16-bit values in memory: one stream of (ALU, MUL) pairs when
    both are given, else the one given (None: neither)."""
    comps = [(a, u) for a, u in ((alu, OperandUse.ALU), (mul, OperandUse.MUL)) if a is not None]
    if not comps:
        return None
    addr = alloc.take(2 * len(comps) * len(comps[0][0]))
    inputs.append((addr, np.stack([a for a, _ in comps], 1).astype("<i2").view(np.uint8).ravel()))
    return SdpStream(rdma, OperandMode.PER_KERNEL, 2, addr, use=OperandUse.BOTH if len(comps) == 2 else comps[0][1])


def _element_stream(
    v,
    use: OperandUse,
    rdma: Rdma,
    kernels: tuple[int, int, int],
    rows: tuple[int, int, int],
    alloc: Alloc,
    inputs: list,
    base: str,
    p: Precision,
    hw: HwConfig,
    q: Precision | None = None,
) -> SdpStream:
    """An SDP operand given per element (codes [P, K], P pixels of the layer's h rows): the cube of output
    rows [r0, r1) and kernels [k0, k1) in memory, of `q`'s size (the data's `p` by default: a feature cube;
    else in atoms of the data's elements, operand_image), and its stream."""
    (k0, k1, k), (r0, r1, h), q = kernels, rows, q or p
    arr = np.asarray(v, np.int64)
    if arr.shape[1] != k or arr.shape[0] % h:
        raise TraceError(f"{base}: a per-element SDP operand {arr.shape} for {h} rows of {k} kernels")
    cube = arr.reshape(h, arr.shape[0] // h, k)[r0:r1, :, k0:k1]
    top = 1 << (8 * q.bytes - 1)
    if cube.min(initial=0) < -top or cube.max(initial=0) >= top:
        raise TraceError(f"{base}: a per-element SDP operand outside {q.value}")
    if q is p:  # a feature cube of the data's precision
        surf = place(alloc, cube.shape[1], r1 - r0, k1 - k0, p, hw)
        inputs.append((surf.addr, feature_image(cube.astype(RANGES[p].dtype), surf, p, hw)))
    else:  # atoms of the data's elements, each element `q`'s bytes
        surf = operand_surface(alloc, cube.shape[1], r1 - r0, k1 - k0, p, q.bytes, 1, hw)
        inputs.append((surf.addr, operand_image([cube], surf, p, q.bytes, hw)))
    return SdpStream(rdma, OperandMode.PER_ELEMENT, q.bytes, surf.addr, surf.line_stride, surf.surface_stride, use=use)


# ---- a LayerNorm's steps, with the numbers they compute (numerics.layernorm_steps) ------------------------


def layernorm_programs(
    name: str, layers: dict[str, tuple[HwLayer, TilePlan | None]], hw: HwConfig, *, rms: bool, seed: int
) -> dict[str, LayerProgram | TraceError]:
    """Programs for every step of one LayerNorm (RMSNorm) as the mapper lowers it (`layers`: step name ->
    its hardware layer and plan), each with the operands and numbers the program computes: seeded rows x
    (INT8; their spreads within twice each other, offsets and gamma, beta around 0 and 1), the whole
    program run in integer arithmetic (numerics.layernorm_steps), and each step emitted with its inputs,
    operands and SDP numbers and checked against what that run wrote (the emitted program is also run
    through the bit-exact model, which must agree). So the steps run on an RTL one by one compute the
    LayerNorm of x, step after step. A step that cannot be emitted (the normalisation's INT16-to-INT8
    output, which SDP does not have: processors.sdp.execute.apply_sdp) gives its TraceError instead of a program."""
    steps = norm.RMSNORM_STEPS if rms else norm.LAYERNORM_STEPS
    if set(layers) != set(steps):
        raise TraceError(f"{name}: layernorm steps {sorted(layers)}; programs are emitted for {list(steps)}")
    first = layers[steps[0]][0]
    m, n = (first.width * first.height, first.channels) if isinstance(first, SdpLayer) else _rows_cols(first)
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (m, n)) * rng.uniform(1, 2, (m, 1)) + (0 if rms else rng.normal(0, 1, (m, 1)))
    gamma, beta = rng.normal(1, 0.3, n), None if rms else rng.normal(0, 0.2, n)
    s_x = float(np.max(np.abs(x))) / 127
    qx = np.clip(np.round(x / s_x), -128, 127).astype(np.int64)
    real = qx * s_x
    d = real if rms else real - real.mean(axis=1, keepdims=True)
    ref = d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5) * gamma + (0 if beta is None else beta)
    calls: dict[str, tuple] = {}

    def conv(step_name, a, w, params, precision):
        out = sdp_unit.sdp_apply(np.asarray(a, np.int64) @ np.asarray(w, np.int64).T, params).values.astype(np.int64)
        calls[_step(step_name)] = (a, w, params, out)
        return out

    def sdp(step_name, codes, params):
        out = sdp_unit.sdp_apply(np.asarray(codes, np.int64), params).values.astype(np.int64)
        calls[_step(step_name)] = (codes, None, params, out)
        return out

    s_y = float(np.max(np.abs(ref))) / 127
    norm.run_layernorm(name, qx, s_x, gamma, beta, 1e-5, norm.norm_range(real, rms=rms), s_y, conv, sdp, rms=rms)
    out: dict[str, LayerProgram | TraceError] = {}
    for step in steps:
        try:
            out[step] = _norm_step(name, step, layers[step], calls[step], hw)
        except TraceError as e:
            out[step] = e
    return out


def _norm_step(name: str, step: str, layer_plan: tuple, call: tuple, hw: HwConfig) -> LayerProgram:
    """One LayerNorm step's program with the inputs, operands and numbers `call` recorded."""
    layer, plan = layer_plan
    a, w, params, result = call
    base = f"{name}.{step}"
    # per-element operands of another size than the data's: INT16 statistics over INT8 data
    operand = layer.sdp.operand_precision
    if isinstance(layer, ConvLayer):
        s = layer.shape
        p = layer.precision
        data = a.reshape(s.in_h, s.in_w, s.in_c).astype(RANGES[p].dtype)
        kernels = w.reshape(s.out_k, 1, 1, s.in_c).astype(RANGES[p].dtype)
        expect = result.reshape(s.out_h, s.out_w, s.out_k)
        return given_conv_program(
            base, layer, plan or default_plan(layer, hw), hw, data, kernels, params, expect=expect, operand=operand
        )
    data = a.reshape(layer.height, layer.width, layer.channels)
    expect = result.reshape(layer.height, layer.width, layer.channels)
    return given_sdp_program(base, layer, hw, data, params, expect=expect, operand=operand)


def _rows_cols(layer: ConvLayer) -> tuple[int, int]:
    """A matmul layer's rows (output pixels) and input channels."""
    s = layer.shape
    return s.in_h * s.in_w, s.in_c
