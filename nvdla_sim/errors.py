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


def check_int(
    value: object, what: str, *, minimum: int = 1, maximum: int | None = None, error: type[NvdlaError] = NvdlaError,
    why: str = "",
) -> int:  # fmt: skip
    """`value` if it is an integer in minimum..maximum (a bool is not), else `error` in one line naming `what`,
    the range and `why` (the register field or the rule that sets it): the one check of a count a user,
    a file or a config gives."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        if maximum is not None:
            want = f"an integer in {minimum}..{maximum}"
        elif minimum == 1:
            want = "a positive integer"
        else:
            want = f"an integer >= {minimum}"
        raise error(f"{what} must be {want}{why}, not {value!r}")
    return value
