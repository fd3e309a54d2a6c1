"""How a long study reports how far it has got: a callable the caller passes (the CLI draws it on a
terminal, nvdla_cli.console.TerminalProgress), never output of the study's own."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def __call__(self, what: str, done: int, total: int | None) -> None:
        """`done` of `total` items of `what` finished (total None: not known in advance)."""


def quiet(what: str, done: int, total: int | None) -> None:
    """A Progress that reports nothing."""
