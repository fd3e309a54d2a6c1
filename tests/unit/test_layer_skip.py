"""The steady state of runs of alike hardware layers (engine.layer_skip): skipping whole periods of bands
or instances must give exactly what running every hardware layer gives (the reference: the same runner
with SteadyState(layers=False)), and it must actually skip where layers repeat."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nvdla_sim.engine.conv as conv
from nvdla_sim import ConvLayer, ConvShape, Precision, load_config
from nvdla_sim.engine.conv import instances_cycles, simulate_chain, simulate_conv
from nvdla_sim.engine.steady import SteadyState
from nvdla_sim.engine.tiling import LoopOrder, TilePlan, footprint
from nvdla_sim.layers import OperandMode, SdpSpec

LAYER_BY_LAYER = SteadyState(layers=False)  # the reference: every hardware layer run
# the skip looked for in chains of any number of items (min_chain_items keeps it off short ones for speed),
# so that the small cases hypothesis draws exercise it
SHORT_CHAINS = SteadyState(min_chain_items=0)


def _stats(st) -> tuple:
    return (st.cycles, st.traffic, st.units, st.bound, st.lower_bound_cycles, st.detail, st.plan)


SPECS = {
    "none": SdpSpec(),
    "bias": SdpSpec(bias=OperandMode.PER_KERNEL),
    "residual": SdpSpec(bias=OperandMode.PER_KERNEL, eltwise=OperandMode.PER_ELEMENT),
    "pairs": SdpSpec(bias=OperandMode.PER_KERNEL, bias_pairs=True, scale=OperandMode.PER_ELEMENT),
}


@settings(max_examples=40, deadline=None)
@given(
    hw=st.sampled_from(["nv_small", "nv_full", "nv_large", "nv_small_256_full_rtl_tb"]),
    tokens=st.integers(8, 120),
    k=st.sampled_from([16, 64, 200, 768]),
    n=st.sampled_from([8, 100, 512, 1200]),
    sdp=st.sampled_from(sorted(SPECS)),
    pick=st.integers(0, 10_000),
)
def test_split_layers_equal_layer_by_layer(hw, tokens, k, n, sdp, pick):
    """Any plan of the search space (bands of every height, both orders, every bank split) on every build,
    with and without SDP operand streams: the same stats with and without skipping alike bands."""
    from nvdla_mapper.search.tiling_search import candidate_plans

    cfg = load_config(hw)
    spec = SPECS[sdp]
    if spec.uses_y and cfg.sdp.ew_throughput == 0:
        spec = SPECS["pairs"]
    layer = ConvLayer("mm", ConvShape.matmul(16 * tokens, k, n, row=16), Precision.INT8, spec)
    plans = candidate_plans(layer, cfg)
    plan = plans[pick % len(plans)]
    a = simulate_conv(layer, cfg, plan, record_events=False, steady=SHORT_CHAINS)
    b = simulate_conv(layer, cfg, plan, record_events=False, steady=LAYER_BY_LAYER)
    assert _stats(a) == _stats(b)


@settings(max_examples=20, deadline=None)
@given(
    hw=st.sampled_from(["nv_small", "nv_full", "nv_large"]),
    tokens=st.integers(2, 40),
    count=st.integers(2, 12),
    rows=st.integers(1, 4),
    ws=st.booleans(),
)
def test_chains_of_instances_equal_layer_by_layer(hw, tokens, count, rows, ws):
    """A chain of independent instances (heads), each split into bands: the instance boundaries break
    the runs of alike layers, and every layer end and byte is the same as running every layer."""
    cfg = load_config(hw)
    layer = ConvLayer("qk", ConvShape.matmul(16 * tokens, 64, 256, row=16), Precision.INT8)
    kpg = cfg.kernels_per_atomic(Precision.INT8)
    order = LoopOrder.WEIGHT_STATIONARY if ws else LoopOrder.DATA_STATIONARY
    plan = TilePlan(2, cfg.cbuf.bank_count - 2, min(rows, layer.shape.out_h), 2 * kpg if ws else 256, order)
    a = (
        simulate_chain([(layer, plan)] * count, cfg, steady=SHORT_CHAINS),
        instances_cycles(layer, plan, cfg, count + 20, steady=SHORT_CHAINS),
    )
    b = (
        simulate_chain([(layer, plan)] * count, cfg, steady=LAYER_BY_LAYER),
        instances_cycles(layer, plan, cfg, count + 20, steady=LAYER_BY_LAYER),
    )
    assert a == b


@pytest.mark.parametrize(
    ("hw", "order", "rows", "kernels"),
    [
        ("nv_full", LoopOrder.DATA_STATIONARY, 5, 8192),  # BERT-base QK^T at 8,192 tokens: one band a layer
        ("nv_full", LoopOrder.WEIGHT_STATIONARY, 5, 2048),  # a weight tile kept across the bands (WEIGHT_REUSE)
        ("nv_small", LoopOrder.DATA_STATIONARY, 2, 8192),  # CSC waits for the whole band (_prefetch_weights)
    ],
)
def test_long_layers_skip_and_agree(hw, order, rows, kernels, monkeypatch):
    """QK^T of a head at 8,192 tokens (8,192 x 64 against 8,192 keys) in bands of a few rows of 64
    tokens: 26 or 64 hardware layers a weight tile. Most of them are skipped (run_items runs a few), and
    every figure is the one running all of them gives."""
    cfg = load_config(hw)
    layer = ConvLayer("qk", ConvShape(64, 128, 64, 8192, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1), Precision.INT8)
    plan = TilePlan(2, cfg.cbuf.bank_count - 2, rows, kernels, order)
    fp = footprint(layer, plan, cfg)
    layers = fp.n_data_tiles * (fp.n_weight_tiles if order is LoopOrder.WEIGHT_STATIONARY else 1)
    ran = []
    real = conv.run_items

    def counting(items, **kw):
        ran.append(len(items))
        return real(items, **kw)

    monkeypatch.setattr(conv, "run_items", counting)
    a = simulate_conv(layer, cfg, plan, record_events=False)
    assert a.detail.hardware_layers == layers and len(ran) < layers // 3
    ran.clear()
    b = simulate_conv(layer, cfg, plan, record_events=False, steady=LAYER_BY_LAYER)
    assert len(ran) == layers
    assert _stats(a) == _stats(b)


def test_instances_whose_ring_holds_several_skip_and_agree(monkeypatch):
    """A decode step's QK^T against 2,100 keys on nv_full (8 query rows, 66 kernel groups, all prefetched
    into a 15-bank weight ring that holds 240): each instance leaves its freed slots in the ring, so the
    rings the next instances start with grow for four instances before they repeat. The oldest free
    slots are no part of the state (a fetch that waits for one waits for none): eight instances skip
    from the third on, with every layer end as running each."""
    cfg = load_config("nv_full")
    layer = ConvLayer("qk", ConvShape.matmul(8, 64, 2100), Precision.INT8, SdpSpec(scale=OperandMode.REG))
    plan = TilePlan(1, 15, 1, 2100, LoopOrder.DATA_STATIONARY)
    ran = []
    real = conv.run_items
    monkeypatch.setattr(conv, "run_items", lambda items, **kw: ran.append(1) or real(items, **kw))
    a = simulate_chain([(layer, plan)] * 8, cfg)
    assert len(ran) <= 4
    ran.clear()
    b = simulate_chain([(layer, plan)] * 8, cfg, steady=LAYER_BY_LAYER)
    assert len(ran) == 8
    assert a == b


def test_a_timeline_runs_every_layer(monkeypatch):
    """With events recorded (a map's trace) every hardware layer runs, so every layer has its events."""
    cfg = load_config("nv_full")
    layer = ConvLayer("qk", ConvShape(64, 64, 64, 2048, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1), Precision.INT8)
    plan = TilePlan(2, 14, 4, 2048, LoopOrder.DATA_STATIONARY)
    ran = []
    real = conv.run_items
    monkeypatch.setattr(conv, "run_items", lambda items, **kw: ran.append(1) or real(items, **kw))
    st_events = simulate_conv(layer, cfg, plan, record_events=True)
    assert len(ran) == 16 and st_events.cycles == simulate_conv(layer, cfg, plan, record_events=False).cycles


def _built(layers_plans, hw, *, named: bool):
    chain = conv._Chain(named=named)
    for layer, plan in layers_plans:
        chain.add(layer, plan, hw)
    items = [dataclasses.replace(it, name="", fetches=tuple(dataclasses.replace(f, label="") for f in it.fetches))
             for it in chain.items_as_run()]  # fmt: skip
    return (items, chain.item_layer, chain.item_extra, chain.item_tail_gap, chain.info, chain.events, chain.layers,
            chain.last_data, chain.last_weights)  # fmt: skip


def _run(layers_plans, hw, *, named: bool) -> tuple:
    """The chain run layer by layer: built with repeats (their events moved as run_items reads them) or
    every item built explicitly (named: no repeats)."""
    chain = conv._Chain(named=named)
    for layer, plan in layers_plans:
        chain.add(layer, plan, hw)
    res, busy, ends = chain.run(hw, False, steady=LAYER_BY_LAYER)
    return dataclasses.replace(res, events=[], ports={}), busy, ends


@settings(max_examples=40, deadline=None)
@given(
    hw=st.sampled_from(["nv_small", "nv_full", "nv_large"]),
    tokens=st.integers(2, 60),
    k=st.sampled_from([16, 64, 200]),
    n=st.sampled_from([8, 100, 512]),
    sdp=st.sampled_from(sorted(SPECS)),
    images=st.integers(1, 3),
    pick=st.integers(0, 10_000),
)
def test_repeated_layers_build_the_items_step_by_step_gives(hw, tokens, k, n, sdp, images, pick):
    """_Chain.add builds a hardware layer alike the previous one (a band of a split layer) from that
    layer's items with its own fetches renumbered; building every item step by step (as it does with
    names, for a timeline) gives the same items, events and layer info. Run, the repeats' events moved
    as run_items reads them (renumber=; or renumbered first where the fast-forward may look at them)
    give every time, counter, ring slot and layer end of the chain built item by item."""
    from nvdla_mapper.search.tiling_search import candidate_plans

    cfg = load_config(hw)
    spec = SPECS[sdp]
    if spec.uses_y and cfg.sdp.ew_throughput == 0:
        spec = SPECS["pairs"]
    layer = ConvLayer("mm", ConvShape.matmul(16 * tokens, k, n, row=16), Precision.INT8, spec, images=images)
    plans = candidate_plans(layer, cfg)
    plan = plans[pick % len(plans)]
    steps = [(layer, plan)] * 2  # two instances: the second's events follow the first's
    assert _built(steps, cfg, named=False) == _built(steps, cfg, named=True)
    assert _run(steps, cfg, named=False) == _run(steps, cfg, named=True)


def test_decode_attention_instances_run_as_built_explicitly():
    """A decode step's QK^T (8 query rows, 2,100 keys on nv_full: every kernel group prefetched by the
    first item, no run of alike items, so run_items moves the repeats' events as it reads them): four
    instances equal the same chain built item by item."""
    cfg = load_config("nv_full")
    layer = ConvLayer("qk", ConvShape.matmul(8, 64, 2100), Precision.INT8, SdpSpec(scale=OperandMode.REG))
    steps = [(layer, TilePlan(1, 15, 1, 2100, LoopOrder.DATA_STATIONARY))] * 4
    assert _run(steps, cfg, named=False) == _run(steps, cfg, named=True)


def test_reused_operands_build_alike():
    """A chain whose second layer reuses the first's input (DATA_REUSE, one band) and whose layers are
    split into kernel tiles: the repeats keep pointing at the reused fetch."""
    cfg = load_config("nv_full")
    first = ConvLayer("a", ConvShape.matmul(64, 64, 512, row=16), Precision.INT8)
    second = dataclasses.replace(first, name="b", data_resident=True)
    plan = TilePlan(1, 15, 4, 64, LoopOrder.WEIGHT_STATIONARY)
    steps = [(first, plan), (second, plan)]
    assert _built(steps, cfg, named=False) == _built(steps, cfg, named=True)
    a = simulate_chain(steps, cfg)
    assert simulate_chain(steps, cfg, steady=LAYER_BY_LAYER) == a


@pytest.mark.parametrize("hw", ["nv_small", "nv_full"])
def test_data_stationary_kernel_tiles_build_alike(hw):
    """Data-stationary order with kernel tiles (outside the search's space, inside the brute force's): a
    band's tiles are one hardware layer, built item by item; the figures match the layer-by-layer run."""
    cfg = load_config(hw)
    layer = ConvLayer("mm", ConvShape.matmul(128, 64, 256, row=16), Precision.INT8, SPECS["bias"])
    plan = TilePlan(2, cfg.cbuf.bank_count - 2, 1, 64, LoopOrder.DATA_STATIONARY)
    assert _built([(layer, plan)], cfg, named=False) == _built([(layer, plan)], cfg, named=True)
    a = simulate_conv(layer, cfg, plan, record_events=False)
    assert _stats(simulate_conv(layer, cfg, plan, record_events=False, steady=LAYER_BY_LAYER)) == _stats(a)


@settings(max_examples=40, deadline=None)
@given(
    hw=st.sampled_from(["nv_small", "nv_full", "nv_large"]),
    tokens=st.integers(1, 60),
    k=st.sampled_from([16, 64, 200]),
    n=st.sampled_from([8, 100, 512, 1000]),
    images=st.integers(1, 3),
    pick=st.integers(0, 10_000),
)
def test_activity_counted_per_item_shape_equals_item_by_item(hw, tokens, k, n, images, pick):
    """conv_activity (what energy prices) counts per (band height, kernel group size) times how many items
    have them; counting every item of tile_steps gives the same."""
    from nvdla_mapper.search.tiling_search import candidate_plans
    from nvdla_sim.engine.bounds import channel_ops_per_stripe
    from nvdla_sim.engine.conv import conv_activity, group_blocks
    from nvdla_sim.engine.tiling import tile_steps

    cfg = load_config(hw)
    layer = ConvLayer("mm", ConvShape.matmul(16 * tokens, k, n, row=16), Precision.INT8, images=images)
    plans = candidate_plans(layer, cfg)
    plan = plans[pick % len(plans)]
    atom = cfg.mac.atomic_c
    ops = loads = read = sums = outputs = 0
    for step in tile_steps(layer, plan, cfg):
        (r0, r1), (g0, g1) = step.rows, step.group
        runs = group_blocks(layer, cfg, r1 - r0, g1 - g0)
        item_ops = sum(r.count * r.useful_ops for r in runs)
        item_loads = sum(r.count for r in runs) * channel_ops_per_stripe(layer, cfg)
        ops, loads, sums = ops + item_ops, loads + item_loads, sums + item_ops * (g1 - g0)
        read += item_ops * atom + item_loads * (g1 - g0) * atom
        outputs += (r1 - r0) * layer.shape.out_w * (g1 - g0)
    got = conv_activity(layer, plan, cfg)
    assert (got.atomic_ops, got.weight_loads, got.cbuf_read_bytes, got.partial_sums, got.outputs) == (
        ops, loads, read, sums, outputs,
    )  # fmt: skip


def test_copying_items_by_their_fields_is_replace():
    """conv._copy stands for dataclasses.replace on Fetch and Item (it copies their fields, bypassing the
    frozen __init__): equal objects with equal hashes, which holds while neither has __post_init__ or
    slots."""
    from nvdla_sim.engine.tile_pipeline import BlockRun, Buffer, Channel, Fetch, Item
    from nvdla_sim.layers import Memory

    for cls in (Fetch, Item):
        assert not hasattr(cls, "__post_init__") and not hasattr(cls, "__slots__")
    f = Fetch(3, Buffer.CBUF_WEIGHT, Channel.CDMA_WT, 4096, Memory.DRAM, "w", False, 0.0)
    it = Item("a", (f,), (3, 1), (BlockRun(2, 16, 16, 8, 4),), 64, Memory.DRAM, 32, Memory.DRAM, 4.0)
    for obj, changes in ((f, {"event": 9}), (it, {"uses": (9,), "fetches": ()})):
        new = conv._copy(obj, **changes)
        assert new == dataclasses.replace(obj, **changes) and hash(new) == hash(dataclasses.replace(obj, **changes))
        assert obj != new


@pytest.mark.parametrize("hw", ["nv_small", "nv_full"])
def test_items_built_field_by_field_equal_the_constructors(hw):
    """_Chain.add builds Fetch and Item with conv._new (every field set directly): each equals what the
    constructors make of its fields, with every field set (none left to the class's default)."""
    from nvdla_sim.engine.tile_pipeline import Fetch, Item

    cfg = load_config(hw)
    layer = ConvLayer("mm", ConvShape.matmul(64, 256, 300, row=16), Precision.INT8, SPECS["residual"])
    if cfg.sdp.ew_throughput == 0:
        layer = dataclasses.replace(layer, sdp=SPECS["pairs"])
    for named in (True, False):
        chain = conv._Chain(named=named)
        chain.add(layer, TilePlan(2, cfg.cbuf.bank_count - 2, 1, 128, LoopOrder.DATA_STATIONARY), cfg)
        for it in chain.items:
            for obj, cls in ((it, Item), *((f, Fetch) for f in it.fetches)):
                made = cls(**{f.name: getattr(obj, f.name) for f in dataclasses.fields(cls)})
                assert made == obj and hash(made) == hash(obj) and vars(made) == vars(obj)
