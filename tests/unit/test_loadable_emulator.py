"""A loadable's CPU tasks (nvdla_sim.program.loadable.emulator): power and softmax as nvdla/sw's runtime
computes them (umd/core/src/runtime/Emulator.cpp), on loadables written here in both descriptor layouts;
expected values by hand. NVIDIA's LeNet (NN_L0_0: a CPU task, the DLA task, a CPU softmax) against its
golden: test_loadables_data."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from nvdla_sim.floats import fp16_round_away
from nvdla_sim.program.loadable.container import Interface, LoadableError, parse_loadable
from nvdla_sim.program.loadable.emulator import EmuFormat, EmuOp, emu_operations, run_emu_task
from nvdla_sim.program.loadable.firmware.base import memory_layout
from nvdla_sim.program.loadable.run import initial_memory
from tests.unit.test_loadable import write_loadable


def test_fp16_rounds_to_nearest_ties_away_as_nvdla_sw_half_h():
    tie = 1 + 2.0**-11  # half-way between 1 and the next FP16, 1 + 2**-10
    assert fp16_round_away(np.array([tie, -tie])).tolist() == [1 + 2.0**-10, -(1 + 2.0**-10)]
    assert np.float16(tie) == 1.0  # numpy rounds the tie to even: the two differ
    assert fp16_round_away(np.array([1 + 2.0**-12, 2.0**-25, 65519.0, 65520.0])).tolist() == [
        1.0, 2.0**-24, 65504.0, np.inf
    ]  # fmt: skip


def _buffer_2019(index: int, size: int, fmt: int, w: int, h: int, c: int, line: int, surf: int) -> bytes:
    return struct.pack("<hIIHHHHII", index, 0, size, fmt, w, h, c, line, surf).ljust(256, b"\0")


def _buffer_2018(index: int, size: int, fmt: int, w: int, h: int, c: int, line: int, surf: int) -> bytes:
    return struct.pack("<hIHHHHII", index, size, fmt, w, h, c, line, surf).ljust(256, b"\0")


def _emu_loadable(ops: bytes, buffers: bytes, data: bytes, out_size: int) -> object:
    net = struct.pack("<hhH", 1, 2, len(buffers) // 512).ljust(256, b"\0")
    blobs = {"emu_net": net, "emu_ops": ops, "emu_bufs": buffers, "src": data}
    lo = parse_loadable(write_loadable(blobs, [out_size], tasks=[(Interface.EMU1, [0, 1, 2, 3, 4])]), "t.nvdla")
    task = lo.tasks[0]
    layout = memory_layout(lo, task)
    mem = initial_memory(layout)
    return lo, task, layout, mem


def test_an_int8_power_operation_scales_raises_and_saturates():
    # 2019 layout: op type, input scale 0.5, output scale 0.3; power 2, scale 1, shift 1
    ops = struct.pack("<Bff", 0, 0.5, 0.3) + struct.pack("<fff", 2.0, 1.0, 1.0) + b"\0" * 3
    x = [-3, 0, 5, 20]  # a 1x1x4 INT8 cube: channels in one 32-byte group
    bufs = _buffer_2019(3, 32, 0, 1, 1, 4, 32, 32) + _buffer_2019(4, 32, 0, 1, 1, 4, 32, 32)
    lo, task, layout, mem = _emu_loadable(ops, bufs, bytes(np.array(x, np.int8).view(np.uint8)).ljust(32, b"\0"), 32)
    (op,) = emu_operations(lo, task)
    assert op.op is EmuOp.POWER and op.src.format is EmuFormat.INT8 and (op.power, op.scale, op.shift) == (2, 1, 1)
    run_emu_task(lo, task, layout, mem)
    # ((1 + x * 0.5) ** 2) / 0.3: 0.83, 3.33, 40.83, 403.3; saturate<NvF32, NvS8> clamps, then the cast
    # truncates toward zero: 0, 3, 40, 127
    assert mem.read(layout.bases[4], 4).view(np.int8).tolist() == [0, 3, 40, 127]


def test_an_fp16_softmax_is_the_runtimes():
    ops = struct.pack("<Bff", 1, 0.0, 0.0) + b"\0" * 15  # softmax, axis 0
    x = np.array([1.0, 2.0, 3.0], np.float16)
    bufs = _buffer_2019(3, 32, 3, 1, 1, 3, 32, 32) + _buffer_2019(4, 32, 3, 1, 1, 3, 32, 32)
    lo, task, layout, mem = _emu_loadable(ops, bufs, x.tobytes().ljust(32, b"\0"), 32)
    run_emu_task(lo, task, layout, mem)
    e = np.exp(np.array([-2.0, -1.0, 0.0]))
    # 0.0900306, 0.2447285, 0.6652410 to FP16: 0.09003, 0.2448, 0.665 (none is a tie)
    assert mem.read(layout.bases[4], 6).view(np.float16).tolist() == np.float16(e / e.sum()).tolist()


def test_the_2018_layout_nvidias_regression_loadables_hold():
    # NN_L0_0's first CPU task: power 1, scale 1, shift 0 in a 16-byte union with no scale factors; FP16 is
    # format 2 (DLA_FEATURE_FP16_FORMAT); 20 channels make two 16-channel groups a surface apart
    ops = struct.pack("<Bfff", 0, 1.0, 1.0, 0.0).ljust(16, b"\0")
    w, h, c, line, surf = 2, 1, 20, 64, 64
    bufs = _buffer_2018(3, 128, 2, w, h, c, line, surf) + _buffer_2018(4, 128, 2, w, h, c, line, surf)
    x = (np.arange(64, dtype=np.float16) - 20).tobytes()
    lo, task, layout, mem = _emu_loadable(ops, bufs, x, 128)
    (op,) = emu_operations(lo, task)
    assert op.src.format is EmuFormat.FP16 and op.src.offset == 0 and (op.input_scale, op.output_scale) == (1, 1)
    run_emu_task(lo, task, layout, mem)
    got = mem.read(layout.bases[4], 128).view(np.float16)
    src = np.frombuffer(x, np.float16)
    for ch in range(c):  # element (x, ch) at (ch // 16) * surf + x * 32 + (ch % 16) * 2 bytes
        for i in range(w):
            at = ((ch // 16) * surf + i * 32 + (ch % 16) * 2) // 2
            assert got[at] == src[at]
    pad = (surf + 4 * 2) // 2  # the slot of "channel 20" in the second group: padding, not an element
    assert src[pad] != 0 and got[pad] == 0


def test_a_buffer_in_neither_layout_is_refused():
    ops = struct.pack("<Bfff", 0, 1.0, 1.0, 0.0).ljust(16, b"\0")
    bad = struct.pack("<hIHHHHII", 3, 8, 7, 1, 1, 1, 32, 32).ljust(256, b"\0")  # format 7, size too small
    lo, task, layout, mem = _emu_loadable(ops, bad + bad, bytes(32), 32)
    with pytest.raises(LoadableError, match="operation 0 source: an emu_buffer_desc in neither known layout"):
        emu_operations(lo, task)
