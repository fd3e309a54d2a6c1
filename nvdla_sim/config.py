"""Hardware configuration: frozen dataclasses loaded from configs/*.toml with strict validation.

Every value in configs/ cites the nvdla/hw spec macro it comes from; derived quantities (CBUF entry
width, peak MACs per cycle, DRAM bytes per cycle) are computed properties, never stored twice.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib.resources
import json
import math
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from nvdla_sim.errors import ConfigError, check_int
from nvdla_sim.precision import Precision
from nvdla_sim.values import field_hash, state_without_hash

# The shipped configs: the repository's configs/ folder, installed as the package data nvdla_sim.configs
# (pyproject.toml maps the folder), so a wheel carries them and an editable checkout reads them in place.
CONFIG_PACKAGE = "nvdla_sim.configs"


def _is_pow2(v: int) -> bool:
    return v > 0 and (v & (v - 1)) == 0


def _check_int(section: str, name: str, value: Any, *, minimum: int = 1, pow2: bool = False) -> None:
    check_int(value, f"{section}.{name}", minimum=minimum, error=ConfigError)
    if pow2 and not _is_pow2(value):
        raise ConfigError(f"{section}.{name} must be a power of two, not {value}")


@dataclass(frozen=True)
class MacConfig:
    """CMAC array: atomic_c input channels x atomic_k kernels per cycle at INT8."""

    atomic_c: int
    atomic_k: int
    pipeline_cycles: int = 7

    def __post_init__(self) -> None:
        _check_int("mac", "atomic_c", self.atomic_c, minimum=2, pow2=True)
        _check_int("mac", "atomic_k", self.atomic_k, minimum=2, pow2=True)
        _check_int("mac", "pipeline_cycles", self.pipeline_cycles, minimum=0)


@dataclass(frozen=True)
class CbufConfig:
    """Convolution buffer: bank_count banks of bank_depth rows x bank_width_bytes."""

    bank_count: int
    bank_depth: int
    bank_width_bytes: int

    def __post_init__(self) -> None:
        _check_int("cbuf", "bank_count", self.bank_count, minimum=2, pow2=True)
        _check_int("cbuf", "bank_depth", self.bank_depth, pow2=True)
        _check_int("cbuf", "bank_width_bytes", self.bank_width_bytes, pow2=True)

    @property
    def bank_bytes(self) -> int:
        return self.bank_depth * self.bank_width_bytes

    @property
    def total_bytes(self) -> int:
        return self.bank_count * self.bank_bytes


@dataclass(frozen=True)
class CscConfig:
    """CSC's stripe lengths and the CACC delivery credits it holds, in output points (atomic ops). None: as
    branch master's RTL derives them from the MAC array (vmod/nvdla/csc/NV_NVDLA_CSC.h): lower CSC_ATOMK
    (atomic_k), upper CSC_ATOMK_MUL2 (2 x atomic_k), the image stripe CSC_IMG_STRIPE and the credits
    NVDLA_CC_CREDIT_SIZE both 2 x atomic_k, or 4 x atomic_k where atomic_c = 4 x atomic_k. Branch nvdlav1
    (nv_full) sets its own (configs/nv_full.toml)."""

    stripe_lower: int | None = None  # NV_NVDLA_CSC_sg.v lower_limit: the stripe between the two cases below
    stripe_upper: int | None = None  # upper_limit: while 2 x upper points are left; all of the rest once <= upper
    image_stripe: int | None = None  # both limits in image-input mode
    credit_atoms: int | None = None  # credit_cnt reset: output points CACC's delivery buffer holds

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) is not None:
                _check_int("csc", f.name, getattr(self, f.name))
        lo, up = self.stripe_lower, self.stripe_upper
        if lo is not None and up is not None and up not in (lo, 2 * lo):
            raise ConfigError(
                f"csc.stripe_upper must equal csc.stripe_lower or twice it (NV_NVDLA_CSC_sg.v), not {up} with {lo}"
            )


@dataclass(frozen=True)
class CaccConfig:
    """Convolution accumulator timing."""

    rmw_cycles: int = 11

    def __post_init__(self) -> None:
        _check_int("cacc", "rmw_cycles", self.rmw_cycles, minimum=0)


@dataclass(frozen=True)
class MemoryConfig:
    """DRAM (primary MEMIF / DBBIF) and optional on-chip SRAM (secondary MEMIF / SRAMIF)."""

    memory_atomic_bytes: int
    dram_width_bits: int
    dram_latency_cycles: int
    sram_width_bits: int = 0
    sram_latency_cycles: int = 0
    dram_bandwidth_gbs: float | None = None
    # AXI has independent read (AR/R) and write (AW/W) channels; a DRAM shares its bandwidth between
    # them, a testbench memory such as NVIDIA's AXIResponder (verif/verilator/nvdla.cpp) does not.
    separate_write_channel: bool = False
    # The build's PRIMARY_MEMIF_LATENCY, which sizes the RDMA latency FIFOs (projects.spec); None: the
    # same as dram_latency_cycles. A testbench memory faster than the build assumed keeps the build's FIFOs.
    fifo_latency_cycles: int | None = None
    # Beats a DMA read request may ask for (PRIMARY_MEMIF_MAX_BURST_LENGTH_1/4, SECONDARY_...): how many beats
    # one credit round trip of a streaming RDMA carries (sdp.operand_stream_cycles)
    max_burst_beats: int = 1
    sram_max_burst_beats: int = 1
    # NVDLA_MEM_ADDRESS_WIDTH (spec/defs/*.spec MEM_ADDRESS_WIDTH_32/64): what NVDLA can address at all
    address_bits: int = 64
    # The system's DRAM, not an NVDLA parameter (None: only the address width limits); models that do not
    # fit in min(DRAM, 2^address_bits) are refused by `nvdla generate`
    dram_size_gib: float | None = None
    # How the memories are timed (nvdla_sim/system/memory.py; MEMORY_MODELS): "fluid" (each memory one port
    # at its bandwidth and latency), "refresh" (the DRAM port also stops for all-bank refreshes) or "dram"
    # (the DRAM port at the rate a DRAM device sustains for each run's access mix: system/dram.py)
    model: str = "fluid"
    device: str | None = None  # dram: the DRAM device set (MEMORY_DEVICES: JEDEC speed bins as DRAMsim3 gives them)
    channels: int | None = None  # dram: its channels (of the device's bus each; e.g. 4 x 64-bit: 256-bit)
    refresh_interval_ns: float | None = None  # refresh: JEDEC tREFI (LPDDR4 JESD209-4: 3,904 ns; DDR4: 7,800 ns)
    refresh_ns: float | None = None  # refresh: JEDEC tRFCab (LPDDR4 8 Gb a channel: 280 ns; DDR4 8 Gb: 350 ns)

    def __post_init__(self) -> None:
        if not isinstance(self.separate_write_channel, bool):
            raise ConfigError(
                f"memory.separate_write_channel must be true or false, not {self.separate_write_channel!r}"
            )
        _check_int("memory", "memory_atomic_bytes", self.memory_atomic_bytes, pow2=True)
        _check_int("memory", "dram_width_bits", self.dram_width_bits, minimum=8, pow2=True)
        _check_int("memory", "dram_latency_cycles", self.dram_latency_cycles, minimum=0)
        _check_int("memory", "sram_width_bits", self.sram_width_bits, minimum=0)
        if self.sram_width_bits and not _is_pow2(self.sram_width_bits):
            raise ConfigError(
                f"memory.sram_width_bits must be 0 (no SRAMIF) or a power of two, not {self.sram_width_bits}"
            )
        _check_int("memory", "sram_latency_cycles", self.sram_latency_cycles, minimum=0)
        if self.address_bits not in (32, 64):
            raise ConfigError(
                f"memory.address_bits must be 32 or 64 (MEM_ADDRESS_WIDTH_32/64), not {self.address_bits!r}"
            )
        ds = self.dram_size_gib
        if ds is not None and (isinstance(ds, bool) or not isinstance(ds, int | float) or not 0 < ds < math.inf):
            raise ConfigError(f"memory.dram_size_gib must be a positive number of GiB, not {ds!r}")
        if self.fifo_latency_cycles is not None:
            _check_int("memory", "fifo_latency_cycles", self.fifo_latency_cycles, minimum=0)
        for name in ("max_burst_beats", "sram_max_burst_beats"):
            if getattr(self, name) not in (1, 4):
                raise ConfigError(
                    f"memory.{name} must be 1 or 4 (MEMIF_MAX_BURST_LENGTH_1/4), not {getattr(self, name)!r}"
                )
        bw = self.dram_bandwidth_gbs
        if bw is not None and (isinstance(bw, bool) or not isinstance(bw, int | float) or bw <= 0):
            raise ConfigError(f"memory.dram_bandwidth_gbs must be a positive number of GB/s, not {bw!r}")
        self._check_model()

    def _check_model(self) -> None:
        if self.model not in MEMORY_MODELS:
            raise ConfigError(f"memory.model {self.model!r} is not one of {', '.join(MEMORY_MODELS)}")
        given = [n for n in ("refresh_interval_ns", "refresh_ns") if getattr(self, n) is not None]
        if self.model != "refresh" and given:
            raise ConfigError(f"memory.{given[0]} is the refresh model's; memory.model is {self.model!r}")
        own = [n for n in ("device", "channels") if getattr(self, n) is not None]
        if self.model != "dram":
            if own:
                raise ConfigError(f"memory.{own[0]} is the dram model's; memory.model is {self.model!r}")
            if self.model == "fluid":
                return
        if self.model == "dram":
            if self.device not in MEMORY_DEVICES:
                raise ConfigError(
                    f"memory.device {self.device!r} is not one of {', '.join(MEMORY_DEVICES)} "
                    "(memory.model dram needs one)"
                )
            ch = self.channels
            if isinstance(ch, bool) or not isinstance(ch, int) or not 1 <= ch <= 64:
                raise ConfigError(f"memory.channels must be a whole number of DRAM channels from 1 to 64, not {ch!r}")
            if self.dram_bandwidth_gbs is not None:
                raise ConfigError(
                    "memory.dram_bandwidth_gbs is the fluid port's; under memory.model dram the bandwidth is the "
                    "device's (memory.device x memory.channels)"
                )
            holds = MEMORY_DEVICES[self.device] * ch
            if self.dram_size_gib is not None and self.dram_size_gib > holds:
                raise ConfigError(
                    f"memory.dram_size_gib {self.dram_size_gib:g} is more than memory.channels ({ch}) of "
                    f"{self.device} hold ({holds:g} GiB)"
                )
            return
        for name in ("refresh_interval_ns", "refresh_ns"):
            v = getattr(self, name)
            if v is None:
                raise ConfigError(f"memory.model refresh needs memory.{name} (JEDEC tREFI and tRFCab, in ns)")
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < math.inf:
                raise ConfigError(f"memory.{name} must be a finite number of ns above 0, not {v!r}")
        if self.refresh_ns * 2 >= self.refresh_interval_ns:
            raise ConfigError(
                f"memory.refresh_ns ({self.refresh_ns:g}) must be under half of memory.refresh_interval_ns "
                f"({self.refresh_interval_ns:g}): a refresh takes a small part of the interval (JEDEC: under 10%)"
            )

    @property
    def has_sram(self) -> bool:
        return self.sram_width_bits > 0

    @property
    def device_label(self) -> str:
        """The dram model's DRAM as runs name it ("LPDDR4-2400 x 2"); "" under the other models."""
        return f"{self.device} x {self.channels}" if self.model == "dram" else ""


@dataclass(frozen=True)
class SdpConfig:
    """Single Data Point processor throughputs in elements/cycle (0 = sub-unit absent)."""

    bs_throughput: int
    bn_throughput: int
    ew_throughput: int
    lut: bool
    # Memory beats each SDP operand RDMA (B/N/E) may have in flight: its latency FIFO and the MCIF credit
    # (vmod/include/NV_NVDLA_MCIF_define.vh tieoff_depth_sdp_{b,n,e}, from spec/defs/projects.spec
    # max(4, ceil(PRIMARY_MEMIF_LATENCY x throughput / beat bytes))). nv_small's 160 (measured: a fused
    # residual requested 168 beats at once) unless a config states its build's.
    operand_fifo_beats: int = 160
    # The E-RDMA's, where a build sizes it apart from the B/N-RDMAs' (nvdlav1's nv_full: 80 against 160,
    # NV_NVDLA_MCIF_READ_ig.v tieoff_lat_fifo_depth); None: operand_fifo_beats
    eltwise_fifo_beats: int | None = None

    def __post_init__(self) -> None:
        _check_int("sdp", "operand_fifo_beats", self.operand_fifo_beats, minimum=4)
        if self.eltwise_fifo_beats is not None:
            _check_int("sdp", "eltwise_fifo_beats", self.eltwise_fifo_beats, minimum=4)
        _check_int("sdp", "bs_throughput", self.bs_throughput, pow2=True)
        _check_int("sdp", "bn_throughput", self.bn_throughput, minimum=0)
        _check_int("sdp", "ew_throughput", self.ew_throughput, minimum=0)
        if not isinstance(self.lut, bool):
            raise ConfigError(f"sdp.lut must be true or false, not {self.lut!r}")
        if self.lut and self.ew_throughput == 0:
            raise ConfigError("sdp.lut = true needs the EW sub-unit (sdp.ew_throughput > 0): the LUT lives in SDP_Y")

    @property
    def erdma_fifo_beats(self) -> int:
        """Beats the E-RDMA may have in flight."""
        return self.operand_fifo_beats if self.eltwise_fifo_beats is None else self.eltwise_fifo_beats

    @property
    def max_throughput(self) -> int:
        """NVDLA_SDP_MAX_THROUGHPUT = max(EW, BN, BS): the CACC->SDP element rate."""
        return max(self.bs_throughput, self.bn_throughput, self.ew_throughput)


@dataclass(frozen=True)
class PdpConfig:
    throughput: int

    def __post_init__(self) -> None:
        _check_int("pdp", "throughput", self.throughput)


@dataclass(frozen=True)
class CdpConfig:
    throughput: int

    def __post_init__(self) -> None:
        _check_int("cdp", "throughput", self.throughput)


@dataclass(frozen=True)
class TimingConfig:
    """Fixed latencies of one hardware operation around its streaming work, in core cycles.

    Each is measured on NVIDIA's nv_small RTL (validation/data/nvdla_rtl_nv_small.json, see
    docs/modelling.md "Operation latencies"); configs without a measurement keep the nv_small values.
    """

    launch_cycles: int = 20  # D_OP_ENABLE write -> first DMA read request (SDP/PDP/CDP RDMA)
    conv_launch_cycles: int = 29  # D_OP_ENABLE of CDMA -> its first read request
    # Rubik's D_OP_ENABLE -> its first read request: 22 on all 30 reshape programs on nv_full's RTL (run.log's
    # AXI requests; docs/validation.md 5k); Rubik is nv_full's only
    rubik_launch_cycles: int = 22
    # BDMA's CFG_LAUNCH0/1 write -> its first read request: 20 on all four BDMA programs on nv_full's RTL (the
    # testbench's AXI log; docs/validation.md 5k); BDMA is nv_full's only
    bdma_launch_cycles: int = 20
    completion_cycles: int = 11  # last output write beat -> rise of the interrupt line
    # interrupt -> op enable of the next layer in the same register group: the driver's interrupt service
    # and register writes (nv_small RTL testbench, nvdla.cpp driver: 265 cycles interrupt to first read)
    driver_reprogram_cycles: int = 236
    conv_pipeline_cycles: int = 44  # CBUF data in -> first result written: CSC, CMAC, CACC, SDP, WDMA
    sdp_pipeline_cycles: int = 27  # read data in -> result written (SDP_RDMA -> SDP -> WDMA)
    # more cycles through SDP when its Y stage (element-wise ALU/MUL, LUT) is in use: 0 where measured on
    # master's builds (their Y passes time within 3.5% without it), nvdlav1's nv_full measured in its config
    sdp_y_pipeline_cycles: int = 0
    pdp_pipeline_cycles: int = 35  # likewise through PDP_RDMA -> PDP
    cdp_pipeline_cycles: int = 56  # likewise through CDP_RDMA -> CDP (the LRN window and LUT)
    # Convolution sequencing measured on the nv_small RTL with our own programs (docs/modelling.md
    # "Convolution delivery"); neutral by default because no RTL of the other builds was measured:
    cacc_atom_gap_cycles: int = 0  # idle cycles per output atom: CACC reads a delivery-buffer entry only when sent
    # the CSC -> CACC latency, seen as idle delivery where two stripes overflow CACC's credits (csc.stripe_gaps)
    cacc_stripe_gap_cycles: int = 0
    conv_input_before_compute: bool = False  # CSC's first atomic op waits for CDMA's whole input fetch
    # measured on nv_small_256_full (docs/validation.md 5e); the RTL source has it on every build, but
    # neutral by default until measured on one where it limits (cdma.feature_ingest_bytes_per_cycle):
    cdma_entry_blocked_cycles: int = 0  # CDMA feature-data responses blocked per CBUF entry staged out
    # From a read burst's last beat to the request that reuses its credit (an SDP operand RDMA: the beat
    # through the latency FIFO to SDP, whose pop returns the credit, and the next request out; dram.
    # credit_bytes_per_cycle). Measured on nv_small_256_full's E-RDMA, 14 cycles on all 252 bursts of
    # attn_o and ffn2 (docs/validation.md 5e); not measured on another build.
    rdma_credit_reuse_cycles: int = 14
    # A later convolution of a chain (ping-pong register groups) with SDP operand streams: SDP's RDMA runs
    # one layer at a time (NV_NVDLA_SDP_brdma.v op_load = op_en & !layer_process; a per-kernel stream is done
    # only when SDP has taken the layer's last pixel), so its streams start when the previous layer's are
    # done, sdp_rdma_handoff_cycles before that layer's last atom leaves CACC; and SDP takes the layer's
    # first atom sdp_operand_head_cycles after every stream's first sdp.RDMA_UNPACK_BEATS beats are in.
    # Measured on nv_small's RTL (the trained ViT's chained layers, validation/data/nvdla_rtl_vit_digits.json:
    # the next layer's first write 75 / 87 / 85 cycles after the previous one's last; docs/validation.md 5i)
    sdp_rdma_handoff_cycles: int = 12
    sdp_operand_head_cycles: int = 34

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.type in (bool, "bool"):
                if not isinstance(getattr(self, f.name), bool):
                    raise ConfigError(f"timing.{f.name} must be true or false, not {getattr(self, f.name)!r}")
            else:
                _check_int("timing", f.name, getattr(self, f.name), minimum=0)


# Technology nodes the energy and area models accept (nm): the range over which hwcomponents' scaling and
# CACTI give monotonic costs (an SRAM's read energy at 130 nm comes out below its 65 nm value).
TECH_NODES_NM = (5, 65)
# Off-chip memories with an energy model in hwcomponents (its DRAM component names).
DRAM_DEVICES = ("LPDDR4", "LPDDR", "DDR3", "HBM2", "HBM3", "HBM4")


@dataclass(frozen=True)
class TechConfig:
    """What the energy and area models build the design from (docs/energy.md)."""

    node_nm: float = 16  # process node; the primer's table gives 28 nm and 16 nm
    dram_device: str = "LPDDR4"  # the off-chip memory whose energy per access a run's DRAM bytes cost

    def __post_init__(self) -> None:
        lo, hi = TECH_NODES_NM
        n = self.node_nm
        if isinstance(n, bool) or not isinstance(n, int | float) or not lo <= n <= hi:
            raise ConfigError(f"tech.node_nm must be a number of nanometres in {lo}..{hi}, not {n!r}")
        if self.dram_device not in DRAM_DEVICES:
            raise ConfigError(f"tech.dram_device {self.dram_device!r} is not one of {', '.join(DRAM_DEVICES)}")


class HostOp(enum.Enum):
    """The kinds of work the mapper gives the host, priced by the host models (system/host.py); their values
    are what [host.ns_per_element] names."""

    SOFTMAX = "softmax"  # per score computed: max, exp, sum, divide
    LAYERNORM = "layernorm"  # per element: mean, variance, normalise, affine
    ACTIVATION = "activation"  # per element: GELU or another function NVDLA's LUT would take
    ELEMENTWISE = "elementwise"  # per element: a multiply without SDP's EW unit
    ROTARY = "rotary"  # per element: x cos + rotate_half(x) sin
    GATHER = "gather"  # embedding rows: bytes only
    COPY = "copy"  # re-layouts, scatters, transposes, im2col: bytes only
    FALLBACK = "fallback"  # an op NVDLA cannot run (ONNX), with its own FLOPs per element


# The memory models a config can choose ([memory] model; nvdla_sim/system/memory.py)
MEMORY_MODELS = ("fluid", "refresh", "dram")

# The DRAM devices the dram memory model times ([memory] device; nvdla_sim/system/dram.py DEVICES), with the
# GiB one channel of each holds (its ranks, banks, rows and columns there: a test holds the two alike)
MEMORY_DEVICES = {"LPDDR4-2400": 8, "DDR4-3200": 8, "HBM2-2000": 1}

# The interconnect models a config can choose ([interconnect] model; nvdla_sim/system/interconnect.py)
INTERCONNECT_MODELS = ("direct", "fabric")

# The host models a config can choose ([host] model; nvdla_sim/system/host.py) and the kinds of host work
# they price (HostOp there)
HOST_MODELS = ("roofline", "per_element")
HOST_WORK = tuple(op.value for op in HostOp)
# what a per_element host must be told (gather and copy are byte-bound, fallback ops bring their FLOPs)
HOST_WORK_TIMED = ("softmax", "layernorm", "activation", "elementwise", "rotary")


@dataclass(frozen=True)
class HostProfile:
    """A named host CPU: its model's figures ([host] fields) and where each comes from."""

    model: str
    gflops: float  # roofline: over the work's FLOPs; per_element: over a fallback op's own FLOPs
    mem_gbs: float
    overhead_us: float
    active_power_w: float
    ns_per_element: tuple[tuple[str, float], ...]
    source: str


# The host profiles a config can name ([host] profile; the CLI's `nvdla map --host PROFILE`); a config's own
# [host] values override the profile's one by one. docs/modelling.md, "The host".
HOST_PROFILES: dict[str, HostProfile] = {
    # the figures assumed since session 1 for a few-core embedded CPU with NEON; its power: four Cortex-A72
    # cores at 2.3 GHz under a power virus draw 3.7 W above idle (Kirin 950, AnandTech's Kirin 960 review,
    # 2017, "CPU Power Consumption"), a CPU of this class
    "assumed_embedded": HostProfile(
        "roofline", 20.0, 10.0, 10.0, 3.7, (),
        "assumed, not measured: a few-core embedded CPU with NEON (20 GFLOP/s, 10 GB/s, 10 us a hand-off); "
        "power: four Cortex-A72 at 2.3 GHz, 3.7 W (AnandTech, Kirin 960 review, 2017)",
    ),
    # this project's machine, measured by benchmarks/bench_host.py on 2026-12-07
    # (validation/data/host_x86_vm.json): the host kernels in scalar C at -O2 on one core of a 2-core AMD
    # EPYC VM; gflops is LayerNorm's 8 FLOPs an element at its measured time (for fallback ops); the
    # hand-off is a thread woken through a pipe (the interrupt's own path and cache maintenance not
    # included); its power is not measured: the assumed profile's
    "x86_vm_measured": HostProfile(
        "per_element", round(8 / 3.143, 2), 23.0, 21.61, 3.7,
        (("activation", 23.816), ("elementwise", 0.355), ("layernorm", 3.143), ("rotary", 0.507),
         ("softmax", 5.27)),
        "measured on this project's 2-core AMD EPYC VM by benchmarks/bench_host.py, 2026-12-07 "
        "(validation/data/host_x86_vm.json): scalar C kernels, one core; power not measured (3.7 W assumed)",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class HostConfig:
    """The host CPU beside NVDLA, a system part rather than an NVDLA parameter: which model prices the work
    the mapper leaves to it (softmax, LayerNorm, gathers, copies, fallbacks; nvdla_sim/system/host.py) and
    that model's figures, from a named profile (HOST_PROFILES, each with its source) whose values a config
    may override one by one (ns_per_element as a whole table). The default profile is assumed, not measured
    (docs/modelling.md, "The host")."""

    profile: str = "assumed_embedded"  # HOST_PROFILES
    model: str | None = None  # HOST_MODELS; None: the profile's (so for every field below)
    gflops: float | None = None  # roofline: sustained 1e9 FLOP/s over the work's FLOPs (a fallback op's too)
    mem_gbs: float | None = None  # sustained 1e9 bytes/s over the bytes the work reads and writes
    overhead_us: float | None = None  # one hand-off: interrupt, cache maintenance, the call
    active_power_w: float | None = None  # its power while it works (energy: this x its busy time)
    # per_element: each kind of work's time per element in ns ([host.ns_per_element] softmax = 4.1, ...)
    ns_per_element: tuple[tuple[str, float], ...] | None = None

    @property
    def source(self) -> str:
        """Where the profile's figures come from; a config's own values are its own."""
        p = HOST_PROFILES[self.profile]
        own = [f for f in ("model", "gflops", "mem_gbs", "overhead_us", "active_power_w", "ns_per_element")
               if getattr(self, f) != getattr(p, f)]  # fmt: skip
        return p.source + (f"; the config's own {', '.join(own)}" if own else "")

    def __post_init__(self) -> None:
        if self.profile not in HOST_PROFILES:
            raise ConfigError(f"host.profile {self.profile!r} is not one of {', '.join(HOST_PROFILES)}")
        profile = HOST_PROFILES[self.profile]
        if self.ns_per_element is None and self.model not in (None, profile.model):
            object.__setattr__(self, "ns_per_element", ())  # another model than the profile's: its own table
        for name in ("model", "gflops", "mem_gbs", "overhead_us", "active_power_w", "ns_per_element"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, getattr(profile, name))
        if self.model not in HOST_MODELS:
            raise ConfigError(f"host.model {self.model!r} is not one of {', '.join(HOST_MODELS)}")
        for name in ("gflops", "mem_gbs"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < math.inf:
                raise ConfigError(f"host.{name} must be a finite number above 0, not {v!r}")
        for name in ("overhead_us", "active_power_w"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < math.inf:
                raise ConfigError(f"host.{name} must be a finite number >= 0, not {v!r}")
        table = self.ns_per_element
        if isinstance(table, dict):
            table = tuple(sorted(table.items()))
        elif not isinstance(table, tuple | list) or not all(isinstance(p, tuple | list) and len(p) == 2 for p in table):
            raise ConfigError(f"host.ns_per_element must be a table of work kinds and ns, not {table!r}")
        table = tuple(sorted((str(k), v) for k, v in table))  # a list or a dict: the same config
        object.__setattr__(self, "ns_per_element", table)
        for k, v in table:
            if k not in HOST_WORK:
                raise ConfigError(f"host.ns_per_element.{k} is not a kind of host work; kinds: {', '.join(HOST_WORK)}")
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < math.inf:
                raise ConfigError(f"host.ns_per_element.{k} must be a finite number of ns >= 0, not {v!r}")
        if self.model == "per_element":
            missing = [k for k in HOST_WORK_TIMED if k not in dict(table)]
            if missing:
                raise ConfigError(f"host.model per_element needs host.ns_per_element for {', '.join(missing)}")
        elif table:
            raise ConfigError(f"host.ns_per_element is the per_element model's; host.model is {self.model!r}")


# How a host drives NVDLA's registers, per named profile: (cycles a CSB register write takes, cycles a CSB
# register read takes, cycles from an operation's interrupt to the driver's first access after it), in core
# clocks, and the interrupt reaction's host time in microseconds (converted at the config's clock).
# program/sequence.py replays a driver's log with them (docs/driver_programs.md).
DRIVER_PROFILES: dict[str, tuple[float, float, float]] = {
    # NVIDIA's Verilator testbench (nvdla/hw verif/verilator/nvdla.cpp, CSBMaster): fitted over the 74
    # committed nv_small trace tests (validation/data/nvdla_rtl_nv_small.json; first CSB write to the last
    # op enable, against each test's writes and polls; `python -m nvdla_validation.nvdla_rtl.csb_pace HW_SRC`):
    # 2.25 cycles a write, 19.9 a
    # read (a poll: request, response, compare), largest error 2.1 cycles. It polls the interrupt status
    # once the line rises, so the reads in the log are the whole reaction: no further interrupt cost.
    "testbench": (2.25, 19.9, 0.0),
    # Linux's kernel-mode driver on this project's 2-core AMD EPYC VM: its reaction to each interrupt is a
    # thread woken from another context (the IRQ handler completes the waiting submitter, which runs
    # dla_process_events), measured there as 21.61 us (benchmarks/bench_host.py, validation/data/
    # host_x86_vm.json: handoff_us); the register accesses' NVDLA side as the testbench's (a SoC's MMIO path
    # adds its own, not measured here)
    "linux_x86_vm": (2.25, 19.9, 0.0),
}
# each profile's interrupt reaction in host microseconds, converted at the config's clock (DriverConfig.costs_at)
DRIVER_INTERRUPT_US: dict[str, float] = {"testbench": 0.0, "linux_x86_vm": 21.61}


@dataclass(frozen=True)
class InterconnectConfig:
    """What lies between NVDLA's DRAM interface (DBBIF) and the memory controller, a system part
    (nvdla_sim/system/interconnect.py): "direct" (the port wired to the controller: every shipped config, as
    NVIDIA's testbench has it) or "fabric" (a SoC's interconnect: hop_cycles each way added to every read's
    round trip, and its data path of width_bits at NVDLA's clock capping the rate). A fabric's figures are the
    system's, not NVDLA's: no default, the config gives them."""

    model: str = "direct"  # INTERCONNECT_MODELS
    hop_cycles: int | None = None  # fabric: NVDLA clocks from DBBIF to the controller, each way
    width_bits: int | None = None  # fabric: its data path, bits a cycle of NVDLA's clock

    def __post_init__(self) -> None:
        if self.model not in INTERCONNECT_MODELS:
            raise ConfigError(f"interconnect.model {self.model!r} is not one of {', '.join(INTERCONNECT_MODELS)}")
        given = [n for n in ("hop_cycles", "width_bits") if getattr(self, n) is not None]
        if self.model == "direct":
            if given:
                raise ConfigError(f"interconnect.{given[0]} is the fabric model's; interconnect.model is 'direct'")
            return
        for name in ("hop_cycles", "width_bits"):
            if getattr(self, name) is None:
                raise ConfigError(f"interconnect.{name} is required by the fabric model (the system's figure)")
        _check_int("interconnect", "hop_cycles", self.hop_cycles, minimum=0)
        _check_int("interconnect", "width_bits", self.width_bits, minimum=8, pow2=True)


@dataclass(frozen=True)
class DriverConfig:
    """How the host programs NVDLA and reacts to its interrupts (a system part; issue 57): the CSB address
    map its register logs use, and the costs of a register write, a register read and an interrupt from a
    named profile (DRIVER_PROFILES), each of which a config may override."""

    profile: str = "testbench"
    # nvdla/sw kmd/firmware/include: opendla_initial.h (nv_full and the other nvdlav1 builds) or
    # opendla_small.h (nv_small), registers.addresses.MAPS
    address_map: str = "nv_full"
    csb_write_cycles: float | None = None  # None: the profile's
    csb_read_cycles: float | None = None
    interrupt_cycles: float | None = None

    def __post_init__(self) -> None:
        from nvdla_sim.registers.addresses import MAPS

        if self.profile not in DRIVER_PROFILES:
            raise ConfigError(f"driver.profile {self.profile!r} is not one of {', '.join(DRIVER_PROFILES)}")
        if self.address_map not in MAPS:
            raise ConfigError(f"driver.address_map {self.address_map!r} is not one of {', '.join(MAPS)}")
        for name in ("csb_write_cycles", "csb_read_cycles", "interrupt_cycles"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < math.inf):
                raise ConfigError(f"driver.{name} must be a finite number of cycles >= 0, not {v!r}")

    def costs_at(self, clock_mhz: float) -> tuple[float, float, float]:
        """(write, read, interrupt) cycles of a `clock_mhz` core: the profile's (its interrupt reaction's
        microseconds converted), overridden where the config gives a value."""
        write, read, irq = DRIVER_PROFILES[self.profile]
        profile = (write, read, irq + DRIVER_INTERRUPT_US.get(self.profile, 0.0) * clock_mhz)
        given = (self.csb_write_cycles, self.csb_read_cycles, self.interrupt_cycles)
        return tuple(p if v is None else float(v) for v, p in zip(given, profile, strict=True))


_SECTIONS: dict[str, type] = {
    "mac": MacConfig,
    "cbuf": CbufConfig,
    "csc": CscConfig,
    "cacc": CaccConfig,
    "memory": MemoryConfig,
    "sdp": SdpConfig,
    "pdp": PdpConfig,
    "cdp": CdpConfig,
    "timing": TimingConfig,
    "tech": TechConfig,
    "host": HostConfig,
    "driver": DriverConfig,
    "interconnect": InterconnectConfig,
}


@dataclass(frozen=True)
class HwConfig:
    """One NVDLA build. Make variants with `dataclasses.replace` or `HwConfig.with_values`."""

    __hash__ = field_hash  # computed once: these key the simulator's caches (nvdla_sim.values)
    __getstate__ = state_without_hash

    name: str
    clock_mhz: float
    precisions: tuple[Precision, ...]
    mac: MacConfig
    cbuf: CbufConfig
    memory: MemoryConfig
    sdp: SdpConfig
    pdp: PdpConfig
    cdp: CdpConfig
    csc: CscConfig = CscConfig()
    cacc: CaccConfig = CaccConfig()
    timing: TimingConfig = TimingConfig()
    tech: TechConfig = TechConfig()
    host: HostConfig = HostConfig()  # the host CPU beside NVDLA (a system part)
    driver: DriverConfig = DriverConfig()  # how the host programs NVDLA's registers (a system part)
    interconnect: InterconnectConfig = InterconnectConfig()  # between DBBIF and the memory controller (a system part)
    bdma: bool = False  # bridge DMA present (memory-to-memory copies on the accelerator)
    rubik: bool = False  # Rubik present (the reshape engine: contract, split, merge; spec RUBIK_ENABLE)
    weight_compression: bool = False  # CDMA reads compressed weights (values + WMB + WGS)

    def __post_init__(self) -> None:
        for flag in ("bdma", "rubik", "weight_compression"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"{flag} must be true or false, not {getattr(self, flag)!r}")
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"name must be a non-empty string, not {self.name!r}")
        c = self.clock_mhz
        if isinstance(c, bool) or not isinstance(c, int | float) or not 0 < c < math.inf:
            raise ConfigError(f"clock_mhz must be a finite number of MHz above 0, not {c!r}")
        if not self.precisions:
            raise ConfigError("precisions must list at least one of int8, int16, fp16")
        if self.cbuf.bank_bytes < self.cbuf_entry_bytes:
            raise ConfigError(
                f"cbuf bank of {self.cbuf.bank_bytes} B (bank_depth x bank_width_bytes) is too small for one "
                f"CBUF entry of {self.cbuf_entry_bytes} B (mac.atomic_c x widest precision); enlarge the bank"
            )
        if self.cacc_credit_atoms < max(*self.stripe_limits, self.image_stripe):
            raise ConfigError(
                f"csc.credit_atoms ({self.cacc_credit_atoms}) must hold the longest stripe (stripe limits "
                f"{self.stripe_limits}, image stripe {self.image_stripe}), or CSC would wait for ever"
            )
        if self.memory.memory_atomic_bytes > self.cbuf_entry_bytes:
            raise ConfigError(
                f"memory.memory_atomic_bytes ({self.memory.memory_atomic_bytes}) must not exceed the CBUF entry "
                f"({self.cbuf_entry_bytes} B)"
            )

    # ---- derived values (cached_property: the config is frozen, and the tiling search asks millions of times)
    @functools.cached_property
    def max_element_bytes(self) -> int:
        return max(p.bytes for p in self.precisions)

    @functools.cached_property
    def cbuf_entry_bytes(self) -> int:
        """Logical CBUF entry = one atomic-C slice at the widest precision (projects.spec CBUF_ENTRY_WIDTH)."""
        return self.mac.atomic_c * self.max_element_bytes

    @functools.cached_property
    def cbuf_entries_per_bank(self) -> int:
        return self.cbuf.bank_bytes // self.cbuf_entry_bytes

    @property
    def cbuf_bytes(self) -> int:
        return self.cbuf.total_bytes

    def check_precision(self, precision: Precision) -> None:
        if precision not in self.precisions:
            valid = ", ".join(p.value for p in self.precisions)
            raise ConfigError(f"{self.name} does not support {precision.value}; supported: {valid}")

    def kernels_per_atomic(self, precision: Precision) -> int:
        """Kernels computed per atomic op: atomic_k at int8, atomic_k/2 at int16/fp16 (the int8 split)."""
        self.check_precision(precision)
        return self.mac.atomic_k if precision is Precision.INT8 else self.mac.atomic_k // 2

    @property
    def stripe_limits(self) -> tuple[int, int]:
        """(lower, upper) stripe lengths CSC cuts output points into (CscConfig; units/csc.py stripe_lengths)."""
        k = self.mac.atomic_k
        lo = self.csc.stripe_lower if self.csc.stripe_lower is not None else k
        return lo, self.csc.stripe_upper if self.csc.stripe_upper is not None else 2 * k

    @property
    def _csc_multiple(self) -> int:
        """NV_NVDLA_CSC.h: 4 x atomic_k where atomic_c / atomic_k = 4 (NVDLA_CC_ATOMC_DIV_ATOMK), else 2."""
        return 4 if self.mac.atomic_c == 4 * self.mac.atomic_k else 2

    @property
    def image_stripe(self) -> int:
        s = self.csc.image_stripe
        return s if s is not None else self._csc_multiple * self.mac.atomic_k

    @property
    def cacc_credit_atoms(self) -> int:
        """Output points CACC's delivery buffer holds: CSC starts a stripe's last channel op only with that
        many credits free for it (NV_NVDLA_CSC_sg.v credit_ready)."""
        c = self.csc.credit_atoms
        return c if c is not None else self._csc_multiple * self.mac.atomic_k

    def peak_macs_per_cycle(self, precision: Precision) -> int:
        return self.mac.atomic_c * self.kernels_per_atomic(precision)

    @property
    def dram_bytes_per_cycle(self) -> float:
        """Sustainable DRAM bytes/cycle: interface width, capped by dram_bandwidth_gbs when given."""
        width = self.memory.dram_width_bits / 8
        if self.memory.dram_bandwidth_gbs is None:
            return width
        return min(width, self.memory.dram_bandwidth_gbs * 1e3 / self.clock_mhz)

    @property
    def notes(self) -> list[str]:
        """Values the model does not take as given, each named with what it uses instead (printed by the
        CLI as warnings, kept in reports and sweep rows)."""
        out = []
        bw = self.memory.dram_bandwidth_gbs
        carried = self.memory.dram_width_bits / 8 * self.clock_mhz / 1e3  # GB/s the interface carries
        if bw is not None and bw > carried:
            out.append(
                f"memory.dram_bandwidth_gbs {bw:g} GB/s is more than the {self.memory.dram_width_bits}-bit DRAM "
                f"interface carries at {self.clock_mhz:g} MHz ({carried:g} GB/s); the model uses {carried:g} GB/s "
                "(widen memory.dram_width_bits to use more)"
            )
        return out

    @property
    def sram_bytes_per_cycle(self) -> float:
        return self.memory.sram_width_bits / 8

    @property
    def fingerprint(self) -> str:
        """Short stable identity for report headers and cache keys, e.g. nv_full_c64k32_cbuf512k."""
        kib = self.cbuf_bytes // 1024
        base = f"{self.name}_c{self.mac.atomic_c}k{self.mac.atomic_k}_cbuf{kib}k"
        extra = []
        if self.memory.dram_bandwidth_gbs is not None:
            extra.append(f"bw{self.memory.dram_bandwidth_gbs:g}")
        if self.memory.model == "dram":
            extra.append(f"{self.memory.device.lower()}x{self.memory.channels}")
        extra.append(f"{self.clock_mhz:g}mhz")
        return base + "_" + "_".join(extra)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "clock_mhz": self.clock_mhz,
            "precisions": [p.value for p in self.precisions],
            "bdma": self.bdma,
            "rubik": self.rubik,
            "weight_compression": self.weight_compression,
        }
        for sec in _SECTIONS:
            out[sec] = dataclasses.asdict(getattr(self, sec))
        return out

    def to_toml(self) -> str:
        """The config as a TOML file that loads back to an equal HwConfig (load_config_file): every
        top-level key and section; a value left unset (None) is left out, a table of pairs
        (host.ns_per_element) is written as a sub-table."""

        def value(v: Any) -> str:
            if isinstance(v, bool):
                return str(v).lower()
            if isinstance(v, str):
                return json.dumps(v)
            if isinstance(v, list | tuple):
                return "[" + ", ".join(value(x) for x in v) + "]"
            return repr(v)

        data = self.to_dict()
        lines = [f"{k} = {value(v)}" for k, v in data.items() if not isinstance(v, dict)]
        for sec, vals in data.items():
            if not isinstance(vals, dict):
                continue
            lines.append(f"[{sec}]")
            tables = []
            for k, v in vals.items():
                if v is None:
                    continue
                if isinstance(v, tuple | list) and v and all(isinstance(p, tuple | list) and len(p) == 2 for p in v):
                    tables.append((k, v))
                elif not (isinstance(v, tuple | list) and not v):  # an empty table of pairs: none given
                    lines.append(f"{k} = {value(v)}")
            for k, pairs in tables:
                lines.append(f"[{sec}.{k}]")
                lines += [f"{name} = {value(x)}" for name, x in pairs]
        return "\n".join(lines) + "\n"

    def with_values(self, **changes: Any) -> HwConfig:
        """Variant with dotted overrides, e.g. with_values(**{"mac.atomic_c": 32, "clock_mhz": 800})."""
        return config_from_dict(self.changed_dict(changes), source=f"{self.name} (modified)")

    def changed_dict(self, changes: dict[str, Any]) -> dict[str, Any]:
        """to_dict with dotted overrides (with_values), not yet validated."""
        data = self.to_dict()
        # a host profile's figures are resolved values in to_dict: a new profile (or model) brings its own
        # figures (or table) unless the change gives them
        if "host.profile" in changes:
            for f in ("model", "gflops", "mem_gbs", "overhead_us", "active_power_w", "ns_per_element"):
                data["host"][f] = None
        if "host.model" in changes and "host.ns_per_element" not in changes:
            data["host"]["ns_per_element"] = None
        for key, value in changes.items():
            sec, _, leaf = key.partition(".")
            if leaf:
                if sec not in _SECTIONS or leaf not in {f.name for f in fields(_SECTIONS[sec])}:
                    raise ConfigError(f"unknown config field {key!r}; sections: {', '.join(_SECTIONS)}")
                data[sec][leaf] = value
            elif key in data:
                data[key] = value
            else:
                raise ConfigError(f"unknown config field {key!r}")
        return data


def config_from_dict(data: dict[str, Any], *, source: str) -> HwConfig:
    """Build and validate an HwConfig; errors are prefixed with `source` (usually the file path)."""
    try:
        return _build(data)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def _build(data: dict[str, Any]) -> HwConfig:
    top_allowed = {"name", "clock_mhz", "precisions", "bdma", "rubik", "weight_compression", *_SECTIONS}
    unknown = set(data) - top_allowed
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {sorted(unknown)}; allowed: {sorted(top_allowed)}")
    for key in ("name", "clock_mhz", "precisions", "mac", "cbuf", "memory", "sdp", "pdp", "cdp"):
        if key not in data:
            raise ConfigError(f"missing required field {key!r}")
    precs = data["precisions"]
    if not isinstance(precs, list | tuple):
        raise ConfigError(f'precisions must be a list such as ["int8"], not {precs!r}')
    parsed: list[Precision] = []
    for p in precs:
        try:
            parsed.append(Precision.parse(str(p)))
        except ValueError as e:
            raise ConfigError(f"precisions: {e}") from None
    sections: dict[str, Any] = {}
    for sec, cls in _SECTIONS.items():
        raw = data.get(sec, {})
        if not isinstance(raw, dict):
            raise ConfigError(f"[{sec}] must be a table, not {raw!r}")
        names = {f.name for f in fields(cls)}
        required = {
            f.name for f in fields(cls) if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        extra = set(raw) - names
        if extra:
            raise ConfigError(f"unknown key(s) {sorted(extra)} in [{sec}]; allowed: {sorted(names)}")
        missing = required - set(raw)
        if missing:
            raise ConfigError(f"missing field(s) {sorted(missing)} in [{sec}]")
        sections[sec] = cls(**raw)
    return HwConfig(
        name=data["name"],
        clock_mhz=data["clock_mhz"],
        precisions=tuple(dict.fromkeys(parsed)),
        bdma=data.get("bdma", False),
        rubik=data.get("rubik", False),
        weight_compression=data.get("weight_compression", False),
        **sections,
    )


def load_config_file(path: str | Path, seen: tuple[Path, ...] = ()) -> HwConfig:
    """A config file (a TOML of every field, or a `base` and the values it changes: _derived); `seen`: the
    files that named this one their base."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config file ({e.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file; a config is TOML (see configs/nv_small.toml)") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None
    if "base" in data:
        return _derived(data, path, seen)
    return config_from_dict(data, source=str(path))


def _derived(data: dict[str, Any], path: Path, seen: tuple[Path, ...]) -> HwConfig:
    """A config file naming a `base` config (a shipped config's name, or a .toml path relative to the file)
    and the values it changes: every other top-level key and table field overrides the base's."""
    name = data.pop("base")
    registry = builtin_configs()
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}: base must name a config ({', '.join(registry)}) or a .toml path, not {name!r}")
    where = registry.get(name) or path.parent / name
    if not where.is_file():
        raise ConfigError(
            f"{path}: base {name!r} is neither a shipped config ({', '.join(registry)}) nor a file beside it"
        )
    if where.resolve() in seen:
        raise ConfigError(f"{path}: base {name!r} leads back to {where} (a config cannot be its own base)")
    base = load_config_file(where, (*seen, path.resolve()))
    changes: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and key in _SECTIONS:
            changes |= {f"{key}.{leaf}": v for leaf, v in value.items()}
        else:
            changes[key] = value
    try:
        merged = base.changed_dict(changes)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    return config_from_dict(merged, source=str(path))


def builtin_configs() -> dict[str, Path]:
    """Registry of the shipped configs: name -> file."""
    found = importlib.resources.files(CONFIG_PACKAGE)
    return {Path(str(p)).stem: Path(str(p)) for p in sorted(found.iterdir(), key=str) if p.name.endswith(".toml")}


def load_config(name_or_path: str | Path) -> HwConfig:
    """Load a shipped config by name (nv_small, nv_large, nv_full, ...) or any TOML file by path."""
    registry = builtin_configs()
    key = str(name_or_path)
    if key in registry:
        return load_config_file(registry[key])
    path = Path(key)
    if path.suffix == ".toml" or path.exists():
        return load_config_file(path)
    raise ConfigError(f"unknown hardware config {key!r}; built-in: {', '.join(registry)} (or pass a .toml path)")
