"""Rubik's bit-exact execution: bytes moved from the input's layout to the output's, as NVIDIA's C model
(nvdla/hw nvdlav1 cmod/rubik/NV_NVDLA_rbk.cpp) and RTL (vmod/nvdla/rubik) move them; no value is changed.

With e = bytes an element (1 INT8, 2 INT16/FP16), k = 32 / e elements an atom, W x H the input's width and
height and SS/LS/PS a side's surface, line and planar strides:

* contract (sx, sy = DECONV_X/Y_STRIDE + 1; C = DATAOUT_CHANNEL + 1 output channels, S = ceil(C / k) output
  surfaces; CS0 = CONTRACT_STRIDE_0): output atom (w * sx + tx, h * sy + ty) of surface s is input atom (w, h)
  of surface s at (ty * sx + tx) * CS0: out(w * sx + tx, h * sy + ty, c) = in(w, h, (ty * sx + tx) * S * k + c)
  when CS0 = S x the input's surface stride, as the firmware programs it. Whole atoms move, padding lanes
  included. Output lines are LS apart (the RTL's stepping; the C model's CONTRACT_STRIDE_1 is refused
  unless it equals sy x LS: registers.decode_rubik).
* split (C = DATAOUT_CHANNEL + 1 planes): plane c, line h holds the W elements of channel c, e bytes each,
  the rest of its last 32 bytes written as zero; channels of the input's last atom past C are dropped.
* merge (C = DATAIN_CHANNEL + 1 planes): each output atom gathers channel c of pixel (w, h) from plane c;
  lanes past C are zero.
"""

from __future__ import annotations

import numpy as np

from nvdla_sim.processors.registers import ExecState
from nvdla_sim.processors.rubik.registers import RBK_ATOM_BYTES, RubikMode, RubikOp

A = RBK_ATOM_BYTES


def execute_rubik(op: RubikOp, st: ExecState) -> None:
    {RubikMode.CONTRACT: _contract, RubikMode.SPLIT: _split, RubikMode.MERGE: _merge}[op.mode](op, st)


def _contract(op: RubikOp, st: ExecState) -> None:
    w, sx, sy = op.width, op.stride_x, op.stride_y
    surfaces = -(-op.out_channels // op.atom_elements)
    src, dst = op.src, op.dst
    for s in range(surfaces):
        for h in range(op.height):
            for ty in range(sy):
                line = np.zeros((w, sx, A), np.uint8)  # output pixel w * sx + tx: input atom w of group (ty, tx)
                for tx in range(sx):
                    at = src.addr + (ty * sx + tx) * op.contract_stride_0 + s * src.surface_stride + h * src.line_stride
                    line[:, tx, :] = st.mem.read(at, w * A).reshape(w, A)
                st.mem.write(dst.addr + s * dst.surface_stride + (h * sy + ty) * dst.line_stride, line.reshape(-1))


def _split(op: RubikOp, st: ExecState) -> None:
    e, k = op.element_bytes, op.atom_elements
    row = -(-op.width * e // A) * A  # a plane's line, its last 32 bytes zero-filled
    for c in range(op.out_channels):
        s, lane = divmod(c, k)
        for h in range(op.height):
            atoms = st.mem.read(op.src.addr + s * op.src.surface_stride + h * op.src.line_stride, op.width * A)
            out = np.zeros(row, np.uint8)
            out[: op.width * e] = atoms.reshape(op.width, A)[:, lane * e : (lane + 1) * e].reshape(-1)
            st.mem.write(op.dst.addr + c * op.dst.planar_stride + h * op.dst.line_stride, out)


def _merge(op: RubikOp, st: ExecState) -> None:
    e, k = op.element_bytes, op.atom_elements
    channels = op.in_channels
    for s in range(-(-channels // k)):
        for h in range(op.height):
            atoms = np.zeros((op.width, k, e), np.uint8)
            for lane in range(min(k, channels - s * k)):
                c = s * k + lane
                plane = st.mem.read(op.src.addr + c * op.src.planar_stride + h * op.src.line_stride, op.width * e)
                atoms[:, lane, :] = plane.reshape(op.width, e)
            st.mem.write(op.dst.addr + s * op.dst.surface_stride + h * op.dst.line_stride, atoms.reshape(-1))
