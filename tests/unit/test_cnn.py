"""CNN workloads: zoo on every config, paper MAC counts, fusion of BN/ReLU/pool/residual, ONNX CNN import."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from nvdla_mapper.frontends.cnn import CNN_PRESETS
from nvdla_mapper.frontends.onnx_import import graph_from_onnx
from nvdla_mapper.passes import map_model
from nvdla_mapper.workload import OpKind, ops_in_order
from nvdla_sim import ConvLayer, ConvShape, Precision, load_config, run_conv, simulate
from nvdla_sim.layers import PoolMode, PoolSpec
from nvdla_sim.units.pdp import pool as pdp_pool
from tests.unit.test_conv_functional import reference_conv

# Multiply-accumulates per image of the paper architectures (conv + fc).
PAPER_GMACS = {"alexnet": 0.72, "resnet18": 1.81, "resnet50": 3.86, "googlenet": 1.58}


# resnet50 on nv_small is mapped by test_resnet50_nv_small_is_compute_bound
CASES = [(m, c) for m in CNN_PRESETS for c in ("nv_small", "nv_large", "nv_full") if (m, c) != ("resnet50", "nv_small")]


@pytest.mark.parametrize(("model", "cfg"), CASES)
def test_cnn_zoo_maps(model, cfg):
    hw = load_config(cfg)
    res = map_model(CNN_PRESETS[model](1), hw, precision=Precision.INT8, batch=1, seq=0)
    assert res.total_cycles > 0 and 0 < res.mac_utilization <= 1
    assert res.to_dict()["host_fallback"]["tasks"] == (0 if hw.sdp.lut or model != "lenet5" else 4)  # 4 tanh


def test_resnet50_nv_small_is_compute_bound():
    res = map_model(CNN_PRESETS["resnet50"](1), load_config("nv_small"), precision=Precision.INT8, batch=1, seq=0)
    assert res.mac_utilization > 0.8  # 64 MACs: almost every layer keeps the array busy


@pytest.mark.parametrize(("model", "gmacs"), list(PAPER_GMACS.items()))
def test_paper_mac_counts(model, gmacs):
    total = sum(o.macs for o in ops_in_order(CNN_PRESETS[model](1)))
    assert total / 1e9 == pytest.approx(gmacs, rel=0.02)


def test_fusion_folds_bn_relu_residual_and_pool():
    hw = load_config("nv_full")
    res = map_model(CNN_PRESETS["resnet18"](1), hw, precision=Precision.INT8, batch=1, seq=0)
    names = [r.task.name for r in res.results]
    assert not any(n.endswith((".act", ".relu", ".add")) for n in names)  # all folded into conv SDP passes
    conv1 = next(r for r in res.results if r.task.name == "conv1")
    assert conv1.task.layer.pool is not None and "pool1" not in names  # max pool on the fly after SDP
    block_b = next(r for r in res.results if r.task.name == "conv2_1.b")
    assert block_b.task.layer.sdp.eltwise.value == "per_element" and block_b.task.layer.sdp.relu


def test_conv_with_fused_pool_matches_reference():
    from nvdla_sim import default_plan

    hw = load_config("nv_small")
    pool = PoolSpec(PoolMode.MAX, 2, 2, 2, 2)
    shape = ConvShape.square(8, 8, 5, 6, kernel=3, pad=1)
    layer = ConvLayer("cp", shape, Precision.INT8, pool=pool)
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, size=(8, 8, 5)).astype(np.int8)
    wt = rng.integers(-128, 128, size=(6, 3, 3, 5)).astype(np.int8)
    out, _ = run_conv(layer, x, wt, hw, default_plan(layer, hw))
    conv = reference_conv(x, wt, shape)
    np.testing.assert_array_equal(out, conv.reshape(4, 2, 4, 2, 6).max(axis=(1, 3)))
    np.testing.assert_array_equal(pdp_pool(conv, pool, Precision.INT8, bits=32), out)


def _onnx_cnn(path):
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32), "w2"),
        numpy_helper.from_array(rng.standard_normal((16 * 8 * 8, 10)).astype(np.float32), "wf"),
    ]
    for n in ("s", "b", "m", "v"):
        inits.append(numpy_helper.from_array(np.ones(16, np.float32), f"bn_{n}"))
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["b1"], name="bn1"),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["a"], name="residual"),
        helper.make_node("Relu", ["a"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "wf"], ["y"], name="fc"),
    ]
    g = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
        inits,
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_onnx_cnn_import(tmp_path):
    g = graph_from_onnx(_onnx_cnn(tmp_path / "cnn.onnx"), batch=2)
    ops = {o.name: o for o in ops_in_order(g)}
    assert ops["conv1"].kind is OpKind.CONV and ops["conv1"].attrs.bn and "bn1" not in ops
    assert ops["conv1"].macs == 2 * 16 * 16 * 16 * 27
    assert ops["pool"].kind is OpKind.POOL and ops["pool"].attrs.input_whc == (16, 16, 16)
    res = map_model(g, load_config("nv_full"), precision=Precision.INT8, batch=2, seq=0)
    names = [r.task.name for r in res.results]
    assert "conv2" in names and "residual" not in names and "pool" not in names  # add+relu+pool fused


def test_onnx_pool_too_large_is_named(tmp_path):
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], name="bigpool", kernel_shape=[9, 9])]
    g = helper.make_graph(
        nodes,
        "p",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])],
    )
    path = tmp_path / "p.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    from nvdla_sim import NvdlaError

    with pytest.raises(NvdlaError, match="node 'bigpool' \\(MaxPool\\): pool kernel_w must be in 1..8"):
        graph_from_onnx(path)


def test_image_mode_channel_extension_matches_doc_example():
    """unit_description.rst: a 4x4x4 kernel pre-extended to C'=16 runs at 25% of atomic-C; 4-line
    post-extension reaches 100% (one atomic op per output point and kernel group)."""
    from nvdla_sim.engine.bounds import channel_ops_per_stripe
    from nvdla_sim.units.csc import image_extension

    assert image_extension(4, 4, 1) == (64, 4)
    hw = load_config("nv_full")
    doc = ConvLayer("img", ConvShape.square(64, 64, 4, 32, kernel=4), Precision.INT8, image_input=True)
    assert channel_ops_per_stripe(doc, hw) == 1
    direct = ConvLayer("dc", doc.shape, Precision.INT8)
    assert channel_ops_per_stripe(direct, hw) == 16
    a, b = simulate(doc, hw), simulate(direct, hw)
    assert a.lower_bound_cycles == 61 * 61 * 32 // 16  # now bound by the SDP drain, not the MACs
    assert a.cycles < 1.3 * a.lower_bound_cycles and b.cycles > 5 * a.cycles
    assert a.traffic.dram_read < b.traffic.dram_read  # RGBA pixels, not 32-byte feature atoms


def test_resnet_conv1_uses_image_mode_and_stripes_stay_in_rows():
    from nvdla_sim.engine.bounds import channel_ops_per_stripe
    from nvdla_sim.units.csc import image_stripes

    g = CNN_PRESETS["resnet50"](1)
    conv1 = next(o for o in ops_in_order(g) if o.name == "conv1")
    assert conv1.attrs.image_input
    others = [o for o in ops_in_order(g) if o.kind is OpKind.CONV and o.name != "conv1"]
    assert not any(o.attrs.image_input for o in others)
    layer = ConvLayer("conv1", conv1.attrs.conv, Precision.INT8, image_input=True)
    assert channel_ops_per_stripe(layer, load_config("nv_full")) == 7  # C' = 3 x 7 = 21, no post-extension
    assert image_stripes(112, 2, load_config("nv_full").image_stripe) == (64, 48, 64, 48)
    with pytest.raises(Exception, match="up to 4 channels"):
        ConvLayer("bad", ConvShape.square(8, 8, 16, 8, kernel=3), Precision.INT8, image_input=True)


def test_the_mapper_times_both_input_modes_of_the_first_layer_and_keeps_the_faster():
    """ResNet-50's conv1 (224 x 224 x 3, 7x7 stride 2 -> 64) on nv_full: in feature format (direct
    convolution) its 3 channels fill one 64-channel atom, so 2 kernel groups x 112 x 112 outputs x 49
    kernel positions = 1,229,312 atomic ops at one a cycle, hand arithmetic; as a pixel image, channel
    extension packs 7 kernel columns into an atom (7 ops per output point): the mapper keeps that and
    says what it compared."""
    res = map_model(CNN_PRESETS["resnet50"](1), load_config("nv_full"), precision=Precision.INT8)
    conv1 = next(r for r in res.results if r.task.name == "conv1")
    assert conv1.task.layer.image_input
    note = conv1.task.note
    assert note.startswith("chosen: image input (pixel format)") and "over feature-format input" in note
    direct = int(note.rsplit(": ", 1)[1].replace(",", ""))
    assert direct >= 2 * 112 * 112 * 49 > conv1.cycles
