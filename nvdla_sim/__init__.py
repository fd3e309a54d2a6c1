"""nvdla_sim: a cycle-approximate, bit-exact model of NVDLA v1 (CDMA, CBUF, CSC, CMAC, CACC, SDP, PDP, DRAM)."""

from .config import HwConfig, builtin_configs, load_config, load_config_file
from .conv import run_conv, simulate_conv
from .errors import ConfigError, NvdlaError, ShapeError, UnsupportedError
from .layers import ConvLayer, ConvShape, Memory, OperandMode, PdpLayer, PoolMode, PoolSpec, SdpLayer, SdpSpec
from .precision import Precision
from .simulate import simulate
from .stats import Bound, Event, LayerStats, Traffic, Unit, UnitStats
from .tiling import LoopOrder, TilePlan, default_plan, illegal_reason

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
