"""Where each NVDLA register sits on the CSB bus: byte addresses per build's address map.

A unit's registers keep their offsets from the unit's base in every map; the bases differ (nv_small packs
its units from 0x1000, nv_full from 0x0). The table is generated from NVIDIA's firmware headers
(address_table.py, validation/nvdla_sw/register_addresses.py). Logs of the driver's register accesses give
byte addresses (NVIDIA's kernel-mode driver writes `base + offset`, nvdla/sw
kmd/port/linux/nvdla_core_callbacks.c) or word addresses (the traceplayer's `0xffff0000 | addr >> 2`); both
are read here, and an address that names no register is a one-line error.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from nvdla_sim.errors import TraceError
from nvdla_sim.registers import address_table

MAPS = address_table.BUILDS  # the address maps the table holds, by the build they come from
TRACEPLAYER_CSB = 0xFFFF  # the traceplayer's high half of a CSB word address (0xffff0000 | byte >> 2)


def byte_address(addr: int) -> int:
    """The byte address of a log's register address: the kernel-mode driver's byte address as it is, the
    traceplayer's word address 0xffff0000 | byte >> 2 converted."""
    return (addr & 0xFFFF) << 2 if addr >> 16 == TRACEPLAYER_CSB else addr


@dataclass(frozen=True)
class AddressMap:
    """One build's CSB address map: register (unit as the trace tests name it, e.g. NVDLA_CDMA) <-> byte address."""

    name: str
    registers: dict[int, tuple[str, str]]  # byte address -> (unit, register)
    addresses: dict[tuple[str, str], int]

    def register_at(self, addr: int, where: str) -> tuple[str, str]:
        """(unit, register) at byte address `addr`; `where` names the log line for the error."""
        try:
            return self.registers[addr]
        except KeyError:
            raise TraceError(
                f"{where}: address {addr:#x} is no NVDLA register in the {self.name} address map "
                f"(nvdla/sw kmd/firmware/include; [driver] address_map is one of {', '.join(MAPS)})"
            ) from None

    def address(self, unit: str, reg: str) -> int:
        try:
            return self.addresses[(unit, reg)]
        except KeyError:
            raise TraceError(f"{unit}.{reg} is no register of the {self.name} address map") from None


@functools.cache
def address_map(name: str) -> AddressMap:
    """The address map of build `name` (one of MAPS)."""
    if name not in MAPS:
        raise TraceError(f"no register address map {name!r}; maps: {', '.join(MAPS)}")
    col = MAPS.index(name)
    bases = {}
    for line in address_table.BASES.strip().splitlines():
        unit, *per_map = line.split()
        if per_map[col] != "-":
            bases[unit] = int(per_map[col], 16)
    registers: dict[int, tuple[str, str]] = {}
    for line in address_table.OFFSETS.strip().splitlines():
        unit, reg, off = line.split()
        if unit in bases:
            registers[bases[unit] + int(off, 16)] = (f"NVDLA_{unit}", reg)
    return AddressMap(name, registers, {v: k for k, v in registers.items()})
