"""The accuracy study runs the hardware layers the mapper's pipeline lowers (issue 56, item 5): each matmul
site of the reference forward finds its op's layer through passes.lower_op by its role, and the SDP numbers
it programs are the streams that layer's timing counts (engine.conv.run_conv refuses others).

Expected values come from the map of the same model (map_model's own tasks, not the study's code) and from
hand arithmetic on the streams' bytes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nvdla_mapper.frontends.hf_config import from_hf_config
from nvdla_mapper.frontends.presets import PRESETS, build_graph
from nvdla_mapper.lowering.rules import LoweringContext
from nvdla_mapper.options import Granularity, MapOptions
from nvdla_mapper.passes import lower_ops, map_model
from nvdla_mapper.workload import MatmulRole, OpKind, ops_in_order
from nvdla_sim import ConvLayer, ConvShape, Precision, default_plan, load_config, run_conv
from nvdla_sim.errors import UnsupportedError
from nvdla_sim.layers import OperandMode, SdpSpec
from nvdla_sim.units.sdp import SdpParams, Stage

NV_FULL = load_config("nv_full")


def _trained_dir():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("nvdla_validation")
    return Path(spec.submodule_search_locations[0]) / "data" / "trained"


def test_preset_ops_carry_their_roles():
    """bert-base's block: q, k, v, the output projection and the FFN's two layers by their attributes; QK^T and
    PV by their kinds; the classifier's head too."""
    g = build_graph(PRESETS["bert-base"], seq=16)
    roles = {op.name: op.matmul_role for op in ops_in_order(g) if op.matmul_role is not None}
    block0 = {n.removeprefix("layer0."): r for n, r in roles.items() if n.startswith("layer0.")}
    assert block0 == {
        "attn.q": MatmulRole.QUERY, "attn.k": MatmulRole.KEY, "attn.v": MatmulRole.VALUE,
        "attn.qk": MatmulRole.SCORES, "attn.pv": MatmulRole.CONTEXT, "attn.o": MatmulRole.OUTPUT,
        "ffn1": MatmulRole.FFN_UP, "ffn2": MatmulRole.FFN_DOWN,
    }  # fmt: skip
    assert roles["classifier"] is MatmulRole.CLASSIFIER


def test_the_studys_layers_are_the_maps():
    """The trained ViT on nv_full, one image: every matmul the INT8 study records is the layer the pipeline's
    lowering (passes.lower_ops over the preset front end's graph of the model: its fusion, its ops' own
    attributes) makes for that op in block 0 (shape, precision, SDP streams, weight treatment); and by hand:
    V as V^T = W_v X^T with
    no bias of its own (PV's SDP adds it, a per-kernel stream), the FFN's first layer with GELU in its LUT,
    the output projection and the FFN's second layer with the residual add in Y (E-RDMA, per element)."""
    from nvdla_mapper.numerics.quant import Calibration
    from nvdla_mapper.studies.accuracy import QuantSettings, vit_accuracy

    d = _trained_dir()
    spec = from_hf_config(d / "vit_digits.config.json")
    w = {k: v.astype(np.float32) for k, v in np.load(d / "vit_digits.npz").items()}
    test = np.load(d / "digits_test.npz")
    runs = []
    settings = QuantSettings(Granularity.PER_CHANNEL, Calibration("max"))
    vit_accuracy(w, test["images"][:4], test["images"][:1], test["labels"][:1], NV_FULL, settings, heads=4, patch=2,
                 record=runs)  # fmt: skip
    g = build_graph(spec, batch=1)
    ctx = LoweringContext(NV_FULL, MapOptions(requant=Granularity.PER_CHANNEL))
    tasks, _, spans = lower_ops(g, ctx)
    mapped: dict[MatmulRole, list[ConvLayer]] = {}
    for op, (a, b) in zip(ops_in_order(g), spans, strict=True):
        if op.matmul_role is not None and op.block.index in (None, 0):
            own = [t.layer for t in tasks[a:b] if t.piece is not None]
            mapped[op.matmul_role] = own

    def anonymous(layer: ConvLayer) -> ConvLayer:
        return dataclasses.replace(layer, name="")

    seen = set()
    for run in runs:
        role = run.name.role
        if role in (MatmulRole.EMBEDDING, MatmulRole.CLASSIFIER):
            continue  # the map's patch embedding is a direct convolution; its head reads one token per image
        (layer,) = mapped[role]
        assert anonymous(run.layer) == anonymous(layer), run.name
        seen.add(role)
    assert seen == {MatmulRole.QUERY, MatmulRole.KEY, MatmulRole.VALUE, MatmulRole.SCORES, MatmulRole.CONTEXT,
                    MatmulRole.OUTPUT, MatmulRole.FFN_UP, MatmulRole.FFN_DOWN}  # fmt: skip
    v = next(r.layer for r in runs if r.name.role is MatmulRole.VALUE)
    assert (v.shape.in_w * v.shape.in_h, v.shape.in_c, v.shape.out_k) == (64, 64, 17)  # V^T: features x tokens
    assert v.sdp.bias is OperandMode.NONE
    pv = next(r.layer for r in runs if r.name.role is MatmulRole.CONTEXT)
    assert pv.sdp.bias is OperandMode.PER_KERNEL
    up = next(r.layer for r in runs if r.name.role is MatmulRole.FFN_UP)
    assert up.sdp.lut and up.sdp.scale is OperandMode.PER_KERNEL  # per-channel multipliers: N-RDMA
    down = next(r.layer for r in runs if r.name.role is MatmulRole.FFN_DOWN)
    assert down.sdp.eltwise is OperandMode.PER_ELEMENT


def test_numbers_must_be_the_streams_the_layer_times():
    """run_conv refuses SDP numbers whose operand streams the layer's timing view does not count, naming the
    layer and the stream; numbers that read no stream (a register multiplier) fit a layer that counts none."""
    layer = ConvLayer("proj", ConvShape.matmul(16, 64, 32), Precision.INT8)
    x = np.zeros((1, 16, 64), np.int8)
    w = np.zeros((32, 1, 1, 64), np.int8)
    bias = SdpParams(x1=Stage(alu_operand=np.arange(32)))
    with pytest.raises(UnsupportedError, match=r"layer 'proj'.*x1 none -> per_kernel"):
        run_conv(layer, x, w, NV_FULL, default_plan(layer, NV_FULL), sdp_params=bias)
    register = SdpParams(x2=Stage(mul_operand=3, mul_shift=1))
    run_conv(layer, x, w, NV_FULL, default_plan(layer, NV_FULL), sdp_params=register)
    timed = dataclasses.replace(layer, sdp=SdpSpec(bias=OperandMode.PER_KERNEL))
    run_conv(timed, x, w, NV_FULL, default_plan(timed, NV_FULL), sdp_params=bias)


def test_timing_view_of_the_numbers():
    """Each stage's wider operand source; a stage's two per-kernel operands are one stream of pairs; Y's
    per-element operand, its LUT; the output precision where not the layer's."""
    from nvdla_sim.units.lut import LutParams
    from nvdla_sim.units.sdp import EwStage

    k, per_el = np.ones(8), np.ones((4, 8))
    params = SdpParams(
        x1=Stage(alu_operand=k, mul_operand=k),
        x2=Stage(alu_operand=per_el, mul_operand=5),
        y=EwStage(alu_operand=per_el, lut=LutParams.__new__(LutParams)),
        out_precision=Precision.INT16,
    )
    view = params.timing_view(Precision.INT8)
    assert view == SdpSpec(bias=OperandMode.PER_KERNEL, bias_pairs=True, scale=OperandMode.PER_ELEMENT,
                           eltwise=OperandMode.PER_ELEMENT, lut=True, out_precision=Precision.INT16)  # fmt: skip
    assert SdpParams(x2=Stage(mul_operand=7)).timing_view(Precision.INT8).streams() == SdpSpec().streams()


def test_a_per_channel_recipe_times_its_multipliers():
    """map --quantize per-channel: each weighted layer with a bias reads its per-kernel multipliers (N-RDMA, 2
    bytes a kernel). One 16 x 64 x 32 projection on nv_full (one hardware layer, one item): 64 bytes more
    read than per tensor, whose multiplier is a register value."""
    from nvdla_mapper.workload import Graph, Op

    def dram(requant: Granularity) -> int:
        g = Graph("one", batch=1, seq=16)
        g.add(Op("proj", OpKind.MATMUL, 16, 32, k=64, group="matmul"))
        return map_model(g.g, NV_FULL, MapOptions(requant=requant)).figures().dram_bytes

    assert dram(Granularity.PER_CHANNEL) - dram(Granularity.PER_TENSOR) == 32 * 2


def test_pv_adds_a_bias_only_where_v_has_one():
    """On a build with BDMA V is computed transposed and PV's SDP adds its bias (a per-kernel stream), but a
    model whose projections have no bias (T5) reads none; with SDP's LUT softmax V^T's own SDP adds it per
    element (B-RDMA: hidden x tokens 16-bit operands, X1's operand width) and PV reads none."""
    nv_full = NV_FULL

    def pv_and_v(name: str, **options):
        g = build_graph(PRESETS[name], seq=32)
        ctx = LoweringContext(nv_full, MapOptions(**options))
        tasks, _, spans = lower_ops(g, ctx)
        out = {}
        for op, (a, b) in zip(ops_in_order(g), spans, strict=True):
            if op.block.index == 0 and op.matmul_role in (MatmulRole.VALUE, MatmulRole.CONTEXT):
                out[op.matmul_role] = [t.layer.sdp for t in tasks[a:b] if t.piece is not None]
        return out

    bert = pv_and_v("bert-base")
    assert [s.bias for s in bert[MatmulRole.CONTEXT]] == [OperandMode.PER_KERNEL]
    assert all(s.bias is OperandMode.NONE for s in bert[MatmulRole.VALUE])
    t5 = pv_and_v("t5-base")
    assert [s.bias for s in t5[MatmulRole.CONTEXT]] == [OperandMode.NONE]
    lut = pv_and_v("bert-base", softmax="nvdla")
    assert [s.bias for s in lut[MatmulRole.CONTEXT]] == [OperandMode.NONE]
    assert all(
        s.bias is OperandMode.PER_ELEMENT and s.operand_precision is Precision.INT16 for s in lut[MatmulRole.VALUE]
    )


def test_a_product_split_into_pieces_runs_each_with_its_numbers():
    """V^T of 8,200 tokens on nv_full is two hardware layers (8,192 kernels, the register field's limit, and
    8): the study runs each on its tokens with its window of the SDP numbers, and every token's V (the
    second piece's too) is the float one within what INT8 rounding allows by hand: half an output step
    (dynamic: V's range over 127) plus, over the 8 products, half a step of each operand times the other's
    largest value."""
    from nvdla_mapper.lowering.rules import Fused
    from nvdla_mapper.numerics.quant import Calibration
    from nvdla_mapper.numerics.reference import Site
    from nvdla_mapper.studies.accuracy import QuantSettings, Scales, _datapath_hooks, _study_op, mapper_pieces

    rng = np.random.default_rng(3)
    a, w = rng.normal(0, 1, (8200, 8)), rng.normal(0, 0.3, (8, 8))
    site = Site("v", MatmulRole.VALUE)
    pieces = mapper_pieces(_study_op(site, 8200, 8, 8, bias=True, causal=False), Fused(), LoweringContext(NV_FULL))
    assert [(p.rows, p.columns) for p in pieces] == [(slice(0, 8), slice(0, 8192)), (slice(0, 8), slice(8192, 8200))]
    settings = QuantSettings(Granularity.PER_TENSOR, Calibration("max"), dynamic=True)
    hooks = _datapath_hooks(NV_FULL, settings, Scales({}, {}, {}), {})
    assert hooks.value_bias_in_context  # the host normalises: PV adds V's bias, V^T has none
    got = hooks.matmul(site, a, w, None)
    want = a @ w.T
    amax_a, amax_w = np.abs(a).max(), np.abs(w).max()
    bound = np.abs(want).max() / 127 / 2 + 8 * (amax_w * amax_a / 127 / 2 + amax_a * amax_w / 127 / 2)
    assert got.shape == (8200, 8)
    assert np.abs(got[:8192] - want[:8192]).max() <= bound and np.abs(got[8192:] - want[8192:]).max() <= bound


def test_a_misspelt_granularity_is_one_line():
    """MapOptions takes the recipe's granularity as the enum or its value; anything else names the valid ones."""
    from nvdla_sim.errors import NvdlaError

    assert MapOptions(requant="per-channel").requant is Granularity.PER_CHANNEL
    with pytest.raises(NvdlaError, match=r"^requant \(--quantize\) 'per-chanel': valid are per-tensor, per-channel$"):
        MapOptions(requant="per-chanel")


def test_pruned_and_fp16_runs_move_v_bias_as_the_int8_run_does():
    """On nv_full (BDMA: V computed transposed, its bias in PV) a pruned INT8 run and an FP16 run take the
    mapper's V^T layers too: the trained ViT's pruned run on one image and the FP16 block's errors run
    through run_conv's check (which refuses a V^T given its bias) and give finite figures."""
    from nvdla_mapper.numerics.quant import Calibration
    from nvdla_mapper.studies.accuracy import QuantSettings, block_accuracy, vit_accuracy

    d = _trained_dir()
    w = {k: v.astype(np.float32) for k, v in np.load(d / "vit_digits.npz").items()}
    test = np.load(d / "digits_test.npz")
    pruned = QuantSettings(Granularity.PER_CHANNEL, Calibration("max"), prune="2:4")
    r = vit_accuracy(w, test["images"][:4], test["images"][:1], test["labels"][:1], NV_FULL, pruned, heads=4,
                     patch=2)  # fmt: skip
    assert r.images == 1
    errors = block_accuracy(PRESETS["bert-base"], NV_FULL, QuantSettings(precision=Precision.FP16), seq=16)
    by_name = {e.name: e for e in errors}
    assert by_name["v"].cosine > 0.999 and by_name["pv.h0"].cosine > 0.999
