"""Loadables (nvdla_sim.program.loadable): a loadable this test writes with flatbuffers' own Builder, by the
slots of nvdla/sw's loadable.fbs, holding firmware descriptors packed here field by field with `struct` from
dla_interface.h's declarations; the reader must give back every entry and descriptor. The struct sizes are
checked against the blob sizes NVIDIA's regression loadables hold (nvdla/sw regression/flatbufs)."""

from __future__ import annotations

import struct

import flatbuffers
import pytest

from nvdla_cli.main import main
from nvdla_sim.program.loadable.container import (
    Interface,
    LoadableError,
    MemoryFlags,
    parse_loadable,
    read_loadable,
)
from nvdla_sim.program.loadable.descriptors import (
    CommonOpDesc,
    DataCube,
    LutParam,
    MemType,
    NetworkDesc,
    OpType,
    op_container_size,
    sizeof,
    surface_container_size,
)
from nvdla_sim.program.loadable.network import dla_network


def test_struct_sizes_are_the_blob_sizes_nvidias_loadables_hold():
    # CONV_D_L0_0_small_fbuf: a 40-byte NetworkDesc blob, 2 operations in a 72-byte dependency graph, a
    # 232-byte op list and a 1,288-byte surface list; NN_L0_0_fbuf: a 700-byte LUT list of one LUT
    assert sizeof(NetworkDesc) == 40 and sizeof(CommonOpDesc) * 2 == 72
    assert op_container_size() * 2 == 232 and surface_container_size() * 2 == 1288 and sizeof(LutParam) == 700
    # dla_interface.h: a cube is 32 bytes since firmware interface 0.12 added its offset, 28 before
    assert sizeof(DataCube) == 32 and sizeof(DataCube, (0, 11)) == 28


# ---- a loadable written here ------------------------------------------------------------------------


def _vector(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def _u16s(b: flatbuffers.Builder, values: list[int]) -> int:
    b.StartVector(2, len(values), 2)
    for v in reversed(values):
        b.PrependUint16(v)
    return b.EndVector()


def _u64s(b: flatbuffers.Builder, values: list[int]) -> int:
    b.StartVector(8, len(values), 8)
    for v in reversed(values):
        b.PrependUint64(v)
    return b.EndVector()


def _version(b: flatbuffers.Builder, major: int, minor: int, sub: int) -> int:
    b.Prep(1, 3)
    b.PrependUint8(sub)
    b.PrependUint8(minor)
    b.PrependUint8(major)
    return b.Offset()


def _cube(cube_type: int, address: int, offset: int, size: int, w: int, h: int, c: int, line: int, surf: int,
          *, with_offset: bool) -> bytes:  # fmt: skip
    """struct dla_data_cube: type, address, [offset,] size, width, height, channel, reserved0, strides."""
    head = struct.pack("<Hh", cube_type, address) + (struct.pack("<I", offset) if with_offset else b"")
    return head + struct.pack("<IHHHHIII", size, w, h, c, 0, line, surf, 0)


def _firmware_blobs(*, with_offset: bool) -> dict[str, bytes]:
    """A convolution (3x3 kernels on 8x8x16, to 8 kernels, pad 1) fused into an SDP (bias per kernel and
    ReLU) writing 8x8x8 to memory entry 7 at byte 64: the descriptors as dla_interface.h packs them, the
    dependencies as NVIDIA's compiler writes them (CONV_D_L0_0: the convolution waits for its SDP's enable,
    the SDP for the convolution's programming)."""
    net = struct.pack("<8h6h4Hh2B", 2, 3, 1, -1, -1, -1, -1, 0, -1, 0, 1, -1, -1, -1, 1, 2, 0, 8, -1, 0, 0)
    # dependency graph: conv -> sdp when programmed; sdp's fused parent is the conv
    none = struct.pack("<hBB", -1, 0, 0)
    conv_common = struct.pack("<hbBB3B", 0, 0, OpType.CONV, 1, 0, 0, 0) + none * 2 + struct.pack("<hBB", 1, 2, 0)
    conv_common += none * 3 + none
    sdp_common = struct.pack("<hbBB3B", 1, 0, OpType.SDP, 1, 0, 0, 0) + none * 6 + struct.pack("<hBB", 0, 3, 0)
    cvt = struct.pack("<hBBi", 1, 0, 0, 0)
    conv_op = (
        struct.pack("<6BH", 0, 0, 0, 0, 0, 0, 8) + struct.pack("<BBH", 36, 0, 0) + bytes(8)
        + struct.pack("<4BI", 1, 0, 2, 1, 0) + struct.pack("<BBH", 0, 0, 8)
        + struct.pack("<8H", 8, 8, 16, 3, 3, 16, 8, 8) + struct.pack("<I", 144) + struct.pack("<4h", 0, 0, 0, 0)
        + struct.pack("<11B", 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0) + struct.pack("<3Bh", 0, 0, 0, 0) + cvt + cvt
    )  # fmt: skip
    stage_off = struct.pack("<8Bii", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) + cvt * 2
    x1 = struct.pack("<8Bii", 1, 2, 2, 1, 1, 0, 0, 0, 0, 1) + cvt * 2  # add (sum) per kernel, ReLU
    sdp_op = struct.pack("<BBh", 0, 0, -1) + cvt + struct.pack("<BBHI", 0, 1, 0, 0) + x1 + stage_off * 2
    op_size, surf_size = op_container_size(), surface_container_size()
    ops = conv_op.ljust(op_size, b"\0") + sdp_op.ljust(op_size, b"\0")
    cube = lambda *a: _cube(*a, with_offset=with_offset)  # noqa: E731
    empty = cube(MemType.HW, -1, 0, 0, 0, 0, 0, 0, 0)
    conv_surface = (
        cube(MemType.MC, 4, 0, 1152, 3, 3, 16, 0, 0) + empty + empty + cube(MemType.MC, 5, 0, 2048, 8, 8, 16, 256, 2048)
        + cube(MemType.HW, -1, 0, 0, 8, 8, 8, 0, 0) + struct.pack("<qI", 0, 0)
    )  # fmt: skip
    sdp_surface = (
        cube(MemType.HW, -1, 0, 0, 8, 8, 8, 0, 0) + cube(MemType.MC, 6, 0, 16, 1, 1, 8, 0, 0) + empty + empty
        + cube(MemType.MC, 7, 64, 2048, 8, 8, 8, 256, 2048)
    )  # fmt: skip
    surfaces = conv_surface.ljust(surf_size, b"\0") + sdp_surface.ljust(surf_size, b"\0")
    return {"net": net, "deps": conv_common + sdp_common, "ops": ops, "surfs": surfaces}


def _loadable(*, firmware: tuple[int, int, int] = (0, 12, 5), with_offset: bool = True, version=(0, 7, 0)) -> bytes:
    blobs = _firmware_blobs(with_offset=with_offset)
    blobs["weights"], blobs["input"], blobs["bias"] = bytes(range(144)) * 8, bytes(2048), bytes(16)
    return write_loadable(blobs, [1024], firmware=firmware, version=version)


FIRMWARE_BLOBS = ("net", "deps", "ops", "surfs")  # the DLA task's descriptor blobs, address entries 0..3


def write_loadable(
    blobs: dict[str, bytes], empty: list[int], *, firmware=(0, 12, 5), version=(0, 7, 0), tensors=(), tasks=None
) -> bytes:
    """A loadable of one DLA task: memory i holds blob i (in `blobs`' order, the firmware's four first), then
    one empty output memory per size in `empty`; address entry i is memory i from its start. `tensors`:
    (name, memory id, offset, size, data type, (n, c, h, w), (stride0, line, surface)) of tensor descriptors;
    `tasks`: (interface, address list) of each task, submitted in turn (default: one DLA task, every entry)."""
    names = list(blobs)
    b = flatbuffers.Builder(4096)
    blob_offsets = []
    for name in names:
        n, data = b.CreateString(name), b.CreateByteVector(blobs[name])
        b.StartObject(6)
        b.PrependUOffsetTRelativeSlot(0, n, 0)
        b.PrependUint64Slot(1, len(blobs[name]), 0)
        b.PrependUint32Slot(2, Interface.DLA1 if name in FIRMWARE_BLOBS else 0, 0)
        b.PrependStructSlot(4, _version(b, *firmware), 0)
        b.PrependUOffsetTRelativeSlot(5, data, 0)
        blob_offsets.append(b.EndObject())
    memories = []
    for i, name in enumerate([*names, *[None] * len(empty)]):
        contents = _vector(b, [b.CreateString(name)]) if name else None
        offsets = _u64s(b, [0]) if name else None
        b.StartObject(9)
        b.PrependUint16Slot(0, i, 0)
        b.PrependUint16Slot(
            2, (MemoryFlags.ALLOC | MemoryFlags.SET) if name else (MemoryFlags.ALLOC | MemoryFlags.OUTPUT), 0
        )
        b.PrependUint64Slot(3, len(blobs[name]) if name else empty[i - len(names)], 0)
        if name:
            b.PrependUOffsetTRelativeSlot(5, contents, 0)
            b.PrependUOffsetTRelativeSlot(6, offsets, 0)
        memories.append(b.EndObject())
    addresses = []
    count = len(names) + len(empty)
    for i in range(count):  # address entry i: memory i from its start, size 0 (to its end, as nvdla_compiler writes)
        b.StartObject(4)
        b.PrependUint16Slot(0, i, 0)
        b.PrependUint16Slot(1, i, 0)
        addresses.append(b.EndObject())
    tensor_offsets = []
    for name, mem_id, offset, size, data_type, nchw, strides in tensors:  # loadable.fbs TensorDescListEntry
        n = b.CreateString(name)
        b.StartObject(22)
        b.PrependUOffsetTRelativeSlot(0, n, 0)
        b.PrependUint16Slot(2, mem_id, 0)
        b.PrependUint64Slot(3, size, 0)
        b.PrependUint64Slot(4, offset, 0)
        b.PrependUint8Slot(6, data_type, 0)
        b.PrependUint8Slot(7, 1, 0)  # data category: feature
        b.PrependUint8Slot(8, 36, 0)  # pixel format: FEATURE
        for slot, v in zip(range(10, 14), nchw, strict=True):
            b.PrependInt32Slot(slot, v, 0)
        for slot, v in zip(range(14, 17), strides, strict=True):
            b.PrependUint32Slot(slot, v, 0)
        tensor_offsets.append(b.EndObject())
    task_offsets = []
    for i, (interface, entries) in enumerate(tasks or [(Interface.DLA1, list(range(count)))]):
        address_list = _u16s(b, entries)
        b.StartObject(6)
        b.PrependUint16Slot(0, i, 0)
        b.PrependUint32Slot(1, interface, 0)
        b.PrependInt16Slot(2, -1, 0)
        b.PrependUOffsetTRelativeSlot(3, address_list, 0)
        task_offsets.append(b.EndObject())
    lists = [_vector(b, task_offsets), _vector(b, memories), _vector(b, addresses), _vector(b, blob_offsets)]
    slots = [1, 2, 3, 5]
    if tensor_offsets:
        lists.append(_vector(b, tensor_offsets))
        slots.append(6)
    b.StartObject(9)
    b.PrependStructSlot(0, _version(b, *version), 0)
    for slot, off in zip(slots, lists, strict=True):
        b.PrependUOffsetTRelativeSlot(slot, off, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


@pytest.mark.parametrize(("firmware", "with_offset"), [((0, 12, 5), True), ((0, 11, 0), False)])
def test_a_written_loadable_reads_back(firmware, with_offset):
    lo = parse_loadable(_loadable(firmware=firmware, with_offset=with_offset), "t.nvdla")
    assert str(lo.version) == "0.7.0" and [t.interface for t in lo.tasks] == [Interface.DLA1]
    assert lo.tasks[0].instance == -1 and lo.tasks[0].address_list == tuple(range(8))
    assert [m.id for m in lo.memories] == list(range(8)) and lo.memories[
        7
    ].flags == MemoryFlags.ALLOC | MemoryFlags.OUTPUT
    assert lo.blob("weights").data == bytes(range(144)) * 8 and lo.contents(4) == bytes(range(144)) * 8
    net = dla_network(lo)
    assert net.interface == firmware[:2] and net.outputs() == (7,)
    assert net.desc.num_operations == 2 and net.desc.op_head == (-1, 0, 1, -1, -1, -1)
    conv, sdp = net.operations
    assert (conv.op_type, sdp.op_type) == (OpType.CONV, OpType.SDP)
    assert conv.consumers() == ((1, conv.consumers()[0][1]),) and conv.consumers()[0][1].name == "OP_PROGRAMMED"
    assert sdp.common.fused_parent.index == 0 and sdp.common.dependency_count == 1
    op = conv.op
    assert (op.kernel_width_csc, op.kernel_height_csc, op.kernel_channel_csc, op.bytes_per_kernel) == (3, 3, 16, 144)
    assert (op.pad_x_left, op.pad_y_bottom, op.conv_stride_x, op.data_bank, op.weight_bank) == (1, 1, 1, 2, 1)
    assert op.entry_per_slice == 8 and op.release == 8 and op.data_format == 36
    assert conv.source.whc == "8x8x16" and conv.source.line_stride == 256 and conv.destination.type == MemType.HW
    x1 = sdp.op.x1_op
    assert (x1.enable, x1.alu_type, x1.type, x1.mode, x1.act, x1.mul_operand) == (1, 2, 2, 1, 1, 1)
    assert not sdp.op.x2_op.enable and sdp.op.lut_index == -1
    out = net.place(sdp.destination)
    assert (out.mem_type, out.mem_id, out.offset) == (MemType.MC, 7, 64 if with_offset else 0)
    assert net.cube_text(conv.destination) == "8x8x8 on the fly"
    assert "x1 add (sum) per-kernel + relu" in sdp.op.describe()
    assert "direct 3x3x16 kernels, stride 1x1, pad 1,1,1,1" in conv.op.describe()


def test_the_cli_lists_a_loadable(tmp_path, capsys):
    path = tmp_path / "net.nvdla"
    path.write_bytes(_loadable())
    assert main(["loadable", str(path)]) == 0
    out = capsys.readouterr().out
    assert "DLA task 0: 2 operations, 0 LUTs, 1 ROI(s); firmware interface 0.12 descriptors" in out
    assert "conv0  8x8x16 mem5+0" in out and "8x8x8 mem7+64" in out and "sdp1(op_programmed)" in out
    assert main(["loadable", str(path), "--json"]) == 0
    assert '"kernel_width_csc": 3' in capsys.readouterr().out


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "0 bytes is too short for a flatbuffer loadable"),
        (b"\xff" * 64, "not a loadable flatbuffer"),
        (_loadable(version=(0, 8, 0)), "loadable version 0.8.0; this reader knows 0.7.0"),
        (_loadable(firmware=(0, 13, 0)), "firmware interface 0.13.0; this reader knows 0.10 to 0.12"),
        (_loadable(firmware=(0, 9, 0)), "firmware interface 0.9.0; this reader knows 0.10 to 0.12"),
        (_loadable()[:300], "not a loadable flatbuffer"),
    ],
)
def test_bad_loadables_are_one_line_errors(tmp_path, capsys, data, message):
    path = tmp_path / "bad.nvdla"
    path.write_bytes(data)
    with pytest.raises(LoadableError, match=message):
        dla_network(read_loadable(path))
    assert main(["loadable", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and err.count("\n") == 0 and str(path) in err


def test_a_missing_loadable_names_the_file(tmp_path, capsys):
    assert main(["loadable", str(tmp_path / "none.nvdla")]) == 2
    assert "none.nvdla: cannot read the loadable" in capsys.readouterr().err


def test_an_address_range_holds_the_parts_of_the_blobs_that_fall_in_it():
    from nvdla_sim.program.loadable.container import AddressEntry, Blob, Loadable, MemoryDomain, MemoryEntry, Version

    blobs = (Blob("a", 4, Interface.NONE, 0, None, b"ABCD"), Blob("b", 3, Interface.NONE, 0, None, b"xyz"))
    flags = MemoryFlags.ALLOC | MemoryFlags.SET
    memory = MemoryEntry(0, MemoryDomain.SYSTEM, flags, 12, 0, ("a", "b"), (2, 8), 0, 0)
    addresses = (AddressEntry(0, 0, 3, 6), AddressEntry(1, 0, 9, 0), AddressEntry(2, 0, 10, 5))
    lo = Loadable("m", Version(0, 7, 0), (), (memory,), addresses, (), blobs, (), (), ())
    assert lo.contents(0) == b"\0\0ABCD\0\0xyz\0"  # blob a at 2, b at 8, zeros between
    assert lo.address_bytes(0) == b"BCD\0\0x" and lo.address_bytes(1) == b"yz\0"  # size 0: to the end
    with pytest.raises(LoadableError, match="address entry 2 \\(10\\+5\\) overruns memory 0"):
        lo.address_bytes(2)
