"""nvdla_sim: a cycle-approximate, bit-exact model of NVDLA v1 (CDMA, CBUF, CSC, CMAC, CACC, SDP, PDP, DRAM)."""

from nvdla_sim.config import HwConfig, builtin_configs, load_config, load_config_file
from nvdla_sim.engine.conv import run_conv, simulate_conv
from nvdla_sim.engine.stats import Bound, Event, LayerStats, Traffic, Unit, UnitStats
from nvdla_sim.engine.tiling import LoopOrder, TilePlan, default_plan, illegal_reason
from nvdla_sim.errors import ConfigError, NvdlaError, ShapeError, UnsupportedError
from nvdla_sim.layers import ConvLayer, ConvShape, Memory, OperandMode, PdpLayer, PoolMode, PoolSpec, SdpLayer, SdpSpec
from nvdla_sim.precision import Precision
from nvdla_sim.processors import simulate

__all__ = [
    "Bound",
    "ConfigError",
    "ConvLayer",
    "ConvShape",
    "Event",
    "HwConfig",
    "LayerStats",
    "LoopOrder",
    "Memory",
    "NvdlaError",
    "OperandMode",
    "PdpLayer",
    "PoolMode",
    "PoolSpec",
    "Precision",
    "SdpLayer",
    "SdpSpec",
    "ShapeError",
    "TilePlan",
    "Traffic",
    "Unit",
    "UnitStats",
    "UnsupportedError",
    "builtin_configs",
    "default_plan",
    "illegal_reason",
    "load_config",
    "load_config_file",
    "run_conv",
    "simulate",
    "simulate_conv",
]
