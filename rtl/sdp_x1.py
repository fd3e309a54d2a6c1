"""NVDLA SDP's X1 stage and output convertor in Amaranth: a projection's INT32 accumulators to INT8.

    in  : CACC's output beats {data[cells] INT32, pix, last}
    out : {data[cells] INT8 (or INT16), pix, last}
    per-kernel operands (one per MAC cell, fixed for the tile: NVDLA's BRDMA per-kernel stream for one
    kernel group): bias (INT16, ALU), mul (INT16, MUL); registers: alu_shift, mul_shift, relu and the
    output convertor's offset (INT32), scale (INT16) and shift.

Arithmetic, bit for bit as nvdla_sim.units.sdp (NVIDIA's cmod sdp_x.cpp widths, checked there on the nv_small
RTL's trace tests): the ALU operand bias << alu_shift saturated to 32 bits, added into a 33-bit result
(not saturated); times mul (or bypassed) into 49 bits; a rounding right shift by mul_shift (round half
away from zero, applied also when the multiplier is bypassed) saturated to INT32; ReLU; then the
convertor y = sat(round((x - offset) * scale >> shift)) to the output precision.

Three register stages (ALU; MUL, shift and ReLU; convertor), stalling together when the output is valid
and not taken; `in.ready` is that advance, so CACC's output register sees ordinary back-pressure.
nvdla_sim.rtl_model.datapath_model.datapath_timing replays it with `sdp_stages=SDP_STAGES`.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from nvdla_rtl.datapath import out_layout
from nvdla_sim.errors import NvdlaError
from nvdla_sim.rtl_model.datapath_model import DatapathParams
from nvdla_sim.units.sdp import AluOp, SdpParams, Stage

SDP_STAGES = 3
STAGE_BITS = 32


def requant_layout(p: DatapathParams, out_bits: int = 8) -> data.StructLayout:
    return data.StructLayout(
        {"data": data.ArrayLayout(signed(out_bits), p.cells), "pix": range(p.stripe_max), "last": 1}
    )


def _sat(m: Module, value, bits: int, name: str) -> Signal:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    out = Signal(signed(bits), name=name)
    m.d.comb += out.eq(Mux(value > hi, hi, Mux(value < lo, lo, value)))
    return out


def _round_shift(m: Module, value, shift, bits: int, name: str) -> Signal:
    """Right shift by `shift` (0..63), rounding half away from zero, of a signed `bits`-wide value."""
    mag = Signal(bits + 64, name=f"{name}_mag")
    m.d.comb += mag.eq(Mux(value < 0, -value, value) + Mux(shift == 0, 0, (Const(1, 65) << shift) >> 1))
    shifted = Signal(bits + 1, name=f"{name}_shr")
    m.d.comb += shifted.eq(mag >> shift)
    out = Signal(signed(bits + 2), name=name)
    m.d.comb += out.eq(Mux(value < 0, -shifted, shifted))
    return out


class SdpX1(wiring.Component):
    def __init__(self, params: DatapathParams, out_bits: int = 8) -> None:
        self.params, self.out_bits = params, out_bits
        cells = params.cells
        super().__init__(
            {
                "inp": In(stream.Signature(out_layout(params))),
                "out": Out(stream.Signature(requant_layout(params, out_bits))),
                "bias": In(data.ArrayLayout(signed(16), cells)),
                "bias_en": In(1),
                "alu_shift": In(6),
                "mul": In(data.ArrayLayout(signed(16), cells)),
                "mul_en": In(1),
                "mul_shift": In(6),
                "relu": In(1),
                "cvt_offset": In(signed(32)),
                "cvt_scale": In(signed(16)),
                "cvt_shift": In(6),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        p, K = self.params, self.params.cells
        advance = Signal()
        m.d.comb += [advance.eq(~self.out.valid | self.out.ready), self.inp.ready.eq(advance)]

        # stage 1: ALU, x + sat32(bias << alu_shift) in 33 bits
        v1, pix1, last1 = Signal(), Signal(range(p.stripe_max)), Signal()
        alu = [Signal(signed(STAGE_BITS + 1), name=f"alu_{k}") for k in range(K)]
        # stage 2: MUL (49 bits), rounding shift by mul_shift, saturate to INT32, ReLU
        v2, pix2, last2 = Signal(), Signal(range(p.stripe_max)), Signal()
        x2 = [Signal(signed(STAGE_BITS), name=f"x2_{k}") for k in range(K)]
        with m.If(advance):
            m.d.sync += [v1.eq(self.inp.valid), pix1.eq(self.inp.payload.pix), last1.eq(self.inp.payload.last)]
            m.d.sync += [v2.eq(v1), pix2.eq(pix1), last2.eq(last1)]
            m.d.sync += [self.out.valid.eq(v2), self.out.payload.pix.eq(pix2), self.out.payload.last.eq(last2)]
            for k in range(K):
                x = self.inp.payload.data[k]
                wide = Signal(signed(16 + 64), name=f"bias_shl_{k}")
                m.d.comb += wide.eq(self.bias[k] << self.alu_shift)
                operand = _sat(m, wide, STAGE_BITS, f"bias_sat_{k}")
                m.d.sync += alu[k].eq(Mux(self.bias_en, x + operand, x))

                prod = Signal(signed(STAGE_BITS + 1 + 16), name=f"prod_{k}")
                m.d.comb += prod.eq(Mux(self.mul_en, alu[k] * self.mul[k], alu[k]))
                trunc = _sat(m, _round_shift(m, prod, self.mul_shift, STAGE_BITS + 17, f"trt_{k}"), STAGE_BITS,
                             f"trt_sat_{k}")  # fmt: skip
                m.d.sync += x2[k].eq(Mux(self.relu & (trunc < 0), 0, trunc))

                conv = Signal(signed(STAGE_BITS + 1 + 16), name=f"cvt_{k}")
                m.d.comb += conv.eq((x2[k] - self.cvt_offset) * self.cvt_scale)
                y = _sat(m, _round_shift(m, conv, self.cvt_shift, STAGE_BITS + 17, f"cvt_rnd_{k}"), self.out_bits,
                         f"cvt_sat_{k}")  # fmt: skip
                m.d.sync += self.out.payload.data[k].eq(y)
        return m


class MatmulRequant(wiring.Component):
    """CMAC + CACC + SDP X1: INT8 data and weights in, requantized INT8 out (a projection's path)."""

    def __init__(self, params: DatapathParams, out_bits: int = 8) -> None:
        from nvdla_rtl.datapath import MatmulDatapath, dat_layout

        self.params = params
        self.core, self.sdp = MatmulDatapath(params), SdpX1(params, out_bits)
        sdp_ports = {n: In(self.sdp.signature.members[n].shape) for n in SDP_CONFIG}
        super().__init__(
            {
                "wt": In(stream.Signature(data.ArrayLayout(signed(params.in_bits), params.atomic_c))),
                "dat": In(stream.Signature(dat_layout(params))),
                "out": Out(stream.Signature(requant_layout(params, out_bits))),
                "truncate": In(5),
                **sdp_ports,
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.core, m.submodules.sdp = self.core, self.sdp
        wiring.connect(m, wiring.flipped(self.wt), self.core.wt)
        wiring.connect(m, wiring.flipped(self.dat), self.core.dat)
        wiring.connect(m, self.core.out, self.sdp.inp)
        wiring.connect(m, self.sdp.out, wiring.flipped(self.out))
        m.d.comb += self.core.truncate.eq(self.truncate)
        m.d.comb += [getattr(self.sdp, n).eq(getattr(self, n)) for n in SDP_CONFIG]
        return m


def sdp_ports(params: SdpParams, p: DatapathParams) -> dict[str, int | list[int]]:
    """Port values of SdpX1 for an SDP pass of X1 (bias add, multiplier, ReLU) and the convertor; other
    SDP features are not in this RTL and get a one-line error."""
    if params.x2 is not None or params.y is not None:
        raise NvdlaError("the SDP RTL has the X1 stage and the output convertor only (no X2, no Y/EW/LUT)")
    x1 = params.x1 or Stage()
    if x1.alu_op is not AluOp.ADD or x1.prelu:
        raise NvdlaError("the SDP RTL's X1 adds its ALU operand (no max/min) and has ReLU, not PReLU")
    if params.out_precision.bytes != 1:
        raise NvdlaError(f"the SDP RTL writes INT8, not {params.out_precision.value}")

    def per_cell(v) -> list[int]:
        a = np.broadcast_to(np.asarray(0 if v is None else v, np.int64), (p.cells,))
        if a.min() < -(1 << 15) or a.max() >= 1 << 15:
            raise NvdlaError("SDP X1 operands must fit INT16")
        return [int(x) for x in a]

    return {
        "bias": per_cell(x1.alu_operand), "bias_en": int(x1.alu_operand is not None), "alu_shift": x1.alu_shift,
        "mul": per_cell(x1.mul_operand), "mul_en": int(x1.mul_operand is not None), "mul_shift": x1.mul_shift,
        "relu": int(x1.relu), "cvt_offset": params.cvt.offset, "cvt_scale": params.cvt.scale,
        "cvt_shift": params.cvt.shift,
    }  # fmt: skip


SDP_CONFIG = ("bias", "bias_en", "alu_shift", "mul", "mul_en", "mul_shift", "relu", "cvt_offset", "cvt_scale",
              "cvt_shift")  # fmt: skip
