"""What the command line was given, beyond argparse's values: which flags the user typed (so a flag that
another flag makes meaningless is refused, not silently ignored), every parser's help with its defaults,
and the options a result file records."""

from __future__ import annotations

import argparse
import enum
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nvdla_mapper.options import Pruning
from nvdla_sim.errors import NvdlaError


class DefaultsHelp(argparse.HelpFormatter):
    """Help that states every option's default (argparse's ArgumentDefaultsHelpFormatter passes over the
    options without a help text, and shows "None" for "not given")."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        if (
            "%(default)" in text
            or "default" in text.lower()  # the help says it in words
            or not action.option_strings
            or d is argparse.SUPPRESS
            or isinstance(action, argparse._StoreConstAction | argparse._HelpAction | argparse._VersionAction)
        ):
            return text
        shown = "not given" if d is None or d == "" else ("%(default)s" if not isinstance(d, enum.Enum) else d.value)
        return f"{text} (default: {shown})".lstrip()


def show_defaults(parser: argparse.ArgumentParser) -> None:
    """Every parser below `parser` prints each option's default in --help (DefaultsHelp); an option without
    a help text gets one that is its default alone (argparse prints nothing for an option without help)."""
    for p in parsers(parser):
        p.formatter_class = DefaultsHelp
        for a in p._actions:
            if a.option_strings and not a.help and not isinstance(a, argparse._StoreConstAction):
                d = a.default
                shown = "not given" if d in (None, "") else (d.value if isinstance(d, enum.Enum) else "%(default)s")
                a.help = f"default: {shown}"


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """`parser` and every subcommand's parser below it."""
    yield parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for p in dict.fromkeys(a.choices.values()):
                yield from parsers(p)


def given(parser: argparse.ArgumentParser, argv: Sequence[str]) -> frozenset[str]:
    """The destinations of the options `argv` gives (typed, whatever their value), found by parsing it again
    with every default suppressed."""
    saved = []
    for p in parsers(parser):
        saved.append((p, p._defaults.copy(), [(a, a.default) for a in p._actions]))
        p._defaults.clear()
        for a in p._actions:
            if a.option_strings and not isinstance(a, argparse._HelpAction):
                a.default = argparse.SUPPRESS
    try:
        ns = parser.parse_args(argv)
    finally:
        for p, defaults, actions in saved:
            p._defaults.update(defaults)
            for a, d in actions:
                a.default = d
    return frozenset(vars(ns))


@dataclass(frozen=True)
class Needs:
    """Flag `dest`, when given, needs `holds(args)`; else the one-line error `--dest why`."""

    dest: str
    holds: Callable[[argparse.Namespace], bool]
    why: str | Callable[[argparse.Namespace], str]


def check_needs(args: argparse.Namespace, rules: Sequence[Needs]) -> None:
    """The first rule whose flag was given (args.given) and whose condition fails, as a one-line error."""
    for r in rules:
        if r.dest in args.given and not r.holds(args):
            why = r.why if isinstance(r.why, str) else r.why(args)
            raise NvdlaError(f"--{r.dest.replace('_', '-')} {why}")


def typed(args: argparse.Namespace, dest: str) -> bool:
    """Whether the user gave the flag (not its default)."""
    return dest in args.given


def finite_positive(flag: str, v: float | None) -> None:
    """A one-line error unless `v` (when given) is a finite number above zero."""
    if v is not None and not (0 < v < math.inf):
        raise NvdlaError(f"{flag} must be a finite number above 0, not {v}")


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The options that produced a result, as a result file records them: every parsed option (defaults
    included) and which of them were typed."""
    out: dict[str, Any] = {}
    for k, v in sorted(vars(args).items()):
        if k == "given":
            continue
        if isinstance(v, enum.Enum):
            v = v.value
        elif isinstance(v, Path | Pruning):
            v = str(v)
        out[k] = v
    out["typed"] = sorted(args.given)
    return out
