"""CDP's bit-exact execution: local response normalisation across channels through the program's LUT
(units.cdp.lrn, NVIDIA's cmod), written with the destination strides."""

from __future__ import annotations

import numpy as np

from nvdla_sim.errors import TraceError
from nvdla_sim.processors.cdp.registers import CdpOp
from nvdla_sim.processors.registers import ExecState
from nvdla_sim.registers.fields import signed
from nvdla_sim.units.cdp import WIDTHS, LrnParams, lrn
from nvdla_sim.units.memory_format import read_cube, write_cube


def execute_cdp(op: CdpOp, st: ExecState, name: str) -> None:
    lut = st.luts.cdp
    if lut is None:
        raise TraceError(f"{name}: a CDP operation needs the program's LUT (processors.lut.decode_lut)")
    x = read_cube(st.mem, op.src, op.width, op.height, op.channels, op.precision, st.hw).astype(np.int64)
    bits = WIDTHS[op.precision].in_offset if op.precision in WIDTHS else 8
    x[..., op.channels :] = signed(op.datin_offset, bits)  # padding channels enter as the offset (cmod)
    params = LrnParams(
        window=op.normalz_len,
        lut=lut,
        in_offset=op.datin_offset,
        in_scale=op.datin_scale,
        in_shift=op.datin_shift,
        out_offset=op.datout_offset,
        out_scale=op.datout_scale,
        out_shift=op.datout_shift,
        sqsum_bypass=op.sqsum_bypass,
        mul_bypass=op.mul_bypass,
    )
    try:
        out = lrn(x, params, op.precision)
    except ValueError as e:
        raise TraceError(f"CDP: {e}") from None
    write_cube(st.mem, op.dst, out, op.precision, st.hw)
