"""The LUT's registers (S_LUT_*), which SDP's Y stage and CDP each have: the tables written through the
access port and the index, range, slope and priority registers (NVDLA_SDP.rdl, NVDLA_CDP.rdl), read back into
units.lut.LutParams and written from it."""

from __future__ import annotations

import numpy as np

from nvdla_sim.errors import TraceError
from nvdla_sim.processors.registers import RegisterWriter, UnitRegisters
from nvdla_sim.registers.fields import field as get_field
from nvdla_sim.registers.fields import signed
from nvdla_sim.registers.trace_io import Program, RegWrite
from nvdla_sim.units.lut import LE_ENTRIES, LO_ENTRIES, IndexMode, LutParams, LutTable, Table


def decode_lut(prog: Program, unit: str = "NVDLA_CDP") -> LutParams:
    """The LUT a unit's first operation uses: the tables written through S_LUT_ACCESS_CFG / _DATA (the
    address auto-increments per data write) and the S_LUT_* registers, as they stand at its op enable."""
    tables = {0: [0] * LE_ENTRIES, 1: [0] * LO_ENTRIES}  # TABLE_ID 0 = LE (raw), 1 = LO (density)
    regs: dict[str, int] = {}
    addr = table = 0
    writing = False
    enabled = rewritten = False
    for c in prog.commands:
        if not isinstance(c, RegWrite) or c.unit != unit:
            continue
        if c.reg == "D_OP_ENABLE_0" and c.value & 1:
            if rewritten:
                raise TraceError(
                    f"{prog.name}:{c.line}: {unit}'s LUT is reprogrammed between two of its operations; one LUT "
                    "per program is modelled (split the program)"
                )
            enabled = True
            continue
        if enabled:
            rewritten = rewritten or c.reg.startswith("S_LUT_")
            continue
        regs[c.reg] = c.value
        if c.reg == "S_LUT_ACCESS_CFG_0":
            addr = get_field(c.value, unit, c.reg, "ADDR")
            table = get_field(c.value, unit, c.reg, "TABLE_ID")
            writing = bool(get_field(c.value, unit, c.reg, "ACCESS_TYPE"))
        elif c.reg == "S_LUT_ACCESS_DATA_0" and writing:
            if addr >= len(tables[table]):
                raise TraceError(f"{prog.name}:{c.line}: LUT write past the end of the {('LE', 'LO')[table]} table")
            tables[table][addr] = signed(get_field(c.value, unit, c.reg, "DATA"), 16)
            addr += 1
    r = UnitRegisters(unit, regs)
    le_e, lo_e = np.array(tables[0], np.int64), np.array(tables[1], np.int64)

    sdp = unit == "NVDLA_SDP"

    def wide(name: str) -> int:
        if sdp:  # SDP: one 32-bit signed register (NVDLA_SDP.rdl S_LUT_LE_START; cmod yLutRegType)
            return signed(r.f(f"S_LUT_{name}_0", "VALUE"), 32)
        # CDP: 38-bit signed start/end, LOW[31:0] and HIGH[5:0]
        return signed((r.f(f"S_LUT_{name}_HIGH_0", "VALUE") << 32) | r.f(f"S_LUT_{name}_LOW_0", "VALUE"), 38)

    def slopes(t: str) -> dict[str, int]:
        sc, sh = f"S_LUT_{t}_SLOPE_SCALE_0", f"S_LUT_{t}_SLOPE_SHIFT_0"
        return {
            "uflow_scale": signed(r.f(sc, "UFLOW_SCALE"), 16),
            "oflow_scale": signed(r.f(sc, "OFLOW_SCALE"), 16),
            "uflow_shift": signed(r.f(sh, "UFLOW_SHIFT"), 5),  # sc_int<5> in cmod lookup_lut_int8
            "oflow_shift": signed(r.f(sh, "OFLOW_SHIFT"), 5),
        }

    info = "S_LUT_INFO_0"
    # index selects: 8-bit signed in SDP (cmod hls/sdp/sdp.h yLutRegIdxType), 6-bit in CDP's datapath
    bits = 8 if sdp else 6
    le_select = signed(r.f(info, "LE_INDEX_SELECT"), bits)
    lo_select = signed(r.f(info, "LO_INDEX_SELECT"), bits)
    if r.f("S_LUT_CFG_0", "LE_FUNCTION"):  # 1 = LINEAR
        le = LutTable(le_e, IndexMode.LINEAR, wide("LE_START"), le_select, **slopes("LE"), end=wide("LE_END"))
    else:
        offset = signed(r.f(info, "LE_INDEX_OFFSET"), 8)
        le = LutTable(le_e, IndexMode.EXPONENT, offset, 0, **slopes("LE"), origin=wide("LE_START"), end=wide("LE_END"))
    lo = LutTable(lo_e, IndexMode.LINEAR, wide("LO_START"), lo_select, **slopes("LO"), end=wide("LO_END"))
    prio = {0: Table.LE, 1: Table.LO}
    return LutParams(
        le=le,
        lo=lo,
        priority=prio[r.f("S_LUT_CFG_0", "HYBRID_PRIORITY")],
        uflow_priority=prio[r.f("S_LUT_CFG_0", "UFLOW_PRIORITY")],
        oflow_priority=prio[r.f("S_LUT_CFG_0", "OFLOW_PRIORITY")],
    )


def write_lut(b: RegisterWriter, unit: str, lut: LutParams) -> None:
    """S_LUT_*: the tables through the access port, then the index and flow registers (CDP or SDP)."""
    for table_id, t in ((1, lut.lo), (0, lut.le)):
        b.reg(unit, "S_LUT_ACCESS_CFG_0", ADDR=0, TABLE_ID=table_id, ACCESS_TYPE=1)
        for v in np.asarray(t.entries, np.int64):
            b.reg(unit, "S_LUT_ACCESS_DATA_0", DATA=int(v) & 0xFFFF)
    le, lo = lut.le, lut.lo
    prio = {Table.LE: 0, Table.LO: 1}
    b.reg(
        unit,
        "S_LUT_CFG_0",
        LE_FUNCTION=int(le.mode is IndexMode.LINEAR),
        UFLOW_PRIORITY=prio[lut.uflow_priority],
        OFLOW_PRIORITY=prio[lut.oflow_priority],
        HYBRID_PRIORITY=prio[lut.priority],
    )
    exponent = le.mode is IndexMode.EXPONENT
    sdp = unit == "SDP"
    select_mask = 0xFF if sdp else 0x3F  # 8-bit signed selects in SDP, 6 bits used by CDP
    b.reg(
        unit,
        "S_LUT_INFO_0",
        LE_INDEX_OFFSET=(le.start if exponent else 0) & 0xFF,
        LE_INDEX_SELECT=(0 if exponent else le.index_shift) & select_mask,
        LO_INDEX_SELECT=lo.index_shift & select_mask,
    )
    le_start = le.origin if exponent else le.start
    for name, v in (("LE_START", le_start), ("LE_END", le.last_x), ("LO_START", lo.start), ("LO_END", lo.last_x)):
        if sdp:
            if not -(1 << 31) <= v < (1 << 31):
                raise TraceError(f"SDP.S_LUT_{name}: {v} does not fit the 32-bit signed register")
            b.reg(unit, f"S_LUT_{name}_0", VALUE=v & 0xFFFFFFFF)
            continue
        if not -(1 << 37) <= v < (1 << 37):
            raise TraceError(f"CDP.S_LUT_{name}: {v} does not fit the 38-bit signed LOW/HIGH register pair")
        b.reg(unit, f"S_LUT_{name}_LOW_0", VALUE=v & 0xFFFFFFFF)
        b.reg(unit, f"S_LUT_{name}_HIGH_0", VALUE=(v >> 32) & 0x3F)
    for tag, t in (("LE", le), ("LO", lo)):
        b.reg(
            unit, f"S_LUT_{tag}_SLOPE_SCALE_0", UFLOW_SCALE=t.uflow_scale & 0xFFFF, OFLOW_SCALE=t.oflow_scale & 0xFFFF
        )
        b.reg(unit, f"S_LUT_{tag}_SLOPE_SHIFT_0", UFLOW_SHIFT=t.uflow_shift & 0x1F, OFLOW_SHIFT=t.oflow_shift & 0x1F)
