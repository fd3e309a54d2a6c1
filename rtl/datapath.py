"""The NVDLA matmul datapath in Amaranth: a weight-stationary CMAC array and a CACC assembly buffer.

Streams (amaranth.lib.stream, valid/ready):
  wt   in : one MAC cell's weight atom (atomic_c signed values) per beat, into shadow registers
  dat  in : {data[atomic_c], pix, first, last, swap, end}; swap switches to the shadow weights first
  out  out: {data[cells] INT32, pix, last} for each output point after its `last` atom; `last` marks
            the stripe's final output point (from the `end` tag of the data atom)
Pipeline: stage 0 registers the atomic_c x cells products, stage 1 the per-cell adder trees, stages
2..pipeline-1 are delay registers (NVDLA's CMAC is 7 deep), then the CACC stage: saturating add into
the assembly buffer at `pix` (INT34 for int8, INT48 for int16), and on `last` round-half-away right
shift by `truncate` and saturate to INT32 into the output register. All stages stall together when the
output is valid and not taken. Handshake rules are replayed by nvdla_sim.rtl_model.datapath_model.datapath_timing.
"""

from __future__ import annotations

from amaranth.hdl import Array, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from nvdla_sim.rtl_model.datapath_model import DatapathParams

OUT_BITS = 32


def dat_layout(p: DatapathParams) -> data.StructLayout:
    return data.StructLayout(
        {
            "data": data.ArrayLayout(signed(p.in_bits), p.atomic_c),
            "pix": range(p.stripe_max),
            "first": 1,
            "last": 1,
            "swap": 1,
            "end": 1,
        }
    )


def out_layout(p: DatapathParams) -> data.StructLayout:
    return data.StructLayout(
        {"data": data.ArrayLayout(signed(OUT_BITS), p.cells), "pix": range(p.stripe_max), "last": 1}
    )


def _saturate(m: Module, value, bits: int, name: str):
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    sat = Signal(signed(bits), name=name)
    m.d.comb += sat.eq(Mux(value > hi, hi, Mux(value < lo, lo, value)))
    return sat


class MatmulDatapath(wiring.Component):
    def __init__(self, params: DatapathParams) -> None:
        self.params = params
        super().__init__(
            {
                "wt": In(stream.Signature(data.ArrayLayout(signed(params.in_bits), params.atomic_c))),
                "dat": In(stream.Signature(dat_layout(params))),
                "out": Out(stream.Signature(out_layout(params))),
                "truncate": In(5),
            }
        )

    def elaborate(self, platform) -> Module:
        m = Module()
        p = self.params
        C, K = p.atomic_c, p.cells

        # ---- weights: shadow set loading while the active set computes ----
        shadow = [[Signal(signed(p.in_bits), name=f"shadow_{k}_{c}") for c in range(C)] for k in range(K)]
        active = [[Signal(signed(p.in_bits), name=f"active_{k}_{c}") for c in range(C)] for k in range(K)]
        wt_count = Signal(range(K + 1))
        full = Signal()
        m.d.comb += [full.eq(wt_count == K), self.wt.ready.eq(~full)]
        with m.If(self.wt.valid & self.wt.ready):
            m.d.sync += wt_count.eq(wt_count + 1)
            for k in range(K):
                with m.If(wt_count == k):
                    m.d.sync += [shadow[k][c].eq(self.wt.payload[c]) for c in range(C)]

        # ---- handshake ----
        advance = Signal()
        dp = self.dat.payload
        fire = Signal()
        m.d.comb += [
            advance.eq(~self.out.valid | self.out.ready),
            self.dat.ready.eq(advance & (~dp.swap | full)),
            fire.eq(self.dat.valid & self.dat.ready),
        ]
        with m.If(fire & dp.swap):
            m.d.sync += wt_count.eq(0)
            for k in range(K):
                m.d.sync += [active[k][c].eq(shadow[k][c]) for c in range(C)]

        # ---- stage 0: products ----
        prod_bits = 2 * p.in_bits
        prod = [[Signal(signed(prod_bits), name=f"prod_{k}_{c}") for c in range(C)] for k in range(K)]
        ctrl_layout = data.StructLayout({"valid": 1, "pix": range(p.stripe_max), "first": 1, "last": 1, "end": 1})
        ctrl = [Signal(ctrl_layout, name=f"ctrl{i}") for i in range(p.pipeline)]
        with m.If(advance):
            for k in range(K):
                for c in range(C):
                    w = Mux(dp.swap, shadow[k][c], active[k][c])
                    m.d.sync += prod[k][c].eq(dp.data[c] * w)
            m.d.sync += [
                ctrl[0].valid.eq(fire),
                ctrl[0].pix.eq(dp.pix),
                ctrl[0].first.eq(dp.first),
                ctrl[0].last.eq(dp.last),
                ctrl[0].end.eq(dp.end),
            ]

        # ---- stage 1: adder trees; stages 2.. : delay to the configured CMAC depth ----
        sum_bits = prod_bits + max(1, (C - 1).bit_length())
        stages = [[Signal(signed(sum_bits), name=f"psum{i}_{k}") for k in range(K)] for i in range(1, p.pipeline)]
        with m.If(advance):
            for k in range(K):
                total = prod[k][0]
                for c in range(1, C):
                    total = total + prod[k][c]
                m.d.sync += stages[0][k].eq(total)
            for i in range(1, p.pipeline):
                m.d.sync += ctrl[i].eq(ctrl[i - 1])
                if i < p.pipeline - 1:
                    m.d.sync += [stages[i][k].eq(stages[i - 1][k]) for k in range(K)]
        psum = stages[-1]
        last_ctrl = ctrl[-1]

        # ---- CACC: assembly buffer, round/saturate, output register ----
        acc = Array(
            Array(Signal(signed(p.acc_bits), name=f"acc_{s}_{k}") for k in range(K)) for s in range(p.stripe_max)
        )
        with m.If(advance):
            m.d.sync += self.out.valid.eq(0)
            with m.If(last_ctrl.valid):
                for k in range(K):
                    cur = acc[last_ctrl.pix][k]
                    summed = _saturate(m, cur + psum[k], p.acc_bits, f"accsat_{k}")
                    total = Signal(signed(p.acc_bits), name=f"acc_next_{k}")
                    m.d.comb += total.eq(Mux(last_ctrl.first, psum[k], summed))
                    m.d.sync += acc[last_ctrl.pix][k].eq(total)
                    neg = total < 0
                    mag = Signal(p.acc_bits + 1, name=f"mag_{k}")
                    m.d.comb += mag.eq(Mux(neg, -total, total))
                    half = (Const(1, p.acc_bits + 2) << self.truncate) >> 1
                    rounded = Signal(p.acc_bits + 2, name=f"rnd_{k}")
                    m.d.comb += rounded.eq((mag + half) >> self.truncate)
                    signed_r = Signal(signed(p.acc_bits + 3), name=f"srnd_{k}")
                    m.d.comb += signed_r.eq(Mux(neg, -rounded, rounded))
                    with m.If(last_ctrl.last):
                        m.d.sync += self.out.payload.data[k].eq(_saturate(m, signed_r, OUT_BITS, f"outsat_{k}"))
                with m.If(last_ctrl.last):
                    m.d.sync += [
                        self.out.valid.eq(1),
                        self.out.payload.pix.eq(last_ctrl.pix),
                        self.out.payload.last.eq(last_ctrl.end),
                    ]
        return m
