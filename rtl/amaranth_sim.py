"""Run the datapath in amaranth.sim (no Verilog, no Icarus): the fast first tier of RTL tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from amaranth.sim import Simulator

from nvdla_rtl.datapath import MatmulDatapath
from nvdla_rtl.packing import pack_beat, pack_weights, unpack_out
from nvdla_rtl.sdp_x1 import MatmulRequant, requant_layout
from nvdla_sim.rtl_model.datapath_model import Beat, DatapathParams, Offer


@dataclass(frozen=True)
class SimRun:
    values: list[tuple[int, bool, list[int]]]
    accept_cycles: tuple[int, ...]
    output_cycles: tuple[int, ...]
    cycles: int  # simulated clock cycles


def run_amaranth(
    p: DatapathParams,
    beats: Sequence[Beat],
    weight_sets: Sequence[np.ndarray],
    out_ready: Sequence[bool],
    *,
    dat_valid: Sequence[bool] = (),
    wt_valid: Sequence[bool] = (),
    truncate: int = 0,
    sdp: dict | None = None,
    max_cycles: int = 1_000_000,
    datapath: type | None = None,
) -> SimRun:
    """Drive the datapath like the model's `Offer`s (valid gaps by pattern, held until taken) and the
    sink's ready pattern; collect outputs and handshake cycles. `sdp`: port values of the SDP X1 stage
    (rtl/sdp_x1.sdp_ports), which then follows CACC (MatmulRequant). `datapath`: another CMAC + CACC
    design to drive in place of MatmulDatapath (a mutant, for the mutation sample)."""
    dut = MatmulRequant(p) if sdp is not None else (datapath or MatmulDatapath)(p)
    layout = requant_layout(p) if sdp is not None else None
    wbeats = [row for s in weight_sets for row in s]
    dat, wt = Offer(len(beats), dat_valid), Offer(len(wbeats), wt_valid)
    n_out = sum(1 for b in beats if b.last)
    values: list[tuple[int, bool, list[int]]] = []
    accepts: list[int] = []
    outs: list[int] = []
    state = {"t": 0}

    async def bench(ctx) -> None:
        i = j = t = 0
        ctx.set(dut.truncate, truncate)
        for name, value in (sdp or {}).items():
            port = getattr(dut, name)
            if isinstance(value, list):
                for k, v in enumerate(value):
                    ctx.set(port[k], v)
            else:
                ctx.set(port, value)
        while len(values) < n_out and t < max_cycles:
            ctx.set(dut.dat.valid, dat.valid(t))
            if i < len(beats):
                ctx.set(dut.dat.payload.as_value(), pack_beat(beats[i], p))
            ctx.set(dut.wt.valid, wt.valid(t))
            if j < len(wbeats):
                ctx.set(dut.wt.payload.as_value(), pack_weights(wbeats[j], p))
            ready = bool(out_ready[t]) if t < len(out_ready) else True
            ctx.set(dut.out.ready, ready)
            if ctx.get(dut.dat.valid) and ctx.get(dut.dat.ready):
                accepts.append(t)
                dat.taken()
                i += 1
            if ctx.get(dut.wt.valid) and ctx.get(dut.wt.ready):
                wt.taken()
                j += 1
            if ctx.get(dut.out.valid) and ready:
                values.append(unpack_out(ctx.get(dut.out.payload.as_value()), p, layout))
                outs.append(t)
            await ctx.tick()
            t += 1
        state["t"] = t

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return SimRun(values, tuple(accepts), tuple(outs), state["t"])
