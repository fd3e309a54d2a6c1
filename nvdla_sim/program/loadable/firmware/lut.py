"""The LUT the firmware writes for SDP and CDP (nvdla/sw kmd/firmware common.c update_lut)."""

from __future__ import annotations

from nvdla_sim.program.loadable.container import LoadableError
from nvdla_sim.program.loadable.descriptors import LutParam, Precision
from nvdla_sim.program.loadable.firmware.base import WORD, Csb, masked
from nvdla_sim.program.loadable.network import DlaNetwork, DlaOperation


def network_lut(net: DlaNetwork, op: DlaOperation, index: int) -> LutParam:
    if not 0 <= index < len(net.luts):
        raise LoadableError(f"{net.loadable.path}: {op.name} uses LUT {index}; the network has {len(net.luts)}")
    return net.luts[index]


def update_lut(csb: Csb, unit: str, lut: LutParam, precision: int) -> None:
    """common.c update_lut: both tables through S_LUT_ACCESS_CFG/DATA, then the LUT's configuration."""
    for table, values in ((0, lut.linear_exp_table), (1, lut.linear_only_table)):
        csb.fields(unit, "S_LUT_ACCESS_CFG", TABLE_ID=table, ACCESS_TYPE=1)
        for v in values:
            csb.write(unit, "S_LUT_ACCESS_DATA", v)
    csb.fields(unit, "S_LUT_CFG", LE_FUNCTION=lut.method, HYBRID_PRIORITY=lut.hybrid_priority,
               UFLOW_PRIORITY=lut.underflow_priority, OFLOW_PRIORITY=lut.overflow_priority)  # fmt: skip
    if lut.method == 0:  # exponent: the LE table's index offset
        csb.fields(unit, "S_LUT_INFO", LE_INDEX_OFFSET=masked(lut.linear_exp_offset, 8),
                   LO_INDEX_SELECT=masked(lut.linear_only_offset, 8))  # fmt: skip
    else:
        csb.fields(unit, "S_LUT_INFO", LE_INDEX_SELECT=masked(lut.linear_exp_offset, 8),
                   LO_INDEX_SELECT=masked(lut.linear_only_offset, 8))  # fmt: skip
    sdp = unit == "SDP"
    for name, v in (("LE_START", lut.linear_exp_start), ("LE_END", lut.linear_exp_end),
                    ("LO_START", lut.linear_only_start), ("LO_END", lut.linear_only_end)):  # fmt: skip
        if sdp:  # one 32-bit register
            csb.write(unit, f"S_LUT_{name}", v & WORD)
        else:
            csb.write(unit, f"S_LUT_{name}_LOW", v & WORD)
            csb.write(unit, f"S_LUT_{name}_HIGH", (v >> 32) & WORD)
    slopes = (("LE", lut.linear_exp_underflow_slope, lut.linear_exp_overflow_slope),
              ("LO", lut.linear_only_underflow_slope, lut.linear_only_overflow_slope))  # fmt: skip
    for t, under, over in slopes:
        if precision == Precision.FP16:  # data_f: the slope's FP16 bits, the scale register only
            csb.fields(unit, f"S_LUT_{t}_SLOPE_SCALE", UFLOW_SCALE=masked(under.scale, 16),
                       OFLOW_SCALE=masked(over.scale, 16))  # fmt: skip
            continue
        csb.fields(unit, f"S_LUT_{t}_SLOPE_SCALE", UFLOW_SCALE=masked(under.scale, 16),
                   OFLOW_SCALE=masked(over.scale, 16))  # fmt: skip
        csb.fields(unit, f"S_LUT_{t}_SLOPE_SHIFT", UFLOW_SHIFT=masked(under.shifter, 5),
                   OFLOW_SHIFT=masked(over.shifter, 5))  # fmt: skip
