"""Golden model of the CMAC + CACC matmul datapath as built in rtl/ (functional and cycle-exact).

The datapath takes a stream of data atoms, each tagged like a CSC->CMAC request: `pix` (position in the
stripe, the CACC assembly-buffer index), `first` (start a fresh accumulation), `last` (emit after
adding), `swap` (switch to the weights loaded since the last swap, before this atom) and `end` (the
stripe's final output point, whose result carries out.last). Weights arrive
on their own stream, one MAC cell's atom per beat, into shadow registers while the active set computes:
NVDLA's "next stripe's weights load during this stripe". Results leave as one beat per output point with
`cells` INT32 values, under valid/ready back-pressure.

Functionally each atom goes through `cmac.atomic_op` and each output point through `cacc.accumulate`,
the same functions the simulator uses. The timing model replays the RTL's handshake rules cycle by cycle
(a stall-all pipeline of `pipeline` CMAC stages plus the CACC register), so the cocotb benches can check
cycle counts exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nvdla_sim.config import HwConfig
from nvdla_sim.precision import Precision
from nvdla_sim.units import cacc, cmac, csc, sdp


@dataclass(frozen=True)
class DatapathParams:
    atomic_c: int
    cells: int  # kernels per atomic op at this precision
    in_bits: int
    acc_bits: int
    stripe_max: int  # CACC assembly-buffer entries (max stripe length)
    pipeline: int  # CMAC register stages from accepted atom to partial sum (>= 2)
    precision: Precision

    def __post_init__(self) -> None:
        if self.pipeline < 2:
            raise ValueError(f"pipeline must be >= 2 (products and adder tree are registered), not {self.pipeline}")
        if self.cells < 1 or self.atomic_c < 1 or self.stripe_max < 1:
            raise ValueError("atomic_c, cells and stripe_max must be >= 1")

    @property
    def latency(self) -> int:
        """Cycles from an accepted `last` atom to its result being valid (CMAC stages + CACC register)."""
        return self.pipeline + 1

    @property
    def tag(self) -> str:
        return (
            f"c{self.atomic_c}k{self.cells}_{self.precision.value}_s{self.stripe_max}_p{self.pipeline}_a{self.acc_bits}"
        )


def datapath_params(hw: HwConfig, precision: Precision) -> DatapathParams:
    """Datapath parameters from the same HwConfig the simulator uses."""
    if precision.is_float:
        raise ValueError("the RTL datapath is integer-only (int8/int16); fp16 is not built")
    return DatapathParams(
        atomic_c=hw.mac.atomic_c,
        cells=hw.kernels_per_atomic(precision),
        in_bits=8 * precision.bytes,
        acc_bits=cacc.ACC_BITS[precision],
        stripe_max=2 * csc.ideal_stripe(hw, precision),
        pipeline=max(2, hw.mac.pipeline_cycles),
        precision=precision,
    )


@dataclass(frozen=True)
class Beat:
    data: np.ndarray  # [atomic_c] signed ints
    pix: int
    first: bool
    last: bool
    swap: bool
    end: bool = False  # last output point of the stripe: its result carries out.last


def stripe_beats(x: np.ndarray, weights: np.ndarray, p: DatapathParams) -> tuple[list[Beat], list[np.ndarray]]:
    """Beats and weight sets for out = x @ weights.T sequenced like CSC: x[P, C], weights[K, C].

    Kernels go in groups of `cells` (the outer loop: a whole layer when K > cells); per group, pixels in
    stripes of <= stripe_max; per stripe, channel blocks of atomic_c in order, each a new weight set (swap
    on its first atom). Returns (beats, weight sets [cells, atomic_c] each).
    """
    if weights.shape[0] > p.cells:
        beats: list[Beat] = []
        sets: list[np.ndarray] = []
        for k0 in range(0, weights.shape[0], p.cells):
            b, s = stripe_beats(x, weights[k0 : k0 + p.cells], p)
            beats += b
            sets += s
        return beats, sets
    pixels, channels = x.shape
    k = weights.shape[0]
    beats = []
    sets = []
    blocks = math.ceil(channels / p.atomic_c)
    for s0 in range(0, pixels, p.stripe_max):
        s1 = min(pixels, s0 + p.stripe_max)
        for b in range(blocks):
            c0, c1 = b * p.atomic_c, min(channels, (b + 1) * p.atomic_c)
            w = np.zeros((p.cells, p.atomic_c), np.int64)
            w[:k, : c1 - c0] = weights[:, c0:c1]
            sets.append(w)
            for i, px in enumerate(range(s0, s1)):
                d = np.zeros(p.atomic_c, np.int64)
                d[: c1 - c0] = x[px, c0:c1]
                final = b == blocks - 1
                beats.append(Beat(d, px - s0, first=b == 0, last=final, swap=i == 0, end=final and px == s1 - 1))
    return beats, sets


def datapath_outputs(
    beats: Sequence[Beat], weight_sets: Sequence[np.ndarray], p: DatapathParams, *, truncate: int = 0
) -> list[tuple[int, bool, np.ndarray]]:
    """Expected (pix, last, int32[cells]) results in emission order, through cmac.atomic_op and
    cacc.accumulate; `last` marks the final output point of each stripe."""
    return [
        (pix, end, res.values.astype(np.int64)) for pix, end, res in _output_points(beats, weight_sets, p, truncate)
    ]


def requant_outputs(
    beats: Sequence[Beat],
    weight_sets: Sequence[np.ndarray],
    p: DatapathParams,
    sdp_params: sdp.SdpParams,
    *,
    truncate: int = 0,
) -> list[tuple[int, bool, np.ndarray]]:
    """Expected results of CMAC + CACC + SDP (rtl/sdp_x1.py): each output point's INT32 values through
    sdp.sdp_apply, the simulator's own SDP (per-kernel operands are one value per MAC cell)."""
    return [
        (pix, end, sdp.sdp_apply(res.values[None, :], sdp_params).values[0].astype(np.int64))
        for pix, end, res in _output_points(beats, weight_sets, p, truncate)
    ]


def arithmetic_events(
    beats: Sequence[Beat], weight_sets: Sequence[np.ndarray], p: DatapathParams, *, truncate: int = 0
) -> dict[str, int]:
    """How often the run's arithmetic hits the CACC corners: accumulator saturation, output saturation
    to INT32, rounding ties (for functional coverage)."""
    points = [res for _, _, res in _output_points(beats, weight_sets, p, truncate)]
    return {
        "acc_saturations": sum(r.acc_saturations for r in points),
        "out_saturations": sum(r.out_saturations for r in points),
        "rounding_ties": sum(r.rounding_ties for r in points),
    }


def _output_points(beats, weight_sets, p: DatapathParams, truncate: int):
    """(pix, end, cacc.CaccResult) of each output point in emission order."""
    active = None
    next_set = 0
    partials: dict[int, list[np.ndarray]] = {}
    for bt in beats:
        if bt.swap:
            active = weight_sets[next_set]
            next_set += 1
        if active is None:
            raise ValueError("the first beat must swap in a weight set")
        ps = cmac.atomic_op(bt.data[None, :], active, p.precision)[0]
        if bt.first:
            partials[bt.pix] = []
        partials.setdefault(bt.pix, []).append(ps)
        if bt.last:
            yield (
                bt.pix,
                bt.end,
                cacc.accumulate(partials.pop(bt.pix), p.precision, truncate=truncate, acc_bits=p.acc_bits),
            )


class Offer:
    """A stream driver's valid, shared by the timing model and the benches: in cycle t it is raised when a
    beat is left and `pattern[t]` is true (true past the pattern's end: gaps only where it says so), and
    once raised it is held until the beat is taken (a stream's valid never drops before ready)."""

    def __init__(self, n_beats: int, pattern: Sequence[bool] = ()) -> None:
        self.n, self.pattern = n_beats, pattern
        self.sent = 0
        self.pending = False

    def valid(self, t: int) -> bool:
        if not self.pending and self.sent < self.n and (t >= len(self.pattern) or self.pattern[t]):
            self.pending = True
        return self.pending

    def taken(self) -> None:
        self.pending = False
        self.sent += 1


def random_pattern(rng: np.random.Generator, n: int, prob: float) -> list[bool]:
    """n cycles, each true with probability `prob` (a valid or ready pattern for the benches)."""
    return [bool(v) for v in rng.random(n) < prob]


@dataclass(frozen=True)
class DatapathTiming:
    accept_cycles: tuple[int, ...]  # cycle each data beat was accepted
    output_cycles: tuple[int, ...]  # cycle each result was taken (valid & ready)

    @property
    def first_in(self) -> int:
        return self.accept_cycles[0]

    @property
    def last_out(self) -> int:
        return self.output_cycles[-1]

    @property
    def cycles(self) -> int:
        """Cycles from the first accepted input to the last output, inclusive."""
        return self.last_out - self.first_in + 1


def datapath_timing(
    beats: Sequence[Beat],
    n_weight_beats: int,
    out_ready: Sequence[bool],
    p: DatapathParams,
    *,
    dat_valid: Sequence[bool] = (),
    wt_valid: Sequence[bool] = (),
    sdp_stages: int = 0,
    max_cycles: int = 10**7,
) -> DatapathTiming:
    """Replay the RTL handshake cycle by cycle. The drivers offer the next data and weight beats as
    `Offer` does with the `dat_valid` / `wt_valid` patterns (no gaps when empty); `out_ready[t]` is the
    sink's ready in cycle t (True beyond the list).

    Rules (mirrored in rtl/datapath.py): wt.ready = shadow not full; advance = ~out.valid | out.ready;
    dat.ready = advance & (~swap | shadow full); a swap empties the shadow; when advancing, the pipeline
    shifts and out.valid takes the `last` flag of the atom leaving the last CMAC stage. `sdp_stages`:
    a stall-together pipeline of that many registers after CACC's output register (rtl/sdp_x1.py), whose
    advance (~its out.valid | out.ready) is CACC's out.ready.
    """
    wt_count, i = 0, 0
    dat, wt = Offer(len(beats), dat_valid), Offer(n_weight_beats, wt_valid)
    pipe = [False] * p.pipeline  # valid & last per stage (only `last` matters for outputs)
    pipe_valid = [False] * p.pipeline
    out_valid = False
    sdp = [False] * sdp_stages  # valid per SDP register stage, the last one is the output
    accepts: list[int] = []
    outs: list[int] = []
    expected_outputs = sum(1 for b in beats if b.last)
    t = 0
    while len(outs) < expected_outputs:
        if t > max_cycles:
            raise RuntimeError("datapath model did not finish (deadlock?)")
        ready = out_ready[t] if t < len(out_ready) else True
        sdp_advance = (not sdp[-1]) or ready if sdp else ready  # CACC's out.ready
        full = wt_count == p.cells
        wt_fire = wt.valid(t) and not full
        advance = (not out_valid) or sdp_advance
        dat_fire = dat.valid(t) and advance and ((not beats[i].swap) or full)
        if (sdp[-1] if sdp else out_valid) and ready:
            outs.append(t)
        if sdp and sdp_advance:
            sdp = [out_valid, *sdp[:-1]]
        # next state
        if dat_fire:
            accepts.append(t)
        if wt_fire:
            wt_count += 1
            wt.taken()
        if dat_fire and beats[i].swap:
            wt_count = 0
        if advance:
            out_valid = pipe_valid[-1] and pipe[-1]
            pipe = [dat_fire and beats[i].last, *pipe[:-1]]
            pipe_valid = [dat_fire, *pipe_valid[:-1]]
        if dat_fire:
            dat.taken()
            i += 1
        t += 1
    return DatapathTiming(tuple(accepts), tuple(outs))
