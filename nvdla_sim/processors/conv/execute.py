"""The convolution pipeline's bit-exact execution: its input and weights read in NVDLA's formats (feature atoms;
direct-convolution weights in kernel groups of 1x1xatomic_c blocks: doc/hw/format.rst) or kept in CBUF from
the previous layer, engine.conv.run_conv's arithmetic (NVIDIA's cmod), then the SDP (and PDP) pass on the fly."""

from __future__ import annotations

import math

import numpy as np

from nvdla_sim.engine.conv import run_conv
from nvdla_sim.engine.tiling import LoopOrder, TilePlan
from nvdla_sim.errors import TraceError
from nvdla_sim.floats import fp16_from_codes
from nvdla_sim.layers import ConvLayer
from nvdla_sim.precision import Precision
from nvdla_sim.processors.conv.registers import ConvOp
from nvdla_sim.processors.pdp.execute import execute_pdp
from nvdla_sim.processors.registers import ExecState
from nvdla_sim.processors.sdp.execute import after_sdp, apply_sdp
from nvdla_sim.registers.fields import signed
from nvdla_sim.units.memory_format import elements_per_atom, read_cube, read_dc_weights


def execute_conv(op: ConvOp, st: ExecState, name: str) -> None:
    """The convolution over its input (from memory, or kept in CBUF), then its SDP (and PDP) pass."""
    s, p, hw = op.shape, op.precision, st.hw
    if op.pixel_input:
        raise TraceError(f"{name}: image (pixel) input is not executed bit-exactly yet; only feature-data convolutions")
    if op.compressed_weights:
        raise TraceError(f"{name}: compressed weights (CDMA.D_WEIGHT_FORMAT_0=1) are not executed bit-exactly")
    if op.batches > 1:
        raise TraceError(f"{name}: multi-batch convolution (CDMA.D_BATCH_NUMBER_0) is not executed bit-exactly")
    if op.reuse.data_reuse:
        data = _kept(st.kept_data, (s.in_h, s.in_w, s.in_c), "input", "DATA", name)
    else:
        data = read_cube(st.mem, op.data, s.in_w, s.in_h, s.in_c, p, hw)[:, :, : s.in_c]
    if op.reuse.weight_reuse:
        weights = _kept(st.kept_weights, (s.out_k, s.kernel_h, s.kernel_w, s.in_c), "weights", "WEIGHT", name)
    else:
        weights = read_dc_weights(st.mem, op.weight_addr, s.out_k, s.kernel_h, s.kernel_w, s.in_c, p, hw)
    st.kept_data = data if op.reuse.skip_data_rls else None
    st.kept_weights = weights if op.reuse.skip_weight_rls else None
    layer = ConvLayer(name=name, shape=s, precision=p)
    plan = TilePlan(op.data_banks, op.weight_banks, s.out_h, s.out_k, LoopOrder.DATA_STATIONARY)
    if p.is_float:  # the padding value's 16 bits as an FP16
        pad = fp16_from_codes(np.array([op.pad_value]))[0]
    else:  # cmod csc: INT8 takes the low 8 bits
        pad = signed(op.pad_value & 0xFF, 8) if p is Precision.INT8 else signed(op.pad_value, 16)
    acc, _ = run_conv(layer, data, weights, hw, plan, truncate=op.clip_truncate, pad_value=pad)
    epa = elements_per_atom(op.sdp.out_precision, hw)
    cube = np.zeros((s.out_h, s.out_w, math.ceil(s.out_k / epa) * epa), np.float32 if p.is_float else np.int64)
    cube[:, :, : s.out_k] = acc  # kernels past K in the last group compute 0
    after_sdp(op.sdp, apply_sdp(op.sdp, cube, st.mem, hw, st.luts.sdp), st)
    if op.pdp is not None:  # pooling on the fly, fed by the SDP pass
        execute_pdp(op.pdp, st)


def _kept(kept: np.ndarray | None, shape: tuple[int, ...], what: str, field: str, name: str) -> np.ndarray:
    """The operand a convolution reuses from CBUF: what the previous one kept, of the same shape."""
    if kept is None:
        raise TraceError(
            f"{name}: {field}_REUSE=1 but the previous convolution released its {what} (set SKIP_{field}_RLS=1 there)"
        )
    if kept.shape != shape:
        raise TraceError(f"{name}: {field}_REUSE=1 reuses {what} of shape {kept.shape}, but this layer's is {shape}")
    return kept
