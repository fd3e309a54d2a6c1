"""Register programs of our own, for NVIDIA's nv_small RTL: transformer-shaped layers and timing probes.

Each program is generated deterministically (fixed seeds) by nvdla_sim.program.emit, with random INT8 data
and the model's output CRC in its check. Run on the RTL by the reference runner, a pass means the RTL
produced the model's bytes; the cycles it measured are the reference for the model's timing:

    python -m nvdla_validation.nvdla_rtl.own_programs build/own            # write the programs
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --tests-dir build/own \\
        --out validation/data/nvdla_rtl_own.json                     # run them on the RTL
    python -m nvdla_validation.nvdla_rtl.own_programs build/own16 --suite int16     # INT16, for nv_full
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --project nv_full --tests-dir build/own16 \\
        --out validation/data/nvdla_rtl_own16_nv_full.json
    python -m nvdla_validation.nvdla_rtl.own_programs build/ownf16 --suite fp16     # FP16, for nv_full
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --project nv_full --tests-dir build/ownf16 \\
        --out validation/data/nvdla_rtl_ownf16_nv_full.json
    python -m nvdla_validation.nvdla_rtl.own_programs build/rbk --suite reshape    # Rubik and BDMA, nv_full
    python -m nvdla_validation.nvdla_rtl.run_reference SRC --project nv_full --tests-dir build/rbk \\
        --out validation/data/nvdla_rtl_reshape_nv_full.json

CI regenerates the programs (no RTL, no NVIDIA files) and requires the model's CRCs to equal the ones
the RTL met, and the model's cycles to stay within the targets (tests/integration/test_nvdla_own.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nvdla_sim.config import HwConfig, load_config
from nvdla_sim.floats import fp16_codes, fp32_code
from nvdla_sim.layers import ConvShape, Memory, OperandMode, PoolMode, PoolSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors.bdma.registers import BdmaOp
from nvdla_sim.processors.cdp.registers import CdpOp
from nvdla_sim.processors.rubik.registers import RubikMode, RubikOp, RubikPlane
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
from nvdla_sim.program.emit import Alloc, TraceProgram, conv_layer, emit_program, place, pool_pass, sdp_pass
from nvdla_sim.units.lut import IndexMode, LutParams, LutTable, Table
from nvdla_sim.units.memory_format import Surface, cube_size, dc_weight_bytes, feature_image
from nvdla_sim.units.sdp import AluOp

HW = "nv_small_rtl_tb"
P = Precision.INT8
Maker = Callable[[str, HwConfig, np.random.Generator], TraceProgram]
# the largest magnitude of random data per precision: INT8's full range; INT16 kept to 12 bits so a
# 3x3x64 sum of products stays far inside CACC's 48-bit INT16 accumulator and a 32-bit clip works
_DATA_RANGE = {Precision.INT8: 128, Precision.INT16: 2**11}


@dataclass(frozen=True)
class Spec:
    name: str
    kind: str  # conv, sdp, pdp, cdp
    make: Maker
    seed: int


def random_data(rng: np.random.Generator, shape: tuple[int, ...], precision: Precision = P) -> np.ndarray:
    """Random data of `precision`: integers over INT8's range or 12 bits of INT16; for FP16 normal
    values times 2**-6 .. 2**6, so the atoms' products span many block exponents (CMAC aligns and
    truncates them) and a few are denormal or zero."""
    if precision is Precision.FP16:
        return (rng.standard_normal(shape) * 2.0 ** rng.integers(-6, 7, shape)).astype(np.float16)
    r = _DATA_RANGE[precision]
    return rng.integers(-r, r, shape).astype(np.int8 if precision is Precision.INT8 else "<i2")


def _conv(shape: ConvShape, *, clip: int, bias: bool = False, precision: Precision = P) -> Maker:
    """A convolution; with `bias`, the projection a quantized transformer runs: INT32 accumulators plus a
    per-kernel INT16 bias from memory (X1 ALU), a per-tensor multiplier (X2 MUL) and the output
    convertor's rounding shift to INT8."""

    def make(name: str, hw: HwConfig, rng: np.random.Generator) -> TraceProgram:
        alloc = Alloc()
        kw: dict = {}
        inputs = []
        if bias:
            baddr = alloc.take(shape.out_k * 2 + 64)
            b = rng.integers(-(2**12), 2**12, shape.out_k).astype("<i2")
            inputs.append((baddr, b.view(np.uint8)))
            kw = dict(
                x1=SdpStageCfg(
                    SdpOperand(OperandSource.MEM, 0, 4, OperandMode.PER_KERNEL, 2), AluOp.ADD, None, False, False
                ),
                x2=SdpStageCfg(
                    None,
                    AluOp.ADD,
                    SdpOperand(OperandSource.REG, 19371, 0, OperandMode.PER_KERNEL, 2),
                    False,
                    False,
                    mul_shift=8,
                ),
                cvt=(0, 1, 14),
                streams=(SdpStream(Rdma.BRDMA, OperandMode.PER_KERNEL, 2, baddr, use=OperandUse.ALU),),
            )
        op, din, waddr, oaddr = conv_layer(shape, precision, hw, alloc, clip=clip, **kw)
        x = random_data(rng, (shape.in_h, shape.in_w, shape.in_c), precision)
        w = random_data(rng, (shape.out_k, shape.kernel_h, shape.kernel_w, shape.in_c), precision)
        inputs += [(din.addr, feature_image(x, din, precision, hw)), (waddr, dc_weight_bytes(w, precision, hw))]
        return emit_program(name, op, inputs, [(oaddr, cube_size(op.out, shape.out_k, precision, hw))], hw)

    return make


def _pool(w: int, h: int, c: int, spec: PoolSpec, precision: Precision = P) -> Maker:
    def make(name: str, hw: HwConfig, rng: np.random.Generator) -> TraceProgram:
        ow, oh = spec.out_size(w, h)
        a = Alloc()
        src = place(a, w, h, c, precision, hw)
        dst = place(a, ow, oh, c, precision, hw)
        pads = tuple(int(v) for v in rng.integers(-60, 60, 7))
        op = pool_pass(w, h, c, spec, src, dst, precision, pads)
        inputs = [(src.addr, feature_image(random_data(rng, (h, w, c), precision), src, precision, hw))]
        return emit_program(name, op, inputs, [(dst.addr, cube_size(dst, c, precision, hw))], hw)

    return make


def _sdp(w: int, h: int, c: int) -> Maker:
    """Offline SDP: per-element residual add from memory (X1 ALU, INT8 operand) and ReLU, requantized."""

    def make(name: str, hw: HwConfig, rng: np.random.Generator) -> TraceProgram:
        a = Alloc()
        src = place(a, w, h, c, P, hw)
        opnd = place(a, w, h, c, P, hw)
        dst = place(a, w, h, c, P, hw)
        stream = SdpStream(
            Rdma.BRDMA, OperandMode.PER_ELEMENT, 1, opnd.addr, opnd.line_stride, opnd.surface_stride, OperandUse.ALU
        )
        x1 = SdpStageCfg(SdpOperand(OperandSource.MEM, 0, 0, OperandMode.PER_ELEMENT, 1), AluOp.ADD, None, False, True)
        op = sdp_pass(w, h, c, flying=False, src=src, dst=dst, x1=x1, cvt=(3, 181, 8), streams=(stream,))
        inputs = [(src.addr, feature_image(random_data(rng, (h, w, c)), src, P, hw))]
        inputs.append((opnd.addr, feature_image(random_data(rng, (h, w, c)), opnd, P, hw)))
        return emit_program(name, op, inputs, [(dst.addr, cube_size(dst, c, P, hw))], hw)

    return make


def _sdp_x2_residual(w: int, h: int, c: int) -> Maker:
    """Offline SDP as the mapper lowers an unfused residual add without SDP's EW unit (rules.lower_elementwise,
    through export.layer_programs): X2's ALU adds the operand from N-RDMA per element, then ReLU."""

    def make(name: str, hw: HwConfig, rng: np.random.Generator) -> TraceProgram:
        from nvdla_mapper.export.layer_programs import layer_programs
        from nvdla_sim.layers import SdpLayer, SdpSpec

        layer = SdpLayer(name, w, h, c, P, SdpSpec(scale=OperandMode.PER_ELEMENT, relu=True))
        (lp,) = layer_programs(layer, hw, name=name, seed=int(rng.integers(2**31)))
        return lp.program

    return make


def _lrn(w: int, h: int, c: int, window: int) -> Maker:
    """CDP LRN with a linear LE table over the square sums and a denser LO table at the low end."""

    def make(name: str, hw: HwConfig, rng: np.random.Generator) -> TraceProgram:
        a = Alloc()
        src = place(a, w, h, c, P, hw)
        dst = place(a, w, h, c, P, hw)
        le_e = np.round(4096 / np.sqrt(1 + np.arange(65) / 4)).astype(np.int64)
        lo_e = np.round(4096 / np.sqrt(1 + np.arange(257) / 64)).astype(np.int64)
        le = LutTable(le_e, IndexMode.LINEAR, 0, 12, -3, 2, -1, 4, end=64 << 12)
        lo = LutTable(lo_e, IndexMode.LINEAR, 0, 8, -5, 3, -2, 5, end=256 << 8)
        lut = LutParams(le, lo, priority=Table.LO, uflow_priority=Table.LO, oflow_priority=Table.LE)
        op = CdpOp(w, h, c, window, False, False, 2, 3, 1, 0, 7, 13, src, dst, P)
        inputs = [(src.addr, feature_image(random_data(rng, (h, w, c)), src, P, hw))]
        return emit_program(name, op, inputs, [(dst.addr, cube_size(dst, c, P, hw))], hw, lut=lut)

    return make


def _clip(k: int) -> int:
    """CACC truncation keeping a K-term sum of INT8 products (or of the INT16 suite's 12-bit data) mostly
    inside INT8 (INT16) after the convertor."""
    return max(0, k.bit_length() + 7)


def _suite() -> Iterator[Spec]:
    # 1x1 convolutions as matmuls, M tokens along the width: what attention and decode consist of
    mm = [
        (64, 64, 32), (8, 64, 32), (16, 64, 32), (32, 64, 32), (128, 64, 32), (40, 8, 8),
        (64, 8, 32), (64, 16, 32), (64, 32, 32), (64, 128, 32), (64, 256, 8),
        (64, 64, 8), (64, 64, 16), (64, 64, 64), (64, 8, 64),
        (1, 64, 64), (1, 256, 64), (1, 64, 8),
    ]  # fmt: skip
    for m, k, n in mm:
        yield Spec(
            f"own_mm_m{m}_k{k}_n{n}", "conv", _conv(ConvShape.matmul(m, k, n), clip=_clip(k)), m * 7919 + k * 31 + n
        )
    # projections with bias and requantization to INT8 (BERT-style shapes that fit one CBUF load)
    for m, k, n in [(64, 256, 64), (128, 256, 64), (64, 128, 128), (1, 256, 128)]:
        name = f"own_proj_m{m}_k{k}_n{n}"
        yield Spec(name, "conv", _conv(ConvShape.matmul(m, k, n), clip=_clip(k) - 8, bias=True), m + k + n)
    # a 3x3 convolution with padding, and a strided one
    yield Spec(
        "own_conv_16x16x16_3x3x16", "conv", _conv(ConvShape.square(16, 16, 16, 16, kernel=3, pad=1), clip=10), 11
    )
    yield Spec(
        "own_conv_17x13x24_3x3x8_s2", "conv", _conv(ConvShape.square(17, 13, 24, 8, kernel=3, stride=2), clip=10), 12
    )
    # PDP: bottom and side padding (timing) across strides
    pools = [
        ("avg_k8s1_b7", 16, 16, 8, PoolSpec(PoolMode.AVG, 8, 8, 1, 1, 0, 0, 0, 7)),
        ("avg_k8s3_b7", 16, 16, 8, PoolSpec(PoolMode.AVG, 8, 8, 1, 3, 0, 0, 0, 7)),
        ("avg_k8s7_b7", 16, 16, 8, PoolSpec(PoolMode.AVG, 8, 8, 1, 7, 0, 0, 0, 7)),
        ("avg_k3s1_b2", 16, 16, 16, PoolSpec(PoolMode.AVG, 3, 3, 1, 1, 0, 0, 0, 2)),
        ("avg_k8x1_l7r7", 16, 16, 8, PoolSpec(PoolMode.AVG, 8, 1, 1, 1, 7, 7, 0, 0)),
        ("avg_k2_r1b1_c64", 8, 8, 64, PoolSpec(PoolMode.AVG, 2, 2, 1, 1, 0, 1, 0, 1)),
        ("max_k3s2_p1", 15, 15, 24, PoolSpec(PoolMode.MAX, 3, 3, 2, 2, 1, 1, 1, 1)),
    ]
    for i, (tag, w, h, c, spec) in enumerate(pools):
        yield Spec(f"own_pdp_{w}x{h}x{c}_{tag}", "pdp", _pool(w, h, c, spec), 100 + i)
    yield Spec("own_sdp_16x8x24_residual_relu", "sdp", _sdp(16, 8, 24), 200)
    yield Spec("own_sdp_16x8x24_residual_x2_relu", "sdp", _sdp_x2_residual(16, 8, 24), 201)
    yield Spec("own_cdp_8x8x24_lrn5", "cdp", _lrn(8, 8, 24, 5), 300)


def _suite_int16() -> Iterator[Spec]:
    """INT16 programs for nv_full (nvdlav1; INT16 runs 16 kernels of 64 channels an atomic op): matmuls
    over 1 to 4 channel atoms and 1 to 4 kernel groups, a projection with bias and requantization to
    INT16, 3x3 and strided convolutions, max and average pooling. Data of 12 bits: a product has 22
    bits and `_clip` keeps the same 7 + log2(K) shift as INT8's 15-bit products into 8 bits."""
    i16 = Precision.INT16
    for m, k, n in [(64, 64, 16), (64, 64, 64), (1, 64, 64), (128, 128, 32), (32, 256, 16), (16, 192, 48)]:
        name = f"own16_mm_m{m}_k{k}_n{n}"
        yield Spec(name, "conv", _conv(ConvShape.matmul(m, k, n), clip=_clip(k), precision=i16), m * 7919 + k * 31 + n)
    yield Spec(
        "own16_proj_m64_k256_n64", "conv", _conv(ConvShape.matmul(64, 256, 64), clip=_clip(256) - 8, bias=True,
                                                 precision=i16), 4001,
    )  # fmt: skip
    yield Spec(
        "own16_conv_16x16x64_3x3x32", "conv",
        _conv(ConvShape.square(16, 16, 64, 32, kernel=3, pad=1), clip=_clip(9 * 64), precision=i16), 4002,
    )  # fmt: skip
    yield Spec(
        "own16_conv_17x13x24_3x3x16_s2", "conv",
        _conv(ConvShape.square(17, 13, 24, 16, kernel=3, stride=2), clip=_clip(9 * 24), precision=i16), 4003,
    )  # fmt: skip
    yield Spec(
        "own16_pdp_15x15x24_max_k3s2_p1", "pdp",
        _pool(15, 15, 24, PoolSpec(PoolMode.MAX, 3, 3, 2, 2, 1, 1, 1, 1), precision=i16), 4004,
    )  # fmt: skip
    yield Spec(
        "own16_pdp_16x16x16_avg_k3s1_b2", "pdp",
        _pool(16, 16, 16, PoolSpec(PoolMode.AVG, 3, 3, 1, 1, 0, 0, 0, 2), precision=i16), 4005,
    )  # fmt: skip


def _suite_fp16() -> Iterator[Spec]:
    """FP16 programs for nv_full: the convolution pipeline's block floating point (CMAC), the 48-bit
    accumulator's roundings (CACC) and SDP's FP32 -> FP16 output, over 1 to 4 channel atoms, 1 to 4
    kernel groups of 16, and 3x3 kernels (CACC adds 9 x C/64 partial sums); then SDP's FP32 stages: a
    projection's bias with GELU in the LUT and with a residual added by Y, the Y stage's multiplier, ALU
    and LUT (FP17 interpolation) with random tables, and the X stages' operands from memory."""
    f16 = Precision.FP16
    for m, k, n in [(64, 64, 16), (1, 64, 64), (64, 256, 32), (128, 128, 48), (16, 100, 20)]:
        name = f"ownf16_mm_m{m}_k{k}_n{n}"
        yield Spec(name, "conv", _conv(ConvShape.matmul(m, k, n), clip=0, precision=f16), 5000 + m + k + n)
    yield Spec(
        "ownf16_conv_16x16x64_3x3x32", "conv",
        _conv(ConvShape.square(16, 16, 64, 32, kernel=3, pad=1), clip=0, precision=f16), 5101,
    )  # fmt: skip
    yield Spec(
        "ownf16_conv_17x13x24_3x3x16_s2", "conv",
        _conv(ConvShape.square(17, 13, 24, 16, kernel=3, stride=2), clip=0, precision=f16), 5102,
    )  # fmt: skip
    yield Spec("ownf16_proj_gelu_m32_k64_n64", "conv", _f16_projection(ConvShape.matmul(32, 64, 64), then="gelu"), 5201)
    yield Spec(
        "ownf16_proj_residual_m32_k96_n48", "conv",
        _f16_projection(ConvShape.matmul(32, 96, 48), then="residual"), 5202,
    )  # fmt: skip
    yield Spec("ownf16_sdp_y_lut_exp_16x8x48", "sdp", _f16_sdp_lut(16, 8, 48, exponent=True), 5203)
    yield Spec("ownf16_sdp_y_lut_linear_16x8x48", "sdp", _f16_sdp_lut(16, 8, 48, exponent=False), 5204)
    yield Spec("ownf16_sdp_y_lut_exp_bias_16x8x48", "sdp", _f16_sdp_lut(16, 8, 48, exponent=True, bias=True), 5206)
    yield Spec("ownf16_sdp_x_16x8x40", "sdp", _f16_sdp_x(16, 8, 40), 5205)


# ---- FP16 through SDP: the bias, the residual add and the LUT's FP16 mode (docs/fp16_lut.md) ----------

F16 = Precision.FP16


def _f16_bytes(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, np.float16).view(np.uint8)


def _f16_cube(rng: np.random.Generator, shape: tuple[int, ...], spread: int) -> np.ndarray:
    """FP16 values N(0, 1) times 2**-spread .. 2**spread, plus a uniform tenth over +-2**(spread + 2):
    both tables' hits, both ends' flows and the exponent table's boundaries all get values."""
    v = rng.standard_normal(shape) * 2.0 ** rng.integers(-spread, spread + 1, shape)
    wide = rng.random(shape) < 0.1
    return np.where(wide, rng.uniform(-(2.0 ** (spread + 2)), 2.0 ** (spread + 2), shape), v).astype(np.float16)


def _ew_stream(surf, use: OperandUse = OperandUse.ALU) -> SdpStream:
    return SdpStream(Rdma.ERDMA, OperandMode.PER_ELEMENT, 2, surf.addr, surf.line_stride, surf.surface_stride, use)


def _f16_projection(shape: ConvShape, *, then: str) -> Maker:
    """An FP16 matmul as the mapper lowers a transformer's at FP16 (numerics.fp16_steps): X1 adds an FP16
    bias per kernel from B-RDMA; then Y applies GELU from the LUT (`then` "gelu") or Y's ALU adds an FP16
    residual per element from E-RDMA ("residual"). Data N(0, 1/4), so the sums span the GELU table's
    hits and both ends."""

    def make(name: str, hw: HwConfig, rng: np.random.Generator) -> TraceProgram:
        from nvdla_mapper.numerics import fp16_steps
        from nvdla_mapper.numerics.reference import gelu_tanh

        alloc = Alloc()
        baddr = alloc.take(shape.out_k * 2 + 64)
        inputs = [(baddr, _f16_bytes(rng.standard_normal(shape.out_k) * 2))]
        streams = [SdpStream(Rdma.BRDMA, OperandMode.PER_KERNEL, 2, baddr, use=OperandUse.ALU)]
        x1 = SdpStageCfg(SdpOperand(OperandSource.MEM, 0, 0, OperandMode.PER_KERNEL, 2), AluOp.ADD, None, False, False)
        lut = None
        if then == "gelu":
            ew = SdpEwCfg(None, AluOp.ADD, None, False, 0, True)
            lut = fp16_steps.gelu_lut(gelu_tanh)
        else:
            res = place(alloc, shape.out_w, shape.out_h, shape.out_k, F16, hw)
            inputs.append(
                (res.addr, feature_image(_f16_cube(rng, (shape.out_h, shape.out_w, shape.out_k), 3), res, F16, hw))
            )
            streams.append(_ew_stream(res))
            ew = SdpEwCfg(EwOperand(OperandSource.MEM), AluOp.ADD, None, False, 0, False)
        op, din, waddr, oaddr = conv_layer(shape, F16, hw, alloc, x1=x1, streams=tuple(streams), ew=ew)
        x = (rng.standard_normal((shape.in_h, shape.in_w, shape.in_c)) / 2).astype(np.float16)
        w = (rng.standard_normal((shape.out_k, shape.kernel_h, shape.kernel_w, shape.in_c)) / 2).astype(np.float16)
        inputs += [(din.addr, feature_image(x, din, F16, hw)), (waddr, dc_weight_bytes(w, F16, hw))]
        outputs = [(oaddr, cube_size(op.out, shape.out_k, F16, hw))]
        return emit_program(name, op, inputs, outputs, hw, lut=lut)

    return make


def _random_fp16_lut(rng: np.random.Generator, *, exponent: bool, bias: bool = False) -> LutParams:
    """Tables of random FP16 entries (some zero, one denormal) and random FP16 slopes; LE exponent-indexed
    from -3 with index offset -58 (entries at -3 + 2**(i - 58), up to 61) or linear over [-24, 8] in steps of 1/2; LO
    linear in steps of 2**-4 from -6 (exponent case) or 2**-6 from -2.5; the priorities differ between
    the two cases. The slope shifts are set: FP16 mode ignores them. With `bias`, LE exponent-indexed from
    -6.5 with index offset -1 and LO linear from -6: below -6 both tables underflow and LE's priority picks
    it, extrapolating from START + 2**-1 = -6, which FP mode adds for a negative offset (INT mode would
    extrapolate from -6.5)."""

    def entries(n: int) -> np.ndarray:
        e = rng.standard_normal(n) * 8
        e[rng.integers(0, n, 4)] = 0.0
        e[rng.integers(0, n)] = 2.0**-20  # an FP16 denormal
        return fp16_codes(e)

    def slopes() -> dict:
        u, o = (int(c) for c in fp16_codes(rng.standard_normal(2) * 2))
        return {"uflow_scale": u, "oflow_scale": o, "uflow_shift": int(rng.integers(-8, 9)), "oflow_shift": 5}

    if bias:  # LE's own underflow chosen (both tables under, LE's priority) and its FP bias 2**-1 visible
        le = LutTable(
            entries(65), IndexMode.EXPONENT, -1, 0, origin=fp32_code(-6.5), end=fp32_code(2.0**62), **slopes()
        )
        lo = LutTable(entries(257), IndexMode.LINEAR, fp32_code(-6.0), -4, end=fp32_code(10.0), **slopes())
        return LutParams(le, lo, priority=Table.LO, uflow_priority=Table.LE, oflow_priority=Table.LE)
    if exponent:
        le = LutTable(entries(65), IndexMode.EXPONENT, -58, 0, origin=fp32_code(-3.0), end=fp32_code(61.0), **slopes())
        lo = LutTable(entries(257), IndexMode.LINEAR, fp32_code(-6.0), -4, end=fp32_code(10.0), **slopes())
        return LutParams(le, lo, priority=Table.LE, uflow_priority=Table.LO, oflow_priority=Table.LE)
    le = LutTable(entries(65), IndexMode.LINEAR, fp32_code(-24.0), -1, end=fp32_code(8.0), **slopes())
    lo = LutTable(entries(257), IndexMode.LINEAR, fp32_code(-2.5), -6, end=fp32_code(1.5), **slopes())
    return LutParams(le, lo, priority=Table.LO, uflow_priority=Table.LE, oflow_priority=Table.LO)


def _f16_sdp_lut(w: int, h: int, c: int, *, exponent: bool, bias: bool = False) -> Maker:
    """Offline SDP at FP16 through the Y stage: its multiplier by an FP32 register value (1.25), its ALU
    adding an FP16 operand per element from E-RDMA, then the LUT with random tables (_random_fp16_lut)."""

    def make(name: str, hw: HwConfig, rng: np.random.Generator) -> TraceProgram:
        a = Alloc()
        src, opnd, dst = (place(a, w, h, c, F16, hw) for _ in range(3))
        lut = _random_fp16_lut(rng, exponent=exponent, bias=bias)
        ew = SdpEwCfg(
            EwOperand(OperandSource.MEM), AluOp.ADD, EwOperand(OperandSource.REG, fp32_code(1.25)), False, 0, True
        )
        op = sdp_pass(w, h, c, flying=False, src=src, dst=dst, precision=F16, ew=ew, streams=(_ew_stream(opnd),))
        inputs = [(src.addr, feature_image(_f16_cube(rng, (h, w, c), 4), src, F16, hw))]
        inputs.append((opnd.addr, feature_image(_f16_cube(rng, (h, w, c), 2), opnd, F16, hw)))
        return emit_program(name, op, inputs, [(dst.addr, cube_size(dst, c, F16, hw))], hw, lut=lut)

    return make


def _f16_sdp_x(w: int, h: int, c: int) -> Maker:
    """Offline SDP at FP16 through the X stages: X1's ALU adds an FP16 operand per element from B-RDMA (one
    element in seven its input's negation: an exact zero, whose sign is the hardware's), X2's multiplier
    takes an FP16 operand per kernel from N-RDMA, ReLU off (a negative zero stays -0)."""

    def make(name: str, hw: HwConfig, rng: np.random.Generator) -> TraceProgram:
        a = Alloc()
        src, opnd, dst = (place(a, w, h, c, F16, hw) for _ in range(3))
        maddr = a.take(c * 2 + 64)
        x = _f16_cube(rng, (h, w, c), 6)
        y = _f16_cube(rng, (h, w, c), 6)
        y.reshape(-1)[::7] = -x.reshape(-1)[::7]
        streams = (
            SdpStream(Rdma.BRDMA, OperandMode.PER_ELEMENT, 2, opnd.addr, opnd.line_stride, opnd.surface_stride),
            SdpStream(Rdma.NRDMA, OperandMode.PER_KERNEL, 2, maddr, use=OperandUse.MUL),
        )
        x1 = SdpStageCfg(SdpOperand(OperandSource.MEM, 0, 0, OperandMode.PER_ELEMENT, 2), AluOp.ADD, None, False, False)
        x2 = SdpStageCfg(None, AluOp.ADD, SdpOperand(OperandSource.MEM, 0, 0, OperandMode.PER_KERNEL, 2), False, False)
        op = sdp_pass(w, h, c, flying=False, src=src, dst=dst, precision=F16, x1=x1, x2=x2, streams=streams)
        inputs = [(src.addr, feature_image(x, src, F16, hw)), (opnd.addr, feature_image(y, opnd, F16, hw))]
        inputs.append((maddr, _f16_bytes(rng.standard_normal(c) * 4)))
        return emit_program(name, op, inputs, [(dst.addr, cube_size(dst, c, F16, hw))], hw)

    return make


# ---- Rubik and BDMA (nv_full; issue 59): every mode, the three precisions, odd shapes -------------------


def _random_bytes(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 256, n).astype(np.uint8)  # Rubik and BDMA move bytes: every bit pattern, FP16 NaNs too


def _rubik(mode: RubikMode, precision: Precision, w: int, h: int, c: int, *, sx: int = 1, sy: int = 1,
           pad: int = 0) -> Maker:  # fmt: skip
    """A Rubik operation on random bytes: a contract of a W x H cube of sx * sy groups of C output channels,
    or a split / merge of a W x H x C cube; each line `pad` atoms longer than it needs (a stride the
    operation must honour), planes' lines 64-byte aligned (the unit description's rule)."""

    def make(name: str, hw: HwConfig, rng: np.random.Generator) -> TraceProgram:
        e = 1 if precision is Precision.INT8 else 2
        k = 32 // e
        a = Alloc()

        def cube(width: int, height: int, channels: int) -> tuple[int, int, int]:
            line = (width + pad) * 32
            surf = line * height + pad * 32
            return a.take(surf * -(-channels // k)), line, surf

        def planes(width: int, height: int, channels: int) -> tuple[int, int, int]:
            line = -(-width * e // 64) * 64 + pad * 64
            planar = line * height + pad * 64
            return a.take(planar * channels), line, planar

        if mode is RubikMode.CONTRACT:
            s_out = -(-c // k)
            cin = sx * sy * s_out * k
            sa, sl, ss = cube(w, h, cin)
            da, dl, ds = cube(w * sx, h * sy, c)
            src, dst = RubikPlane(sa, sl, ss, 0, Memory.DRAM), RubikPlane(da, dl, ds, 0, Memory.DRAM)
            op = RubikOp(mode, precision, w, h, cin, c, src, dst, s_out * ss, sy * dl, sx, sy)
            size_in, size_out = ss * -(-cin // k), ds * s_out
        elif mode is RubikMode.SPLIT:
            sa, sl, ss = cube(w, h, c)
            da, dl, dp = planes(w, h, c)
            src, dst = RubikPlane(sa, sl, ss, 0, Memory.DRAM), RubikPlane(da, dl, 0, dp, Memory.DRAM)
            op = RubikOp(mode, precision, w, h, c, c, src, dst, 0, 0, 1, 1)
            size_in, size_out = ss * -(-c // k), dp * c
        else:
            sa, sl, sp = planes(w, h, c)
            da, dl, ds = cube(w, h, c)
            src, dst = RubikPlane(sa, sl, 0, sp, Memory.DRAM), RubikPlane(da, dl, ds, 0, Memory.DRAM)
            op = RubikOp(mode, precision, w, h, c, c, src, dst, 0, 0, 1, 1)
            size_in, size_out = sp * c, ds * -(-c // k)
        return emit_program(name, op, [(sa, _random_bytes(rng, size_in))], [(da, size_out)], hw)

    return make


def _bdma(line_atoms: int, lines: int, surfaces: int, *, src_pad: int, dst_pad: int) -> Maker:
    """A BDMA transfer of random bytes, each side's lines and surfaces `*_pad` atoms apart beyond the data."""

    def make(name: str, hw: HwConfig, rng: np.random.Generator) -> TraceProgram:
        a = Alloc()
        lb = line_atoms * 32

        def side(pad: int) -> Surface:
            line = lb + pad * 32
            surf = line * lines + pad * 32
            return Surface(a.take(surf * surfaces), line, surf)

        src, dst = side(src_pad), side(dst_pad)
        op = BdmaOp(src, dst, lb, lines, surfaces, Memory.DRAM, Memory.DRAM)
        data = _random_bytes(rng, src.surface_stride * surfaces)
        return emit_program(name, op, [(src.addr, data)], [(dst.addr, dst.surface_stride * surfaces)], hw)

    return make


def _suite_reshape() -> Iterator[Spec]:
    """Rubik's contract (x strides up to 8 and past it, where its writes split), split (lines past 64
    pixels, where its requests split) and merge, in INT8, INT16 and FP16, with channel counts that leave a
    partial atom and strides wider than the data; then BDMA's line, line-repeat and surface-repeat copies."""
    seed = 6000
    for precision in (Precision.INT8, Precision.INT16, Precision.FP16):
        p = precision.value
        shapes = [
            (RubikMode.CONTRACT, 8, 8, 16, 2, 2, 0), (RubikMode.CONTRACT, 5, 3, 20, 3, 1, 1),
            (RubikMode.CONTRACT, 4, 2, 16, 10, 2, 0), (RubikMode.CONTRACT, 9, 2, 40, 1, 4, 0),
            (RubikMode.SPLIT, 16, 4, 20, 1, 1, 0), (RubikMode.SPLIT, 70, 2, 8, 1, 1, 1),
            (RubikMode.SPLIT, 33, 3, 1, 1, 1, 0),
            (RubikMode.MERGE, 16, 4, 20, 1, 1, 0), (RubikMode.MERGE, 70, 2, 8, 1, 1, 1),
            (RubikMode.MERGE, 5, 5, 45, 1, 1, 0),
        ]  # fmt: skip
        for mode, w, h, c, sx, sy, pad in shapes:
            strides = f"_s{sx}x{sy}" if mode is RubikMode.CONTRACT else ""
            name = f"own_rbk_{mode.name.lower()}_{p}_{w}x{h}x{c}{strides}{'_pad' if pad else ''}"
            yield Spec(name, "rubik", _rubik(mode, precision, w, h, c, sx=sx, sy=sy, pad=pad), seed)
            seed += 1
    for line_atoms, lines, surfaces, sp, dp in [(1, 1, 1, 0, 0), (8, 4, 2, 0, 3), (33, 5, 3, 2, 0), (256, 2, 1, 0, 0)]:
        name = f"own_bdma_{line_atoms}x{lines}x{surfaces}{'_pad' if sp or dp else ''}"
        yield Spec(name, "bdma", _bdma(line_atoms, lines, surfaces, src_pad=sp, dst_pad=dp), seed)
        seed += 1


SUITE: list[Spec] = list(_suite())
SUITES = {"int8": SUITE, "int16": list(_suite_int16()), "fp16": list(_suite_fp16()),
          "reshape": list(_suite_reshape())}  # fmt: skip


def generate(
    folder: str | Path, *, names: list[str] | None = None, hw: HwConfig | None = None, suite: str = "int8"
) -> list[Path]:
    hw = hw or load_config(HW)
    specs = SUITES[suite]
    unknown = sorted(set(names or []) - {s.name for s in specs})
    if unknown:
        raise SystemExit(f"own_programs: unknown program(s) {', '.join(unknown)}; see --list")
    return [
        s.make(s.name, hw, np.random.default_rng(s.seed)).write(folder) for s in specs if not names or s.name in names
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", help="where to write the trace-test folders")
    ap.add_argument("--only", nargs="*", help="program names (default: all)")
    ap.add_argument("--list", action="store_true", help="list the programs")
    ap.add_argument("--suite", choices=sorted(SUITES), default="int8",
                    help="int8 (default), int16, fp16 or reshape (Rubik and BDMA): the last three for nv_full")  # fmt: skip
    ap.add_argument("--hw", default=None, help=f"the testbench config (default {HW}; int16: nv_full_rtl_tb)")
    args = ap.parse_args(argv)
    if args.list or not args.folder:
        for s in SUITES[args.suite]:
            print(f"{s.name:40s} {s.kind}")
        return 0
    hw = load_config(args.hw or (HW if args.suite == "int8" else "nv_full_rtl_tb"))
    paths = generate(args.folder, names=args.only, hw=hw, suite=args.suite)
    print(f"wrote {len(paths)} programs to {args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
