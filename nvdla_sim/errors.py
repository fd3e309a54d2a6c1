"""Exception types: every user-facing failure names the field or file and what would be valid."""


class NvdlaError(Exception):
    """Base class for errors the CLI reports as one clear line (no traceback)."""


class ConfigError(NvdlaError):
    """A hardware config (TOML or dataclass) is malformed or out of range."""


class ShapeError(NvdlaError):
    """A layer shape or tiling is impossible on the given hardware."""


class UnsupportedError(NvdlaError):
    """A feature the chosen hardware config does not have (e.g. LUT on nv_small)."""


class TraceError(NvdlaError):
    """An NVDLA register program (trace test) is malformed, or uses registers or modes the model lacks."""
