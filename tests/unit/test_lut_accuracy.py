"""The accuracy study's steps on a build with SDP's LUT (nv_full): the softmax as the mapper lowers it with
--softmax nvdla and GELU in the LUT of the FFN's first layer, through the bit-exact datapath, on cases
worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nvdla_mapper.numerics import lut_steps
from nvdla_mapper.numerics.reference import MatmulRole, Site, _attention, float_matmul, gelu_tanh, softmax
from nvdla_mapper.studies.accuracy import QuantSettings, _calibrated_scales, _datapath_hooks
from nvdla_sim import load_config
from nvdla_sim.errors import NvdlaError
from nvdla_sim.units.sdp import sdp_apply

# the matmuls these tests run, with the roles a forward pass gives them (reference.Site)
FC = Site("t.mlp.c_fc", MatmulRole.FFN_UP, "t.mlp.c_fc")
PROJ_DOWN = Site("t.mlp.c_proj", MatmulRole.FFN_DOWN)
PATCH = Site("t.patch", MatmulRole.QUERY)  # a projection
OUT = Site("t.attn.c_proj", MatmulRole.OUTPUT)
HW = load_config("nv_full")


def _head():
    """One head (d = 4): query 0 scores the three keys 8, 4, 0 and query 1 scores them -8, -4, 0 (after
    1/sqrt(4)); the values are one-hot, so each output row is that query's probabilities."""
    q = np.array([[4.0, 0, 0, 0], [-4.0, 0, 0, 0]])
    k = np.array([[4.0, 1, 0, 0], [2.0, 0, 1, 0], [0.0, 0, 0, 1]])
    v = np.eye(3, 4)
    return q, k, v


def _run(settings: QuantSettings):
    q, k, v = _head()
    scales = _calibrated_scales(lambda h: h.attend("t.attn", q, k, v, False), settings)
    hooks = _datapath_hooks(HW, settings, scales, {})
    return hooks, hooks.attend("t.attn", q, k, v, False) if hooks.attend else None


def test_the_lut_softmax_loses_every_row_whose_range_is_not_the_tensors():
    """Without a row max, every INT8 step is scaled for the tensor's extremes. Worked through: QK^T's
    largest product 16 is code 127 (0.063 of scaled score per code): codes (127, 64, 0) and (-127, -64, 0).
    exp is scaled for e^8 (23.47 per code): query 0's exps 127, 127 e^-4 = 2.3 -> 2 and 0; query 1's
    127 e^-8 = 0.04 and less: all 0. The row sums are scaled for e^8 + e^4 + 1 (23.91 per code): 127 and
    0. 1/sum is scaled for query 1's 1/1.0186 = 0.982 (0.00773 per code): query 0's 1/(127 x 23.91) =
    3.3e-4 is 0.04 of a step -> 0, query 1's sum of code 0 taken as half a step -> 1/11.95 -> 10.8 -> 11.
    Both outputs are 0: query 0 through its 1/sum, query 1 through its exps; float's are (0.982, 0.018,
    0.0003) and (0.0003, 0.018, 0.982)."""
    hooks, got = _run(QuantSettings(softmax="nvdla"))
    q, k, v = _head()
    want = softmax(q @ k.T / 2) @ v
    assert want[0, 0] == pytest.approx(0.982, abs=1e-3) and want[1, 2] == pytest.approx(0.982, abs=1e-3)
    assert np.array_equal(got, np.zeros((2, 4)))
    steps = _calibrated_scales(lambda h: h.attend("t.attn", q, k, v, False), QuantSettings()).steps
    assert steps["t.attn.exp"] == pytest.approx(math.exp(8) / 127)
    assert steps["t.attn.recip"] == pytest.approx(1 / (math.exp(-8) + math.exp(-4) + 1) / 127)
    recip = lut_steps.recip_pass(steps["t.attn.rowsum"], steps["t.attn.recip"])
    assert list(sdp_apply(np.array([[127, 0]]), recip).values.ravel()) == [0, 11]


def _self_head():
    """The hand head with a third query of zeros (it scores the three keys alike: 1/3 each): as many queries
    as keys, the forward's self-attention."""
    q, k, v = _head()
    return np.vstack([q, np.zeros(4)]), k, v


def _self_attention(hooks):
    """The forward's attention (reference._attention) on _self_head with `hooks`: each head's attention whole
    where the build takes it (hooks.attend), else QK^T and PV through the datapath's matmul around the
    host's float softmax."""
    q, k, v = _self_head()
    return _attention(q[None], k[None], v[None], 1, False, hooks.products(), "t.attn", hooks.attend)[0]


def test_the_host_softmax_is_the_mappers_choice_on_nv_full():
    """With --softmax auto the accuracy run, like the mapper, leaves the softmax to the host: QK^T and PV
    through the INT8 datapath around a float softmax keep every row, where the LUT softmax (--softmax
    nvdla) loses them all (as in the test above). By hand: float's rows are (0.982, 0.018, 0.0003), its
    mirror and (1/3, 1/3, 1/3); P is written at 1/127 a step and PV's output at 0.982 / 127 = 0.0077 a
    step (the values are one-hot), so every output is within half of each step of float's."""
    q, k, v = _self_head()
    want = softmax(q @ k.T / 2) @ v
    assert want[2, :3] == pytest.approx([1 / 3] * 3) and want[0, 0] == pytest.approx(0.982, abs=1e-3)
    got = {}
    for mode in ("auto", "nvdla"):
        settings = QuantSettings(softmax=mode)
        scales = _calibrated_scales(_self_attention, settings)
        got[mode] = _self_attention(_datapath_hooks(HW, settings, scales, {}))
    assert np.abs(got["auto"] - want).max() <= 0.5 / 127 + 0.5 * 0.9817 / 127
    assert np.abs(got["auto"] - want).max() > 0  # the INT8 datapath's, not float's
    assert np.array_equal(got["nvdla"], np.zeros((3, 4)))


def test_gelu_in_the_lut_follows_float_gelu():
    """The FFN's first layer with GELU in its SDP's LUT, through the datapath: within two output steps of
    GELU computed in float on the float product, half a step on average (the INT8 operands' rounding and
    the output's; the table's own interpolation is far finer)."""
    rng = np.random.default_rng(5)
    a, w, b = rng.normal(0, 1, (16, 32)), rng.normal(0, 0.2, (24, 32)), rng.normal(0, 0.1, 24)

    def forward(h):
        return h.activated(FC, a, w, b, gelu_tanh)

    settings = QuantSettings()
    scales = _calibrated_scales(forward, settings)
    got = forward(_datapath_hooks(HW, settings, scales, {}))
    want = gelu_tanh(float_matmul("", a, w, b))
    step = scales.steps["t.mlp.c_fc.act"]
    assert step == pytest.approx(want.max() / 127)
    assert np.abs(got - want).max() <= 2 * step
    assert math.isclose(np.abs(got - want).mean(), 0, abs_tol=0.5 * step)


def test_the_gpt_lut_softmax_cannot_be_programmed():
    """On the trained character GPT the softmax's normalisation (PV's output times 1/sum, converted to the
    context's INT8 scale) needs a multiplier of 6.6e8, beyond the output convertor's INT16 scale: the run is
    refused in one line naming the step."""
    from pathlib import Path

    from nvdla_mapper.studies.accuracy import trained_accuracy

    trained = Path(__file__).resolve().parents[2] / "validation" / "data" / "trained"
    with pytest.raises(NvdlaError, match=r"transformer.h.0.attn.normalize: cannot be programmed: .* multiplier 66"):
        trained_accuracy(trained, "char_gpt", HW, QuantSettings(softmax="nvdla"), samples=1, prompts=1, new_tokens=1)


def test_a_step_that_runs_on_the_host_is_not_an_int8_part():
    """--only softmax (or gelu) where that step is the host's float would print an INT8 run that is all
    float: refused in one line, naming what would make it an NVDLA part."""
    from nvdla_mapper.studies.accuracy import Scales, _NvdlaRun

    scales = Scales({}, {}, {})
    with pytest.raises(NvdlaError, match=r"'softmax': the softmax runs on the host on nv_full .*--softmax nvdla"):
        _NvdlaRun(HW, QuantSettings(only=frozenset({"softmax"})), scales, {})
    with pytest.raises(NvdlaError, match=r"'gelu': the gelu runs on the host on nv_small"):
        _NvdlaRun(load_config("nv_small"), QuantSettings(only=frozenset({"gelu"})), scales, {})


def test_map_keeps_its_figures_when_the_task_run_cannot_be_programmed(tmp_path, capsys):
    """`nvdla map <trained GPT> --hw nv_full --softmax nvdla --quantize per-channel`: the map and its report
    are written, and the task accuracy line says why the LUT softmax cannot be programmed."""
    import json
    from pathlib import Path

    from nvdla_cli.main import main

    cfg = Path(__file__).resolve().parents[2] / "validation" / "data" / "trained" / "char_gpt.config.json"
    argv = ["map", str(cfg), "--hw", "nv_full", "--seq", "64", "--softmax", "nvdla", "--quantize", "per-channel"]
    assert main([*argv, "--report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "end-to-end" in out and "transformer.h.0.attn.normalize: cannot be programmed" in out
    task = json.loads((tmp_path / "report.json").read_text())["accuracy"]["task"]
    assert task["error"].startswith("transformer.h.0.attn.normalize: cannot be programmed")


def test_int16_runs_with_cacc_truncation_and_keeps_the_float_result():
    """INT16 on nv_full: CACC's truncation is what the worst output needs to fit SDP's 32 bits, any input
    times the kernel's weights plus its bias (by hand: 32,768 x 32,767 x 128 = 137,434,759,168 < 2**37 =
    137,438,953,472: 37 bits, 6 beyond 31; a bias of 5,000,000 steps passes 2**37: 7; none at INT8), the
    calibrated scales are INT8's taken to 32,767 steps, and a matmul with a bias then comes within 2e-4 of
    float (relative, over the output), a hundred times closer than INT8's."""
    from nvdla_mapper.studies.accuracy import Scales, _NvdlaRun
    from nvdla_sim import Precision

    run16 = _NvdlaRun(HW, QuantSettings(precision=Precision.INT16), Scales({}, {}, {}), {})
    full = np.full((2, 128), 32767)
    assert run16.truncate(full) == 6 and run16.truncate(full, np.array([0, 5e6])) == 7
    assert run16.truncate(np.full((1, 8), 32767)) == 2 and run16.rescale == 127 / 32767
    rng = np.random.default_rng(7)
    a, w, b = rng.normal(0, 1, (16, 128)), rng.normal(0, 0.1, (32, 128)), rng.normal(0, 0.1, 32)
    want = float_matmul("", a, w, b)
    err = {}
    for p in (Precision.INT8, Precision.INT16):
        settings = QuantSettings(precision=p)
        scales = _calibrated_scales(lambda h: h.matmul(PROJ_DOWN, a, w, b), settings, steps_too=False)
        got = _datapath_hooks(HW, settings, scales, {}).matmul(PROJ_DOWN, a, w, b)
        err[p] = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert err[Precision.INT16] < 2e-4 and err[Precision.INT8] > 100 * err[Precision.INT16]


def test_int16_refusals_are_one_line():
    from nvdla_mapper.studies.accuracy import Scales, _NvdlaRun
    from nvdla_sim import Precision

    with pytest.raises(NvdlaError, match="an fp16 run has no scales to smooth"):
        QuantSettings(precision=Precision.FP16, smooth=0.5)
    with pytest.raises(NvdlaError, match="learned \\(QAT\\) and dynamic scales are runs at int8"):
        QuantSettings(precision=Precision.INT16, dynamic=True)
    with pytest.raises(NvdlaError, match="--softmax nvdla covers INT8 scores only"):
        _NvdlaRun(HW, QuantSettings(precision=Precision.INT16, softmax="nvdla"), Scales({}, {}, {}), {})


def test_int16_leaves_room_for_the_bias():
    """A 4-channel INT16 matmul whose accumulator reaches 32,767^2 x 4 = 4.29e9 (past 2**31) and whose
    bias is half its range: CACC truncates 2 bits, not the 1 the product alone needs, so SDP's X stages
    do not saturate and every output is within two INT16 steps of float."""
    from nvdla_sim import Precision

    a = np.array([[1.0, 1.0, 1.0, 1.0], [-1.0, -1.0, -1.0, -1.0], [0.5, -0.25, 1.0, 0.0]])
    w = np.array([[1.0, 1.0, 1.0, 1.0], [0.5, -0.5, 0.25, 1.0]])
    b = np.array([2.0, -0.5])
    settings = QuantSettings(precision=Precision.INT16)
    scales = _calibrated_scales(lambda h: h.matmul(PATCH, a, w, b), settings, steps_too=False)
    sats = {}
    got = _datapath_hooks(HW, settings, scales, sats).matmul(PATCH, a, w, b)
    step = scales.outputs[PATCH] * 127 / 32767
    assert np.abs(got - float_matmul("", a, w, b)).max() <= 2 * step


def test_accuracy_command_at_int16(tmp_path, capsys, vit_digits):
    """`nvdla accuracy vit_digits --hw nv_full --precision int16` on the first 12 test images: the float count
    the float reference gives, the INT16 count and saturations within what the committed run on the first
    100 images allows (validation/data/trained/accuracy.json: 96 right, 9 saturations), the printed line
    the JSON's; `--only ffn` labelled as such; on nv_small (no INT16 datapath) a one-line error."""
    import json

    from nvdla_cli.main import main

    out = tmp_path / "row.json"
    argv = ["accuracy", "vit_digits", "--hw", "nv_full", "--precision", "int16", "--samples", "12"]
    assert main([*argv, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    row = json.loads(out.read_text())
    want = vit_digits.committed("nv_full", "INT16: static max, per-channel weights", 100)
    assert (want["nvdla_correct"], want["saturations"]) == (96, 9)
    assert (row["hw"], row["precision"], row["images"]) == ("nv_full", "int16", 12)
    assert row["float_correct"] == vit_digits.float_correct(12)
    # at most 100 - 96 = 4 of the first 100 images wrong, at most 9 saturations over them: the first 12 no more
    assert 12 - 4 <= row["nvdla_correct"] <= 12 and 0 <= row["saturations"] <= 9
    f, n = row["float_correct"], row["nvdla_correct"]
    assert "INT16 (static max activations, per-channel weights)" in text
    assert f"float {f / 12:.1%} ({f}/12), int16 {n / 12:.1%} ({n}/12)" in text
    assert main([*argv[:-1], "2", "--only", "ffn", "--json", str(out)]) == 0
    capsys.readouterr()
    row = json.loads(out.read_text())
    assert row["images"] == 2 and row["recipe"] == "static max activations, per-channel weights, int16 only in ffn"
    assert main(["accuracy", "vit_digits", "--precision", "int16", "--samples", "2"]) == 2
    assert "nv_small has no int16 datapath" in capsys.readouterr().err


def _fp16(x):
    return np.asarray(x, np.float64).astype(np.float16).astype(np.float64)


def _fp16_hooks(hw=HW):
    from nvdla_sim import Precision

    settings = QuantSettings(precision=Precision.FP16)
    sats: dict[str, int] = {}
    return _datapath_hooks(hw, settings, None, sats), sats


def test_fp16_matmul_bias_and_residual_are_float_to_fp16s_rounding():
    """At FP16 there are no scales: the operands are written as FP16 and the product of CMAC's block
    floating point, CACC's 48-bit sum and SDP's FP32 bias add lands on FP16's grid. Against float64 on
    the FP16 operands each output is within one FP16 unit of the result plus CMAC's alignment loss: a
    product aligned to its atom's largest block exponent keeps units of 2**-20 of the atom's largest
    product (normal mantissas are at least 2**10 each) and loses under two of them (floor, and the Booth
    vectors' second truncation), so under 64 x 2 x 2**-20 = 2**-13 of the largest product per atom of 64
    channels. The residual add through Y's ALU from E-RDMA likewise (the stream read at FP16)."""
    rng = np.random.default_rng(3)
    a, w, b = rng.normal(0, 1, (16, 96)), rng.normal(0, 0.2, (40, 96)), rng.normal(0, 1, 40)
    x = rng.normal(0, 4, (16, 40))
    hooks, sats = _fp16_hooks()
    want = _fp16(a) @ _fp16(w).T + _fp16(b)
    products = np.abs(_fp16(a)[:, None, :] * _fp16(w)[None, :, :])
    align = 2.0**-13 * (products[..., :64].max(-1) + products[..., 64:].max(-1))

    def within(got, want):
        return np.all(np.abs(got - want) <= np.spacing(np.abs(want).astype(np.float16)).astype(np.float64) + align)

    got = hooks.matmul(OUT, a, w, b)
    assert within(got, want) and np.all(got == _fp16(got))
    assert np.median(np.abs(got - want)) < 1e-3  # most outputs: FP16's rounding alone
    assert within(hooks.residual(OUT, a, w, b, x), want + _fp16(x))
    assert sum(sats.values()) == 0


def test_fp16_gelu_runs_in_the_lut_and_follows_gelu():
    """On nv_full the FFN's GELU runs in its first layer's SDP LUT at FP16 (fp16_steps.gelu_lut): within
    two FP16 units plus the table's interpolation bound (1e-4) of GELU on the float64 product. The softmax
    and LayerNorm stay the host's: the hand head's attention within two FP16 units of float's, LayerNorm
    float's own."""
    rng = np.random.default_rng(4)
    a, w, b = rng.normal(0, 1, (8, 64)), rng.normal(0, 0.3, (32, 64)), rng.normal(0, 1, 32)
    hooks, _ = _fp16_hooks()
    q, k, v = _self_head()
    want = softmax(q @ k.T / 2) @ v
    assert np.all(np.abs(_self_attention(hooks) - want) <= 2 * np.spacing(want.astype(np.float16)))
    g, beta = rng.normal(1, 0.1, 64), rng.normal(0, 0.1, 64)
    centred = a - a.mean(-1, keepdims=True)
    by_hand = centred / np.sqrt((centred**2).mean(-1, keepdims=True) + 1e-5) * g + beta
    assert np.allclose(hooks.norm("t.ln_1", a, g, beta, 1e-5), by_hand, rtol=0, atol=1e-12)
    want = gelu_tanh(_fp16(a) @ _fp16(w).T + _fp16(b))
    got = hooks.activated(FC, a, w, b, gelu_tanh)
    ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got - want) <= 2 * ulp + 1e-4)


def test_fp16_saturation_is_counted_and_refusals_are_one_line():
    """A value the host writes that FP16's rounding takes past 65504 is counted and written as 65504; a build
    without FP16 (nv_small) is refused in one line."""
    from nvdla_sim import Precision

    hooks, sats = _fp16_hooks()
    # 65519 rounds to 65504 (nearest even: not a saturation); 65520 and beyond would round to infinity
    assert hooks.embedded("t.wte", np.array([[1e5, -3.0, 65519.0, -65520.0]])).tolist() == [
        [65504.0, -3.0, 65504.0, -65504.0]
    ]
    assert sats["t.wte"] == 2
    with pytest.raises(NvdlaError, match="nv_small has no fp16 datapath"):
        _datapath_hooks(load_config("nv_small"), QuantSettings(precision=Precision.FP16), None, {})


def test_accuracy_command_at_fp16(tmp_path, capsys, vit_digits):
    """`nvdla accuracy vit_digits --hw nv_full --precision fp16` on the first 8 test images: the float count
    the float reference gives, the FP16 count within what the committed run on the first 100 images allows
    (validation/data/trained/accuracy.json: 96 right, no saturation), labelled FP16 with no scales; a
    recipe knob FP16 has no use for is refused in one line."""
    import json

    from nvdla_cli.main import main

    out = tmp_path / "row.json"
    argv = ["accuracy", "vit_digits", "--hw", "nv_full", "--precision", "fp16", "--samples", "8", "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    row = json.loads(out.read_text())
    want = vit_digits.committed("nv_full", "FP16: no scales, GELU in the LUT's FP16 mode", 100)
    assert (want["nvdla_correct"], want["saturations"]) == (96, 0)
    assert (row["hw"], row["precision"], row["images"]) == ("nv_full", "fp16", 8)
    assert row["float_correct"] == vit_digits.float_correct(8)
    assert 8 - 4 <= row["nvdla_correct"] <= 8 and row["saturations"] == 0
    f, n = row["float_correct"], row["nvdla_correct"]
    assert row["recipe"] == "FP16 values, no scales" and "FP16 (FP16 values, no scales)" in text
    assert f"float {f / 8:.1%} ({f}/8), fp16 {n / 8:.1%} ({n}/8)" in text
    assert main(["accuracy", "vit_digits", "--hw", "nv_full", "--precision", "fp16", "--smooth", "0.5"]) == 2
    assert "an fp16 run has no scales to smooth" in capsys.readouterr().err
    assert main(["accuracy", "vit_digits", "--hw", "nv_full", "--precision", "fp16", "--softmax", "nvdla"]) == 2
    assert "drop --smooth, --only, --layernorm nvdla and --softmax nvdla" in capsys.readouterr().err
