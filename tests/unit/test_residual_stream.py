"""The residual stream in memory (issue 31): the residual add the mapper fuses into the SDP of the matmul
before it, through the bit-exact SDP model, on both programs (the element-wise unit's on nv_full, the X
stages' on nv_small), against sums worked by hand and against real arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_mapper.lowering.rules import Fused, LoweringContext, _fused_sdp
from nvdla_mapper.numerics.quant import residual_sdp
from nvdla_mapper.numerics.reference import MatmulRole, Site
from nvdla_mapper.studies.accuracy import QuantSettings, Scales, _datapath_hooks
from nvdla_sim import Precision, load_config
from nvdla_sim.errors import NvdlaError
from nvdla_sim.layers import OperandMode
from nvdla_sim.units.sdp import sdp_apply

# The accumulator of two kernels with weight steps 1 and 0.5 (input step 1): codes 10 and -6 are the real
# products 10 and -3; the bias (1, 2) makes them 11 and -1.
ACC = np.array([[10, -6]], np.int64)
S_X, S_W, BIAS = 1.0, np.array([1.0, 0.5]), np.array([1.0, 2.0])


@pytest.mark.parametrize("eltwise_unit", [True, False], ids=["EW unit (nv_full)", "X stages (nv_small)"])
@pytest.mark.parametrize(
    ("s_r", "expected"),
    [
        # residual codes (5, 7) at 0.5 are 2.5 and 3.5: sums 13.5 and 2.5, at 0.4 a step 33.75 -> 34, 6.25 -> 6
        (0.5, [34, 6]),
        # at 0.3 (no power of two of the accumulator's steps) 1.5 and 2.1: sums 12.5 and 1.1 -> 31.25 -> 31, 2.75 -> 3
        (0.3, [31, 3]),
    ],
)
def test_a_fused_residual_add_by_hand(eltwise_unit, s_r, expected):
    params = residual_sdp(S_X, S_W, 0.4, np.array([[5, 7]]), s_r, bias=BIAS, eltwise_unit=eltwise_unit)
    res = sdp_apply(ACC, params)
    assert res.values.tolist() == [expected]
    assert res.saturations == 0


def test_the_programs_use_the_stages_the_mapper_lowers_to():
    """nv_full adds the residual in Y (E-RDMA, through its convertor); nv_small, without an EW unit, in X2's
    ALU after X1's multipliers (per-channel weight steps differ, so the residual cannot be added in X1,
    before them, with an X operand's shift alone), as the lowering's SdpSpec says."""
    ew = residual_sdp(S_X, S_W, 0.4, np.array([[5, 7]]), 0.3, bias=BIAS, eltwise_unit=True)
    assert ew.y is not None and ew.y.alu_operand is not None and ew.y.alu_cvt is not None
    assert ew.x2 is not None and ew.x2.alu_operand is None
    xs = residual_sdp(S_X, S_W, 0.4, np.array([[5, 7]]), 0.3, bias=BIAS, eltwise_unit=False)
    assert xs.y is None and xs.x1.mul_operand is not None and xs.x2.alu_operand is not None
    for hw, where in (("nv_full", "eltwise"), ("nv_small", "scale")):
        ctx = LoweringContext.of(hw=load_config(hw), precision=Precision.INT8)
        spec = _fused_sdp(Fused(residual=True), ctx)
        assert getattr(spec, where) is OperandMode.PER_ELEMENT
        assert spec.bias is OperandMode.PER_KERNEL


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(-3000, 3000), min_size=4, max_size=4),
    st.lists(st.integers(-128, 127), min_size=4, max_size=4),
    st.lists(st.floats(1e-4, 1e-2), min_size=2, max_size=2),
    st.floats(0.01, 1.0),
    st.floats(0.01, 1.0),
    st.booleans(),
)
def test_the_sum_is_the_real_sum_rounded(acc, res, s_w, s_r, s_y, eltwise_unit):
    """Against real arithmetic: (acc x s_x x s_w + bias + r x s_r) / s_y, rounded and saturated, within the
    precision of the program's 16-bit operands (a hundredth of a step for the intermediate roundings): the
    kernels' bias codes share X1's one ALU shift and their multipliers one MUL shift, so where one kernel's
    value needs the shift to fit 16 bits, another's bias loses up to half of 2**shift accumulator steps and
    its multiplier keeps fewer bits (half a unit of it, relative). Found by hypothesis: weight steps 0.0049
    and 0.0001 with biases 0.3 and -0.7 (shift 3: 0.098 of an output step; 28.57 written 28), and steps
    0.0001 and 0.0078 (kernel 0's multiplier 336: 0.15%, 0.047 of a step at 31.45; written 32)."""
    acc = np.array(acc, np.int64).reshape(2, 2)
    r = np.array(res, np.int64).reshape(2, 2)
    s_w = np.array(s_w)
    bias = np.array([0.3, -0.7])
    params = residual_sdp(0.05, s_w, s_y, r, s_r, bias=bias, eltwise_unit=eltwise_unit)
    got = sdp_apply(acc, params).values.astype(np.int64)
    real = np.clip((acc * 0.05 * s_w + bias + r * s_r) / s_y, -128, 127)
    bias_step = 2.0 ** (params.x1.alu_shift - 1) * 0.05 * s_w / s_y if params.x1.alu_shift else 0.0 * s_w
    mul = params.x2.mul_operand if eltwise_unit else params.x1.mul_operand
    mul_error = 0.5 / np.abs(np.asarray(mul, np.float64)) * np.abs(real)
    assert np.all(np.abs(got - real) <= 0.5 + 0.02 + bias_step + mul_error)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(-(2**24), 2**24), min_size=4, max_size=4),
    st.lists(st.integers(-32768, 32767), min_size=4, max_size=4),
    st.floats(0.25, 1.0),
    st.booleans(),
)
def test_at_int16_the_sum_is_within_two_steps(acc, res, spread, eltwise_unit):
    """INT16: F is smaller (the sum's 32,768 steps need the room), and the shared MUL shift keeps fewer
    bits of the smaller multiplier: within two output steps of real arithmetic (weight steps 4x apart at
    most, as requant_sdp's limit)."""
    acc = np.array(acc, np.int64).reshape(2, 2)
    r = np.array(res, np.int64).reshape(2, 2)
    s_w, s_r, s_y = np.array([1e-6, 1e-6 * spread]), 1e-4, 1.2e-4
    params = residual_sdp(0.01, s_w, s_y, r, s_r, bias=None, eltwise_unit=eltwise_unit, precision=Precision.INT16)
    got = sdp_apply(acc, params).values.astype(np.int64)
    real = np.clip((acc * 0.01 * s_w + r * s_r) / s_y, -32768, 32767)
    assert np.all(np.abs(got - real) <= 2.0)


def test_a_program_that_cannot_be_made_is_a_one_line_error():
    """Accumulator steps 2**17 times the residual's: no F >= 0 keeps the multipliers in 16 bits."""
    with pytest.raises(ValueError, match="too coarse for a residual scale"):
        residual_sdp(1.0, np.array([131072.0]), 1.0, np.zeros((1, 1)), 1.0, bias=None, eltwise_unit=False)


def test_one_weight_scale_makes_the_multiplier_a_register():
    xs = residual_sdp(S_X, np.array([0.5, 0.5]), 0.4, np.array([[5, 7]]), 0.3, bias=BIAS, eltwise_unit=False)
    assert np.ndim(xs.x1.mul_operand) == 0 and np.ndim(xs.x1.alu_operand) == 1


def _stream_run(hw: str, only=frozenset()):
    """One residual add through an INT8 run: the stream [1, 2] (the host's first value) plus a 2x2 matmul,
    every scale 1/127 a step but the sum's, 2/127."""
    x0, a, w, b = np.array([[1.0, -0.5]]), np.array([[0.4, 1.0]]), np.array([[1.0, 0.0], [0.25, -1.0]]), None
    steps = {"emb.stream": 1.0 / 127, "o.stream": 2.0 / 127}
    scales = Scales({"o": 1.0 / 127}, {"o": 1.0 / 127}, {}, steps=steps)
    hooks = _datapath_hooks(load_config(hw), QuantSettings(only=only), scales, {})
    return hooks, x0, a, w, b


@pytest.mark.parametrize("hw", ["nv_small", "nv_full"])
def test_the_stream_is_written_at_its_scale(hw):
    """The host writes 1 and -0.5 at 1/127 a step: codes 127 and -64 (-63.5 rounds away from zero). The
    matmul's codes: the input 0.4 -> 51, 1.0 -> 127; the weights (per channel, max 1 -> 1/127) 1 -> 127,
    0.25 -> 32 (31.75), -1 -> -127; products 51 x 127 = 6,477 and 51 x 32 - 127 x 127 = -14,497 steps of
    1/127**2, plus the stream's 127 and -64 steps of 1/127, at 2/127 a step: (6,477 / 127 + 127) / 2 =
    89.0 -> 89 and (-14,497 / 127 - 64) / 2 = -89.07 -> -89."""
    hooks, x0, a, w, b = _stream_run(hw)
    x = hooks.embedded("emb", x0)
    assert np.allclose(x * 127, [[127, -64]])
    y = hooks.residual(Site("o", MatmulRole.OUTPUT), a, w, b, x)
    assert np.allclose(y * 127 / 2, [[89, -89]])


def test_a_residual_add_needs_the_stream_written_first():
    hooks, _, a, w, b = _stream_run("nv_full")
    with pytest.raises(NvdlaError, match="before the stream's first value"):
        hooks.residual(Site("o", MatmulRole.OUTPUT), a, w, b, np.zeros((1, 2)))


def test_the_residual_stream_can_be_switched_to_float():
    """`--only` without the residual: the forward's adds stay float (no hooks)."""
    hooks, *_ = _stream_run("nv_full", only=frozenset({"projection"}))
    assert hooks.residual is None and hooks.embedded is None


def test_the_cli_runs_the_stream_alone(tmp_path):
    """`nvdla accuracy vit_digits --only residual`: the residual stream in INT8, the matmuls float; the row
    is trained_accuracy's with those settings, and its saturations are the stream's (the matmuls have none)."""
    import json
    from pathlib import Path

    from nvdla_cli.main import main
    from nvdla_mapper.studies.accuracy import trained_accuracy

    out = tmp_path / "row.json"
    assert main(["accuracy", "vit_digits", "--only", "residual", "--samples", "24", "--json", str(out)]) == 0
    row = json.loads(out.read_text())
    trained = Path(__file__).resolve().parents[2] / "validation" / "data" / "trained"
    want = trained_accuracy(
        trained, "vit_digits", load_config("nv_small"), QuantSettings(only=frozenset({"residual"})), samples=24
    ).to_dict()
    assert {k: row[k] for k in want} == want
