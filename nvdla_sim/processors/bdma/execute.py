"""BDMA's bit-exact execution: each line of each surface copied byte for byte from src to dst, at each side's
own line and surface strides (what the transfer's registers say; the bytes are not interpreted)."""

from __future__ import annotations

from nvdla_sim.processors.bdma.registers import BdmaOp
from nvdla_sim.processors.registers import ExecState


def execute_bdma(op: BdmaOp, st: ExecState) -> None:
    for s in range(op.surfaces):
        for line in range(op.lines):
            data = st.mem.read(op.src.addr + s * op.src.surface_stride + line * op.src.line_stride, op.line_bytes)
            st.mem.write(op.dst.addr + s * op.dst.surface_stride + line * op.dst.line_stride, data)
