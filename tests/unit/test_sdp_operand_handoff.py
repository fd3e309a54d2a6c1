"""A later convolution of a chain waits for its SDP operand streams' heads (engine.tile_pipeline.OperandHeads;
timing.sdp_rdma_handoff_cycles / sdp_operand_head_cycles, measured on nv_small's RTL: docs/validation.md 5i).
Expected values by hand from the RTL's request pattern, and from NVIDIA's RTL rows."""

from __future__ import annotations

import json
from pathlib import Path

from nvdla_sim.config import load_config
from nvdla_sim.engine.tile_pipeline import OperandHeads
from nvdla_sim.layers import Memory, OperandMode, SdpSpec
from nvdla_sim.program.decode import from_description
from nvdla_sim.system.memory import MemoryPort
from nvdla_sim.units import sdp

DATA = Path(__file__).resolve().parents[2] / "validation" / "data"


def test_heads_requested_in_turn_then_the_latency_and_sdps_start():
    """Two streams of 4 beats, a request every 2 cycles from cycle 100: the 8th request (index 7) at 114, in
    32 cycles later, SDP's first atom 34 after: 180. With CDMA's weight reads on the port then, a third
    reader takes every third turn: the last head request is turn 10, at 120: 186."""
    heads = OperandHeads(100.0, (4, 4), Memory.DRAM, 2.0, 34)
    idle = MemoryPort(4.0, 32)
    assert heads.ready(idle) == 100 + 7 * 2 + 32 + 34 == 180
    busy = MemoryPort(4.0, 32)
    busy.reserve(100.0, 64)  # a weight fetch booked from 100 to 116
    assert heads.ready(busy) == 100 + 10 * 2 + 32 + 34 == 186


def test_a_stream_shorter_than_the_unpack_is_waited_for_whole():
    """The heads are RDMA_UNPACK_BEATS (4) beats, or the whole stream: 16 kernels' 2-byte biases on nv_small's
    8-byte port are 4 beats; 2 kernels' are one; per-element operands of 16 x 16 INT8 are 4 of 32."""
    hw = load_config("nv_small")
    spec = SdpSpec(bias=OperandMode.PER_KERNEL, scale=OperandMode.PER_ELEMENT)
    assert sdp.operand_heads(spec, hw, pixels=16, channels=16, operand_bytes=1, memory=Memory.DRAM) == (4, 4)
    assert sdp.operand_heads(spec, hw, pixels=1, channels=2, operand_bytes=1, memory=Memory.DRAM) == (1, 1)
    assert sdp.operand_heads(SdpSpec(), hw, pixels=16, channels=16, operand_bytes=1, memory=Memory.DRAM) == ()


def test_a_later_layer_takes_what_the_rtl_took():
    """The trained ViT's chained layers with per-kernel bias and multiplier streams on nv_small's RTL
    (validation/data/nvdla_rtl_vit_digits.json, session 37): from the first layer's interrupt to the second's
    the RTL took 756 cycles (the patch embedding's second kernel tile) and 690 (the output projection's
    second); the model's second layer ends 758 and 686 cycles after its first, within 5. Without the
    hand-off the model had a later layer's operands in before its first atom (4 tiles of the patch
    embedding: 370 a layer against the RTL's 392)."""
    from nvdla_sim.engine.conv import simulate_chain
    from nvdla_sim.processors import register_view

    hw = load_config("nv_small_rtl_tb")
    rows = {r["name"]: r for r in json.loads((DATA / "nvdla_rtl_vit_digits.json").read_text())["rows"]}
    for name, rtl in (("vit_00_patch_embed", 756), ("vit_12_l0_o", 690)):
        row = rows[name]
        assert row["interrupt_cycles"][1] - row["interrupt_cycles"][0] == rtl
        ops = [from_description(d) for d in row["layers"]]
        steps = [register_view(op).timed_layer(op, hw, f"{name}.{i}") for i, op in enumerate(ops)]
        first, second = simulate_chain(steps, hw).layer_ends
        assert abs(second - first - rtl) <= 5, (name, second - first)
