"""The components an NVDLA build is made of, each with its energy per action, leakage and area, from the
Accelergy project's component library (hwcomponents; docs/energy.md gives every model and source).

- MAC cell: `AladdinIntMAC` (Aladdin's 40 nm characterisation, scaled to the node by hwcomponents): an
  INT8 multiplier with a 32-bit adder, or, on builds with INT16/FP16, a 16-bit multiplier with a 48-bit
  adder (NVDLA computes one INT16/FP16 MAC on the multipliers of two INT8 MACs; hwcomponents has no
  floating-point MAC, so FP16 costs the 16-bit integer MAC: docs/energy.md).
- SRAMs: CACTI through hwcomponents-cacti: the CBUF banks (entry width x entries per bank), CACC's
  assembly buffer (atomic_k x 34-bit partial sums x 128 entries) and delivery buffer (atomic_k x 32 bits x
  128 entries), sized as unit_description.rst "Convolution Accumulator" gives nv_full's and scaled by
  atomic_k.
- Adders and multipliers: `AladdinAdder` / `AladdinMultiplier`: CACC's accumulators (34-bit, INT48 with
  INT16), SDP's ALU (32-bit) and multiplier (32 x 16), PDP's and CDP's element adders.
- DRAM: hwcomponents' device models (energy per access of the device's width).

Each distinct (node, shape) is computed once per process and kept on disk (`$XDG_CACHE_HOME/nvdla-sim/
components.json`), so a sweep calls CACTI only for shapes it has not seen.
"""

from __future__ import annotations

import gc
import json
import logging
import warnings
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata

from nvdla_sim.config import HwConfig
from nvdla_sim.errors import NvdlaError
from nvdla_sim.files import DiskCache
from nvdla_sim.precision import Precision

_PACKAGES = ("hwcomponents", "hwcomponents-cacti", "hwcomponents-library", "hwcomponents-neurosim")


@dataclass(frozen=True)
class Cost:
    """One component: energy per action (pJ; for an SRAM, a read of one word), leakage (uW), area (um^2)."""

    energy_pj: float
    leak_uw: float
    area_um2: float
    write_pj: float = 0.0  # an SRAM's write of one word


@dataclass(frozen=True)
class Components:
    """Every component of one build at its node."""

    node_nm: float
    mac_int8: Cost  # one INT8 MAC
    mac_wide: Cost | None  # one INT16/FP16 MAC (two INT8 MACs' multipliers), on builds that have them
    cbuf_bank: Cost  # one CBUF bank; energy per entry read / write
    cacc_assembly: Cost  # the assembly SRAM; energy per entry (atomic_k partial sums)
    cacc_delivery: Cost  # the delivery SRAM; energy per entry (atomic_k outputs)
    cacc_adder: Cost  # one accumulator adder (34-bit, 48-bit on INT16 builds)
    sdp_alu: Cost  # a 32-bit adder (SDP ALU, per element and stage)
    sdp_mul: Cost  # a 32 x 16 multiplier (SDP MUL)
    elem_adder: Cost  # a 32-bit adder (PDP/CDP per element)
    dram_read_pj_per_byte: float
    dram_write_pj_per_byte: float

    def mac(self, precision: Precision) -> Cost:
        if precision is Precision.INT8 or self.mac_wide is None:
            return self.mac_int8
        return self.mac_wide


@lru_cache(maxsize=1)  # the installed packages' versions: part of every cache key, read once
def versions() -> dict[str, str]:
    out = {}
    for p in _PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            raise NvdlaError(
                f"energy and area need the {p} package (the project's ./nvdla and ./run-tests install it; "
                "else pip install hwcomponents hwcomponents-cacti hwcomponents-library hwcomponents-neurosim)"
            ) from None
    return out


_DISK = DiskCache("components")  # each distinct (node, shape), kept between processes


def _query(kind: str, node_nm: float, **args: float) -> Cost:
    """One hwcomponents model, through the disk cache."""
    key = json.dumps([kind, node_nm, sorted(args.items()), versions()])

    def compute() -> list[float]:
        # hwcomponents-cacti leaves its config file open (a ResourceWarning when it is collected)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            got = list(_compute(kind, node_nm, **args))
            gc.collect()
        return got

    e, leak, area, w = _DISK.get(key, compute)
    return Cost(e, leak, area, w)


def _compute(kind: str, node_nm: float, **args: float) -> tuple[float, float, float, float]:
    """(energy pJ, leakage uW, area um^2, write pJ) of one model from hwcomponents (installed: _query
    checked the versions)."""
    for name in ("hwcomponents", "SRAM", "AladdinIntMAC", "AladdinAdder", "AladdinMultiplier"):
        logging.getLogger(name).setLevel(logging.WARNING)  # their INFO lines narrate every CACTI call
    import hwcomponents_library  # noqa: F401  (registers the Aladdin models)

    models = {m.__name__: m for m in _models()}
    node = node_nm * 1e-9
    if kind == "sram":
        from nvdla_sim.energy.cacti_build import ensure_cacti

        ensure_cacti()
        width, depth = int(args["width"]), int(args["depth"])
        m = models["SRAM"](tech_node=node, width=width, depth=depth, size=width * depth)
        return m.read().energy * 1e12, m.leak_power * 1e6, m.area * 1e12, m.write().energy * 1e12
    if kind == "mac":
        m = models["AladdinIntMAC"](
            tech_node=node, adder_width=int(args["adder_width"]), multiplier_width=int(args["multiplier_width"])
        )
        return m.compute().energy * 1e12, m.leak_power * 1e6, m.area * 1e12, 0.0
    if kind == "adder":
        m = models["AladdinAdder"](tech_node=node, width=int(args["width"]))
        return m.add().energy * 1e12, m.leak_power * 1e6, m.area * 1e12, 0.0
    if kind == "multiplier":
        m = models["AladdinMultiplier"](tech_node=node, width_a=int(args["width_a"]), width_b=int(args["width_b"]))
        return m.multiply().energy * 1e12, m.leak_power * 1e6, m.area * 1e12, 0.0
    if kind == "dram":
        m = models[str(args["device"])]()
        bytes_per_access = m.width / 8
        return m.read().energy * 1e12 / bytes_per_access, 0.0, 0.0, m.write().energy * 1e12 / bytes_per_access
    raise ValueError(kind)  # pragma: no cover - the kinds above are the only callers'


@lru_cache(maxsize=1)
def _models():
    import hwcomponents

    return tuple(hwcomponents.get_models())


def _dram(device: str) -> tuple[float, float]:
    c = _query("dram", 0, device=device)  # type: ignore[arg-type]
    return c.energy_pj, c.write_pj


@lru_cache(maxsize=256)
def components(hw: HwConfig) -> Components:
    """The components of `hw` at its technology node (hw.tech)."""
    node = hw.tech.node_nm
    k = hw.mac.atomic_k
    wide = any(p is not Precision.INT8 for p in hw.precisions)
    acc_bits = 48 if wide else 34
    dram_read, dram_write = _dram(hw.tech.dram_device)
    return Components(
        node_nm=node,
        mac_int8=_query("mac", node, adder_width=32, multiplier_width=8),
        mac_wide=_query("mac", node, adder_width=48, multiplier_width=16) if wide else None,
        cbuf_bank=_query("sram", node, width=hw.cbuf_entry_bytes * 8, depth=hw.cbuf_entries_per_bank),
        cacc_assembly=_query("sram", node, width=k * acc_bits, depth=128),
        cacc_delivery=_query("sram", node, width=k * 32, depth=128),
        cacc_adder=_query("adder", node, width=acc_bits),
        sdp_alu=_query("adder", node, width=32),
        sdp_mul=_query("multiplier", node, width_a=32, width_b=16),
        elem_adder=_query("adder", node, width=32),
        dram_read_pj_per_byte=dram_read,
        dram_write_pj_per_byte=dram_write,
    )
