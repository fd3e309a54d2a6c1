"""docs/architecture.md against the import contracts (pyproject.toml [tool.importlinter]): every module of a
package with a rooms contract is a room of that contract (a new module cannot sit outside the layering),
and every room is named in the architecture page (a new room cannot be left out of the picture)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _folder(package: str) -> Path:
    """The folder of an import name (pyproject's package-dir: nvdla_mapper is mapper/)."""
    dirs = PYPROJECT["tool"]["setuptools"]["package-dir"]
    parts = package.split(".")
    for k in range(len(parts), 0, -1):
        head = ".".join(parts[:k])
        if head in dirs:
            return ROOT.joinpath(dirs[head], *parts[k:])
    return ROOT.joinpath(*parts)


def _rooms_contracts() -> list[tuple[str, str, set[str]]]:
    out = []
    for c in PYPROJECT["tool"]["importlinter"]["contracts"]:
        for container in c.get("containers", []):
            rooms = {name.strip() for layer in c["layers"] for name in layer.split("|")}
            out.append((c["name"], container, rooms))
    return out


def _modules(folder: Path) -> set[str]:
    """The modules and packages directly in a folder (not __init__, not caches)."""
    out = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    out |= {p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    return out


CONTRACTS = _rooms_contracts()


def test_the_contracts_are_read():
    assert {container for _, container, _ in CONTRACTS} >= {"nvdla_sim", "nvdla_mapper", "nvdla_rtl"}


@pytest.mark.parametrize(("name", "container", "rooms"), CONTRACTS, ids=[c for _, c, _ in CONTRACTS])
def test_every_module_is_a_room_of_its_contract(name, container, rooms):
    outside = _modules(_folder(container)) - rooms
    assert not outside, f"{container}: {sorted(outside)} in no layer of the contract {name!r}"
    missing = rooms - _modules(_folder(container))
    assert not missing, f"{container}: the contract {name!r} names {sorted(missing)}, which do not exist"


@pytest.mark.parametrize(("name", "container", "rooms"), CONTRACTS, ids=[c for _, c, _ in CONTRACTS])
def test_every_room_is_in_the_architecture_page(name, container, rooms):
    unnamed = [
        room
        for room in sorted(rooms)
        if not re.search(rf"(?<![\w.]){re.escape(room)}(/|\.py\b)", DOC) and f"`{room}`" not in DOC
    ]
    assert not unnamed, f"docs/architecture.md does not name {container}'s rooms {unnamed}"


def test_the_check_finds_a_missing_room(tmp_path):
    """The module check fails on a folder with a module no contract names."""
    (tmp_path / "pkg").mkdir()
    for name in ("__init__", "a", "stray"):
        (tmp_path / "pkg" / f"{name}.py").touch()
    assert _modules(tmp_path / "pkg") - {"a"} == {"stray"}
