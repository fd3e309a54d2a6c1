"""Instances and batches of a convolution as one chain of hardware layers (engine.conv.instances_cycles,
ConvLayer.images): the expected values are hand arithmetic on the layer's work and bytes, and the full
chain run one item at a time for the skipped steady state."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_mapper.frontends.cnn import resnet18
from nvdla_mapper.passes import map_model
from nvdla_mapper.search.tiling_search import exhaustive_plan, search_plan
from nvdla_sim import ConvLayer, ConvShape, Precision, load_config
from nvdla_sim.engine.conv import instances_cycles, run_conv, simulate_chain, simulate_conv
from nvdla_sim.engine.steady import ONE_BY_ONE
from nvdla_sim.engine.tiling import LoopOrder, TilePlan
from nvdla_sim.errors import ShapeError
from nvdla_sim.layers import OperandMode, SdpSpec


def _conv3x3(w: int, c: int, k: int) -> ConvShape:
    return ConvShape(in_w=w, in_h=w, in_c=c, out_k=k, kernel_w=3, kernel_h=3, pad_left=1, pad_right=1, pad_top=1,
                     pad_bottom=1)  # fmt: skip


def test_instances_never_beat_the_mac_array():
    """ResNet's 7x7 3x3 512 -> 512 layer on nv_full (64 x 32 INT8 MACs): 16 kernel groups x 49 output
    points x (512 / 64 channel blocks x 9 kernel positions) = 56,448 atomic ops an instance, one a cycle
    at best; ten instances take at least 564,480 cycles. (The earlier overlap rule said 409,948: each
    instance hid its 2.4 MB weight fetch as if the next one's compute could run beside it.)"""
    hw = load_config("nv_full")
    layer = ConvLayer("c", _conv3x3(7, 512, 512), Precision.INT8)
    plan = search_plan(layer, hw).plan
    ten = instances_cycles(layer, plan, hw, 10)
    assert ten >= 10 * 16 * 49 * 8 * 9
    assert ten <= 10 * simulate_conv(layer, hw, plan, record_events=False).cycles


@settings(max_examples=12, deadline=None)
@given(
    hw_name=st.sampled_from(["nv_full", "nv_small"]),
    m=st.sampled_from([32, 64, 128]),
    k=st.sampled_from([64, 128, 256]),
    n=st.sampled_from([32, 64, 96]),
    bias=st.booleans(),
    count=st.integers(7, 40),
)
def test_the_skipped_instances_equal_the_whole_chain_run_one_by_one(hw_name, m, k, n, bias, count):
    """instances_cycles skips the instances' steady state (the layer skip over a chain of instances);
    running every hardware layer and item of all `count` instances gives the same cycles."""
    hw = load_config(hw_name)
    sdp_spec = SdpSpec(bias=OperandMode.PER_KERNEL) if bias else SdpSpec()
    layer = ConvLayer("mm", ConvShape.matmul(m, k, n, row=32), Precision.INT8, sdp_spec)
    plan = search_plan(layer, hw).plan
    every = simulate_chain([(layer, plan)] * count, hw, steady=ONE_BY_ONE).cycles
    assert instances_cycles(layer, plan, hw, count) == every


@settings(max_examples=30, deadline=None)
@given(
    hw_name=st.sampled_from(["nv_full", "nv_small", "nv_large"]),
    m=st.sampled_from([8, 32, 64, 200]),
    k=st.sampled_from([64, 256, 1000]),
    n=st.sampled_from([32, 100, 2100]),
    sdp=st.sampled_from(["none", "bias", "scale"]),
    count=st.integers(1, 9),
    pick=st.integers(0, 10_000),
)
def test_one_run_of_the_instances_gives_the_layer_and_the_chain(hw_name, m, k, n, sdp, count, pick):
    """simulate_instances takes the single layer's figures from the chain's first instance: every one of
    them equals simulate_conv's, and its cycles for `count` instances equal instances_cycles', under any
    plan of the search space (bands, kernel tiles, bank splits)."""
    from nvdla_mapper.search.tiling_search import candidate_plans
    from nvdla_sim.engine.conv import simulate_instances

    hw = load_config(hw_name)
    spec = {"none": SdpSpec(), "bias": SdpSpec(bias=OperandMode.PER_KERNEL), "scale": SdpSpec(scale=OperandMode.REG)}
    layer = ConvLayer("mm", ConvShape.matmul(m, k, n), Precision.INT8, spec[sdp])
    plans = candidate_plans(layer, hw)
    plan = plans[pick % len(plans)]
    single, span = simulate_instances(layer, hw, plan, count)
    alone = simulate_conv(layer, hw, plan, record_events=False)
    assert single == alone and single.detail == alone.detail
    assert span == instances_cycles(layer, plan, hw, count)


def test_a_batch_keeps_the_kernels_in_cbuf_across_images():
    """Eight 7x7x64 images through one 3x3 64 -> 64 layer on nv_full: the weights (64 kernels x 576 B =
    36,864 B) fit CBUF, so the search keeps them across the images (weight-stationary, WEIGHT_REUSE):
    DRAM reads are the eight inputs (7 x 7 x 64 B = 3,136 each) and the weights once: 61,952 B, against
    8 x (3,136 + 36,864) = 320,000 B for eight independent instances."""
    hw = load_config("nv_full")
    one = ConvLayer("c", _conv3x3(7, 64, 64), Precision.INT8)
    batch = dataclasses.replace(one, images=8)
    found = search_plan(batch, hw)
    assert found.plan.order is LoopOrder.WEIGHT_STATIONARY and found.plan.kernels_per_tile == 64
    assert found.stats.traffic.dram_read == 8 * 3_136 + 36_864
    assert found.stats.macs == 8 * 49 * 64 * 576
    apart = instances_cycles(one, search_plan(one, hw).plan, hw, 8)
    assert found.stats.cycles < apart


def test_the_batch_search_equals_exhaustive_search():
    hw = load_config("nv_small")
    layer = ConvLayer("c", _conv3x3(6, 16, 24), Precision.INT8, SdpSpec(bias=OperandMode.PER_KERNEL), images=3)
    best, cycles = exhaustive_plan(layer, hw)
    found = search_plan(layer, hw, budget=None, patience=None)
    assert found.stats.cycles == cycles


def test_a_batch_computes_each_image_as_alone():
    """Bit-exact: a batch layer's output is each image through the layer on its own."""
    hw = load_config("nv_small")
    rng = np.random.default_rng(3)
    one = ConvLayer("c", _conv3x3(5, 16, 16), Precision.INT8)  # kernel tiles of 8: 1,152-byte weight blobs
    batch = dataclasses.replace(one, images=3)
    x = rng.integers(-128, 128, (3, 5, 5, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (16, 3, 3, 16), dtype=np.int8)
    plan = TilePlan(4, 8, 2, 8, LoopOrder.WEIGHT_STATIONARY)
    out, _ = run_conv(batch, x, w, hw, plan)
    for b in range(3):
        alone, _ = run_conv(one, x[b], w, hw, TilePlan(4, 8, 5, 16))
        assert np.array_equal(out[b], alone)


def test_bad_batches_are_refused():
    with pytest.raises(ShapeError, match="images"):
        ConvLayer("c", _conv3x3(5, 8, 16), Precision.INT8, images=0)
    with pytest.raises(ShapeError, match="CBUF"):
        ConvLayer("c", _conv3x3(5, 8, 16), Precision.INT8, images=2, weights_resident=True)


def test_a_cnn_batch_maps_as_one_layer_per_conv():
    """resnet18 at batch 4: each convolution is one task of four images (its groups are its instances),
    with four times the MACs of batch 1, and never faster per image than batch 1 can be from its MACs."""
    hw = load_config("nv_full")
    one = map_model(resnet18(1), hw, precision=Precision.INT8)
    four = map_model(resnet18(4), hw, precision=Precision.INT8)
    convs = [r for r in four.results if r.task.op.startswith("conv")]
    assert convs and all(r.task.layer.images == 4 and r.task.count == 1 for r in convs)
    assert four.macs == 4 * one.macs
    floor = four.macs / hw.peak_macs_per_cycle(Precision.INT8)
    assert four.total_cycles >= floor
