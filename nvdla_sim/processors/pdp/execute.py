"""PDP's bit-exact execution: the pooling windows over a cube from memory or from SDP on the fly (units.pdp.pool,
NVIDIA's cmod NV_NVDLA_pdp.cpp), written with the destination strides."""

from __future__ import annotations

from nvdla_sim.errors import TraceError
from nvdla_sim.layers import PoolMode
from nvdla_sim.precision import Precision
from nvdla_sim.processors.pdp.registers import PdpOp, pool_spec
from nvdla_sim.processors.registers import ExecState
from nvdla_sim.registers.fields import signed
from nvdla_sim.units import pdp as pdp_fn
from nvdla_sim.units.memory_format import read_cube, write_cube

# PDP padding-value registers: sign bit of the n-element value for INT8 / INT16 data (cmod NV_NVDLA_pdp.cpp
# int_sign_extend widths for D_POOLING_PADDING_VALUE_1..7)
_PDP_PAD_BITS = {Precision.INT8: (8, 9, 10, 10, 11, 11, 11), Precision.INT16: (16, 17, 18, 18, 19, 19, 19)}


def execute_pdp(op: PdpOp, st: ExecState) -> None:
    """Pool the pass's input (SDP's output on the fly, or the cube at op.src) into op.dst."""
    if op.flying:
        if st.flying is None:
            raise TraceError("PDP is programmed on the fly but no SDP pass feeds it")
        x, st.flying = st.flying[: op.in_h, : op.in_w], None
    else:
        x = read_cube(st.mem, op.src, op.in_w, op.in_h, op.channels, op.precision, st.hw)
    spec = pool_spec(op)
    if op.precision.is_float:
        # max and min choose an element (exact in any precision); FP16 averages round in the hardware's own
        # float adders and reciprocal multiplies, not modelled
        if spec.mode is PoolMode.AVG:
            raise TraceError("PDP FP16 average pooling is not executed bit-exactly (max and min are)")
        out = pdp_fn.pool(x, spec, op.precision)
    else:
        bits = _PDP_PAD_BITS[op.precision]
        pads = [signed(v & ((1 << b) - 1), b) for v, b in zip(op.pad_values, bits, strict=True)]
        out = pdp_fn.pool(x, spec, op.precision, recips=(op.recip_w, op.recip_h), pad_values=pads)
    if out.shape[:2] != (op.out_h, op.out_w):
        raise TraceError(
            f"PDP.D_DATA_CUBE_OUT_WIDTH/HEIGHT say {op.out_w}x{op.out_h} but the window gives "
            f"{out.shape[1]}x{out.shape[0]}"
        )
    write_cube(st.mem, op.dst, out, op.precision, st.hw)
