"""cocotb bench for MatmulDatapath: Driver, Monitor, Model, Checker (after cocotb's matrix_multiplier).

The case (inputs only) comes from the JSON file named by $NVDLA_BENCH_CASE; expected values and cycle
counts come from the golden model in nvdla_sim.rtl_model.datapath_model, imported like any other package. The result
(pass/fail, cycles RTL vs model) is written to $NVDLA_BENCH_RESULT.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from nvdla_rtl.bench import coverage
from nvdla_rtl.datapath import out_layout
from nvdla_rtl.packing import pack_array, pack_beat, pack_weights, unpack_out
from nvdla_rtl.sdp_x1 import SDP_STAGES, requant_layout, sdp_ports
from nvdla_sim.config import load_config
from nvdla_sim.precision import Precision
from nvdla_sim.rtl_model.datapath_model import (
    DatapathParams,
    Offer,
    arithmetic_events,
    datapath_outputs,
    datapath_params,
    datapath_timing,
    random_pattern,
    requant_outputs,
    stripe_beats,
)
from nvdla_sim.units.sdp import Convertor, SdpParams, Stage


class Model:
    """Expected outputs and handshake cycles from nvdla_sim (CMAC + CACC, and SDP X1 when the case has
    one), and the stimulus: packed beats, valid and ready patterns."""

    def __init__(self, case: dict, p: DatapathParams) -> None:
        x, w = np.array(case["x"], np.int64), np.array(case["w"], np.int64)
        self.beats, self.sets = stripe_beats(x, w, p)
        self.weight_beats = [row for s in self.sets for row in s]
        self.dat_words = [pack_beat(b, p) for b in self.beats]
        self.wt_words = [pack_weights(a, p) for a in self.weight_beats]
        rng = np.random.default_rng(case["seed"])
        n = 4 * (len(self.beats) + 64 + len(self.weight_beats))
        self.ready = random_pattern(rng, n, case["ready_prob"])
        self.dat_valid = random_pattern(rng, n, case.get("dat_prob", 1.0))
        self.wt_valid = random_pattern(rng, n, case.get("wt_prob", 1.0))
        self.sdp = sdp_params(case["sdp"]) if case.get("sdp") else None
        self.out_layout = requant_layout(p) if self.sdp else out_layout(p)
        if self.sdp:
            self.outputs = requant_outputs(self.beats, self.sets, p, self.sdp, truncate=case["truncate"])
        else:
            self.outputs = datapath_outputs(self.beats, self.sets, p, truncate=case["truncate"])
        self.timing = datapath_timing(
            self.beats, len(self.weight_beats), self.ready, p, dat_valid=self.dat_valid, wt_valid=self.wt_valid,
            sdp_stages=SDP_STAGES if self.sdp else 0,
        )  # fmt: skip


class Driver:
    """Offers data and weight beats with the model's valid-gap patterns (each held until taken) and
    drives the sink's ready pattern. Writes a signal only when its value changes (each write is a VPI
    call: the bench, not the simulator, bounds the cycles per second)."""

    def __init__(self, dut, model: Model, p: DatapathParams) -> None:
        self.dut, self.model, self.p = dut, model, p
        self.dat = Offer(len(model.beats), model.dat_valid)
        self.wt = Offer(len(model.weight_beats), model.wt_valid)
        self.accepts: list[int] = []
        self._last: dict[str, int] = {}
        self.dat_valid = self.wt_valid = False
        self.out_ready = True

    def _set(self, name: str, value: int) -> None:
        if self._last.get(name) != value:
            getattr(self.dut, name).value = value
            self._last[name] = value

    def drive(self, t: int) -> None:
        m = self.model
        self.dat_valid, self.wt_valid = self.dat.valid(t), self.wt.valid(t)
        self.out_ready = m.ready[t] if t < len(m.ready) else True
        self._set("dat__valid", int(self.dat_valid))
        if self.dat.sent < len(m.beats):
            self._set("dat__payload", m.dat_words[self.dat.sent])
        self._set("wt__valid", int(self.wt_valid))
        if self.wt.sent < len(m.weight_beats):
            self._set("wt__payload", m.wt_words[self.wt.sent])
        self._set("out__ready", int(self.out_ready))

    def sample(self, t: int, dat_ready: int, wt_ready: int) -> None:
        if self.dat_valid and dat_ready:
            self.accepts.append(t)
            self.dat.taken()
        if self.wt_valid and wt_ready:
            self.wt.taken()


class Monitor:
    """Collects (pix, last, values) and the cycle of every output handshake."""

    def __init__(self, dut, p: DatapathParams, layout) -> None:
        self.dut, self.p, self.layout = dut, p, layout
        self.values: list[tuple[int, bool, list[int]]] = []
        self.cycles: list[int] = []

    def sample(self, t: int, payload) -> None:
        self.values.append(unpack_out(int(payload), self.p, self.layout))
        self.cycles.append(t)


class Checker:
    def __init__(self, model: Model, driver: Driver, monitor: Monitor) -> None:
        self.model, self.driver, self.monitor = model, driver, monitor

    def mismatches(self) -> list[str]:
        errs = []
        exp = self.model.outputs
        got = self.monitor.values
        if len(got) != len(exp):
            errs.append(f"{len(got)} outputs, expected {len(exp)}")
        for n, ((gp, gl, gv), (ep, el, ev)) in enumerate(zip(got, exp, strict=False)):
            if gp != ep or gl != el or gv != [int(v) for v in ev]:
                errs.append(f"output {n}: pix {gp} last {gl} {gv[:4]}... != model pix {ep} last {el} {list(ev[:4])}...")
                break
        if tuple(self.driver.accepts) != self.model.timing.accept_cycles:
            errs.append("input acceptance cycles differ from the model")
        if tuple(self.monitor.cycles) != self.model.timing.output_cycles:
            errs.append("output cycles differ from the model")
        return errs


def _mask(dut, name: str) -> int:
    return (1 << len(getattr(dut, name))) - 1


def sdp_params(d: dict) -> SdpParams:
    """The case's SDP pass (JSON) as nvdla_sim SdpParams."""
    x1 = Stage(alu_operand=d.get("bias"), alu_shift=d.get("alu_shift", 0), mul_operand=d.get("mul"),
               mul_shift=d.get("mul_shift", 0), relu=bool(d.get("relu")))  # fmt: skip
    return SdpParams(x1=x1, cvt=Convertor(d.get("cvt_offset", 0), d.get("cvt_scale", 1), d.get("cvt_shift", 0)))


async def _reset(dut, cycles: int = 2) -> None:
    dut.rst.value = 1
    dut.dat__valid.value = 0
    dut.wt__valid.value = 0
    dut.out__ready.value = 0
    for _ in range(cycles):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


async def _run(
    dut, model: Model, p: DatapathParams, limit: int, seen: dict[str, bool]
) -> tuple[Driver, Monitor, int, list[str]]:
    """Drive one run from cycle 0 (the first cycle after reset) until the model's outputs are out or
    `limit` cycles have passed; returns the driver, monitor, cycles run and X findings. Per cycle it
    reads the three handshake outputs once (and the payload when valid); Icarus is 4-state, so a value
    that is not 0/1 after reset is an X (or Z) the reset left behind."""
    driver, monitor = Driver(dut, model, p), Monitor(dut, p, model.out_layout)
    beats = model.beats
    xs: list[str] = []
    t = 0
    read_only = ReadOnly()
    while len(monitor.values) < len(model.outputs) and t < limit:
        driver.drive(t)
        await read_only
        dr, wr, ov = dut.dat__ready.value, dut.wt__ready.value, dut.out__valid.value
        if not (dr.is_resolvable and wr.is_resolvable and ov.is_resolvable):
            if len(xs) < 3:
                xs.append(f"X on a ready or valid {t} cycles after reset")
            await RisingEdge(dut.clk)
            t += 1
            continue
        dr, wr, ov = int(dr), int(wr), int(ov)
        i, ready = driver.dat.sent, driver.out_ready
        nxt = beats[i] if i < len(beats) else None
        if ov:
            payload = dut.out__payload.value
            if not payload.is_resolvable:
                if len(xs) < 3:
                    xs.append(f"X in the output payload {t} cycles after reset")
            elif ready:
                monitor.sample(t, payload)
            elif unpack_out(int(payload), p, model.out_layout)[1]:
                seen["backpressure_last"] = True
        if nxt is not None:  # handshake corners for functional coverage
            if driver.dat_valid and nxt.swap and not dr and (not ov or ready):
                seen["swap_waits"] = True
            if not driver.dat_valid and i > 0 and nxt.swap and nxt.first and nxt.pix == 0:
                seen["gap_at_boundary"] = True
        driver.sample(t, dr, wr)
        await RisingEdge(dut.clk)
        t += 1
    return driver, monitor, t, xs


@cocotb.test()
async def matmul_tile(dut):
    with open(os.environ["NVDLA_BENCH_CASE"]) as f:
        case = json.load(f)
    p = datapath_params(load_config(case["hw"]), Precision.parse(case["precision"]))
    if case.get("acc_bits"):
        p = dataclasses.replace(p, acc_bits=case["acc_bits"])
    model = Model(case, p)
    for name, value in (sdp_ports(model.sdp, p) if model.sdp else {}).items():
        getattr(dut, name).value = pack_array(value, 16) if isinstance(value, list) else value & _mask(dut, name)
    seen = {"swap_waits": False, "backpressure_last": False, "gap_at_boundary": False, "reset_mid_stripe": False}
    Clock(dut.clk, 10, unit="ns").start()
    dut.truncate.value = case["truncate"]
    await _reset(dut)
    t0 = time.perf_counter()
    errs: list[str] = []
    simulated = 0
    reset_at = case.get("reset_at")
    if reset_at:  # part of the run, reset in the middle of it (mid-stripe), then the clean run below
        partial, interrupted, simulated, xs = await _run(dut, model, p, reset_at, seen)
        if len(interrupted.values) >= len(model.outputs):
            errs.append(f"reset_at {reset_at} is past the end of the run: nothing was interrupted")
        taken = len(partial.accepts)
        seen["reset_mid_stripe"] = 0 < taken < len(model.beats) and not model.beats[taken - 1].end
        errs += xs
        await _reset(dut)
    driver, monitor, t, xs = await _run(dut, model, p, 4 * model.timing.last_out + 100, seen)
    simulated += t
    wall = time.perf_counter() - t0
    errs += xs + Checker(model, driver, monitor).mismatches()
    rtl_cycles = monitor.cycles[-1] - driver.accepts[0] + 1 if monitor.cycles and driver.accepts else -1
    result = {
        "passed": not errs,
        "errors": errs,
        "outputs": len(monitor.values),
        "rtl_cycles": rtl_cycles,
        "model_cycles": model.timing.cycles,
        "simulated_cycles": simulated,
        "wall_s": wall,
        "events": {k: bool(v) for k, v in seen.items()},
    }
    coverage.sample(
        {"precision": p.precision.value, **arithmetic_events(model.beats, model.sets, p, truncate=case["truncate"]),
         **seen}
    )  # fmt: skip
    if case.get("coverage_file"):
        coverage.export(case["coverage_file"])
    with open(os.environ["NVDLA_BENCH_RESULT"], "w") as f:
        json.dump(result, f)
    assert not errs, "; ".join(errs)
