"""Mapper hardware layers -> register programs: the program runs the same layer, the model's CRC and cycles."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvdla_mapper.export.layer_programs import layer_programs, program_name, requant
from nvdla_sim.config import load_config
from nvdla_sim.engine.tiling import LoopOrder, TilePlan, illegal_reason
from nvdla_sim.errors import NvdlaError, TraceError
from nvdla_sim.layers import ConvLayer, ConvShape, OperandMode, PdpLayer, PoolMode, PoolSpec, SdpLayer, SdpSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors import fixed_latency, simulate
from nvdla_sim.processors.conv.registers import CbufReuse
from nvdla_sim.program.decode import decode_program, hw_layer
from nvdla_sim.program.run import run_program
from nvdla_sim.registers.trace_io import parse_program

HW = load_config("nv_small_rtl_tb")
P = Precision.INT8
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

specs = st.builds(
    SdpSpec,
    bias=st.sampled_from([OperandMode.NONE, OperandMode.PER_KERNEL, OperandMode.PER_ELEMENT, OperandMode.REG]),
    scale=st.sampled_from([OperandMode.NONE, OperandMode.REG, OperandMode.PER_KERNEL]),
    relu=st.booleans(),
)


@st.composite
def conv_layers(draw):
    if draw(st.booleans()):
        m = draw(st.integers(1, 96))
        shape = ConvShape.matmul(m, draw(st.integers(1, 200)), draw(st.integers(1, 40)))
    else:
        k = draw(st.sampled_from([1, 3]))
        shape = ConvShape.square(
            draw(st.integers(k, 12)), draw(st.integers(k, 12)), draw(st.integers(1, 24)), draw(st.integers(1, 24)),
            kernel=k, stride=draw(st.integers(1, 2)), pad=draw(st.integers(0, k // 2)),
        )  # fmt: skip
    return ConvLayer("t", shape, P, draw(specs))


def _check(lp, tmp_path, layer):
    """The written program decodes to `layer` (its band), its CRC is recomputed, its cycles are the model's."""
    d = lp.program.write(tmp_path)
    ops = decode_program(parse_program(d)).operations
    assert len(ops) == 1
    got = hw_layer(ops[0], layer.name)
    if isinstance(layer, ConvLayer):
        assert got.shape == layer.shape
        assert got.sdp == dataclasses.replace(layer.sdp, out_precision=P)
    run = run_program(d, HW)
    assert [c["match"] for c in run.checks] == [True]
    assert run.cycles == lp.model_cycles
    return got


@SETTINGS
@given(layer=conv_layers())
def test_conv_programs_give_back_the_layer_with_the_models_cycles(tmp_path_factory, layer):
    tmp = tmp_path_factory.mktemp("lp")
    progs = layer_programs(layer, HW, seed=1)
    assert len(progs) == 1
    _check(progs[0], tmp, progs[0].layer)
    st_ = simulate(layer, HW, record_events=False)
    assert progs[0].model_cycles == st_.cycles + sum(fixed_latency(layer, HW))


@pytest.mark.parametrize("order", [LoopOrder.DATA_STATIONARY, LoopOrder.WEIGHT_STATIONARY])
def test_a_split_layer_is_one_program_of_its_hardware_layers_in_plan_order(tmp_path, order):
    """64 x 3072 input (192 KB) in a 128 KB CBUF: bands of 2 rows (x 8 tokens), and in weight-stationary
    order kernel tiles of 16 of the 64 kernels: one program whose hardware layers are the plan's, in its
    order, with the operand it keeps in CBUF kept and reused; every layer's output is the model's and the
    program's cycles are the mapper's for the whole plan."""
    layer = ConvLayer("ffn2", ConvShape.matmul(64, 3072, 64, row=8), P, SdpSpec(bias=OperandMode.PER_KERNEL))
    kernels = 16 if order is LoopOrder.WEIGHT_STATIONARY else 64
    plan = TilePlan(12, 20, 2, kernels, order)
    assert illegal_reason(layer, plan, HW) is None
    (lp,) = layer_programs(layer, HW, plan=plan)
    bands, tiles = 4, 64 // kernels
    assert lp.hardware_layers == bands * tiles
    d = lp.program.write(tmp_path)
    ops = decode_program(parse_program(d)).operations
    # hand-written plan order: data-stationary runs the bands; weight-stationary every band per kernel tile
    expect = [(k, b) for k in range(tiles) for b in range(bands)]
    for op, (k, b) in zip(ops, expect, strict=True):
        assert op.shape.in_h == 2 and op.shape.out_k == kernels
        ws = order is LoopOrder.WEIGHT_STATIONARY
        assert op.reuse == CbufReuse(weight_reuse=ws and b > 0, skip_weight_rls=ws and b < bands - 1), (k, b)
    run = run_program(d, HW)
    assert len(run.checks) == bands * tiles and all(c["match"] for c in run.checks)
    whole = simulate(layer, HW, plan, record_events=False).cycles + sum(fixed_latency(layer, HW))
    assert lp.model_cycles == whole


def test_sdp_and_pdp_layers(tmp_path):
    sdp = SdpLayer("res", 16, 4, 24, P, SdpSpec(bias=OperandMode.PER_ELEMENT, relu=True))
    pdp = PdpLayer("pool", 15, 9, 16, P, PoolSpec(PoolMode.MAX, 3, 3, 2, 2, 1, 1, 1, 1))
    (lp,) = layer_programs(sdp, HW)
    got = _check(lp, tmp_path, sdp)
    assert (got.width, got.height, got.channels) == (16, 4, 24)
    assert got.sdp == dataclasses.replace(sdp.sdp, out_precision=P)
    (lp,) = layer_programs(pdp, HW)
    assert _check(lp, tmp_path, pdp) == pdp


def test_refusals_name_what_is_missing():
    with pytest.raises(NvdlaError, match="int16"):  # the nv_small build is INT8-only
        layer_programs(ConvLayer("x", ConvShape.matmul(8, 8, 8), Precision.INT16), HW)
    with pytest.raises(TraceError, match="INT8 and INT16 layers, not fp16"):
        layer_programs(ConvLayer("x", ConvShape.matmul(8, 8, 8), Precision.FP16), load_config("nv_full"))
    with pytest.raises(NvdlaError, match="nv_small_rtl_tb has no SDP EW sub-unit .* the LUT are unavailable"):
        layer_programs(ConvLayer("x", ConvShape.matmul(8, 8, 8), P, SdpSpec(lut=True)), HW)
    pool = PoolSpec(PoolMode.MAX, 2, 2, 2, 2)
    with pytest.raises(TraceError, match="fused-pooling"):
        layer_programs(ConvLayer("x", ConvShape.square(8, 8, 8, 8), P, pool=pool), HW)


def test_requantization_keeps_the_scale_in_16_bits():
    for std in (1.0, 50.0, 1e4, 1e7):
        scale, shift = requant(std)
        assert 1 <= scale <= 32767 and 0 <= shift <= 31
        assert abs(scale / 2**shift * std - 32) < 1 or std < 32
    assert program_name("layer0.attn.q") == "layer0_attn_q"


@pytest.mark.parametrize("bias", [OperandMode.PER_KERNEL, OperandMode.PER_ELEMENT])
def test_int16_programs_on_a_build_with_int16(tmp_path, bias):
    """nv_full has INT16 (no RTL of it runs here): the program decodes to the layer and meets its CRC."""
    nv_full = load_config("nv_full")
    layer = ConvLayer("t16", ConvShape.matmul(40, 96, 48), Precision.INT16, SdpSpec(bias=bias, relu=True))
    (lp,) = layer_programs(layer, nv_full)
    d = lp.program.write(tmp_path)
    got = hw_layer(decode_program(parse_program(d)).operations[0], "t16")
    assert got.precision is Precision.INT16 and got.shape == layer.shape
    run = run_program(d, nv_full)
    assert [c["match"] for c in run.checks] == [True] and run.cycles == lp.model_cycles
