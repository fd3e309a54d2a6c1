"""cocotb bench for MatmulDatapath: Driver, Monitor, Model, Checker (after cocotb's matrix_multiplier).

The case (inputs only) comes from the JSON file named by $NVDLA_BENCH_CASE; expected values and cycle
counts come from the golden model in nvdla_sim.datapath_model, imported like any other package. The result
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
from nvdla_rtl.packing import pack_beat, pack_weights, unpack_out
from nvdla_sim.config import load_config
from nvdla_sim.datapath_model import (
    DatapathParams,
    Offer,
    arithmetic_events,
    datapath_outputs,
    datapath_params,
    datapath_timing,
    random_pattern,
    stripe_beats,
)
from nvdla_sim.precision import Precision


class Model:
    """Expected outputs and handshake cycles from nvdla_sim."""

    def __init__(self, case: dict, p: DatapathParams) -> None:
        x, w = np.array(case["x"], np.int64), np.array(case["w"], np.int64)
        self.beats, self.sets = stripe_beats(x, w, p)
        self.weight_beats = [row for s in self.sets for row in s]
        rng = np.random.default_rng(case["seed"])
        n = 4 * (len(self.beats) + 64 + len(self.weight_beats))
        self.ready = random_pattern(rng, n, case["ready_prob"])
        self.dat_valid = random_pattern(rng, n, case.get("dat_prob", 1.0))
        self.wt_valid = random_pattern(rng, n, case.get("wt_prob", 1.0))
        self.outputs = datapath_outputs(self.beats, self.sets, p, truncate=case["truncate"])
        self.timing = datapath_timing(
            self.beats, len(self.weight_beats), self.ready, p, dat_valid=self.dat_valid, wt_valid=self.wt_valid
        )


class Driver:
    """Offers data and weight beats with the model's valid-gap patterns (each held until taken) and
    drives the sink's ready pattern."""

    def __init__(self, dut, model: Model, p: DatapathParams) -> None:
        self.dut, self.model, self.p = dut, model, p
        self.dat = Offer(len(model.beats), model.dat_valid)
        self.wt = Offer(len(model.weight_beats), model.wt_valid)
        self.accepts: list[int] = []

    def drive(self, t: int) -> None:
        d, m, p = self.dut, self.model, self.p
        d.dat__valid.value = int(self.dat.valid(t))
        if self.dat.sent < len(m.beats):
            d.dat__payload.value = pack_beat(m.beats[self.dat.sent], p)
        d.wt__valid.value = int(self.wt.valid(t))
        if self.wt.sent < len(m.weight_beats):
            d.wt__payload.value = pack_weights(m.weight_beats[self.wt.sent], p)
        d.out__ready.value = int(m.ready[t] if t < len(m.ready) else 1)

    def sample(self, t: int) -> None:
        d = self.dut
        if int(d.dat__valid.value) and int(d.dat__ready.value):
            self.accepts.append(t)
            self.dat.taken()
        if int(d.wt__valid.value) and int(d.wt__ready.value):
            self.wt.taken()


class Monitor:
    """Collects (pix, values) and the cycle of every output handshake."""

    def __init__(self, dut, p: DatapathParams) -> None:
        self.dut, self.p = dut, p
        self.values: list[tuple[int, bool, list[int]]] = []
        self.cycles: list[int] = []

    def sample(self, t: int) -> None:
        d = self.dut
        if int(d.out__valid.value) and int(d.out__ready.value):
            self.values.append(unpack_out(int(d.out__payload.value), self.p))
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


async def _reset(dut, cycles: int = 2) -> None:
    dut.rst.value = 1
    dut.dat__valid.value = 0
    dut.wt__valid.value = 0
    dut.out__ready.value = 0
    for _ in range(cycles):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


def _x_on_outputs(dut) -> bool:
    """Icarus is 4-state: an output that is not 0/1 after reset is an X (or Z) the reset left behind."""
    return not (dut.out__valid.value.is_resolvable and dut.out__payload.value.is_resolvable
                and dut.dat__ready.value.is_resolvable and dut.wt__ready.value.is_resolvable)  # fmt: skip


def _observe(dut, driver: Driver, p: DatapathParams, seen: dict[str, bool]) -> None:
    """Handshake corners for functional coverage, sampled in the ReadOnly phase of a cycle."""
    beats, i = driver.model.beats, driver.dat.sent
    nxt = beats[i] if i < len(beats) else None
    out_valid, out_ready = int(dut.out__valid.value), int(dut.out__ready.value)
    advancing = not out_valid or out_ready
    if nxt is not None and int(dut.dat__valid.value) and nxt.swap and not int(dut.dat__ready.value) and advancing:
        seen["swap_waits"] = True
    if out_valid and not out_ready and unpack_out(int(dut.out__payload.value), p)[1]:
        seen["backpressure_last"] = True
    if nxt is not None and i > 0 and not int(dut.dat__valid.value) and nxt.swap and nxt.first and nxt.pix == 0:
        seen["gap_at_boundary"] = True


async def _run(
    dut, model: Model, p: DatapathParams, limit: int, seen: dict[str, bool]
) -> tuple[Driver, Monitor, int, list[str]]:
    """Drive one run from cycle 0 (the first cycle after reset) until the model's outputs are out or
    `limit` cycles have passed; returns the driver, monitor, cycles run and X findings."""
    driver, monitor = Driver(dut, model, p), Monitor(dut, p)
    xs: list[str] = []
    t = 0
    while len(monitor.values) < len(model.outputs) and t < limit:
        driver.drive(t)
        await ReadOnly()
        if _x_on_outputs(dut):
            if len(xs) < 3:
                xs.append(f"X on an output or ready {t} cycles after reset")
        else:
            _observe(dut, driver, p, seen)
        driver.sample(t)
        monitor.sample(t)
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
