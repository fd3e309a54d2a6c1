"""The layers contract of pyproject.toml ([tool.importlinter]): kept by the tree, broken by a wrong import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))


def _lint(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([LINT, "--no-cache", str(cwd / "pyproject.toml")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_the_tree_keeps_its_layers():
    p = _lint(ROOT, ROOT)
    assert p.returncode == 0 and "6 kept, 0 broken" in p.stdout, p.stdout[-1500:]


def _skeleton(tmp_path: Path) -> None:
    """The packages and rooms the contracts name (read from the tree's pyproject.toml, so a new room needs
    no edit here), each an empty package, with that pyproject.toml."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    packages = set()
    for c in contracts:
        for container in c.get("containers", [""]):
            for layer in c.get("layers", []):
                for name in layer.split("|"):
                    packages.add(f"{container}.{name.strip()}" if container else name.strip())
    for dotted in sorted(packages, key=lambda d: d.count(".")):
        parts = dotted.split(".")
        for k in range(1, len(parts) + 1):
            d = tmp_path.joinpath(*parts[:k])
            d.mkdir(exist_ok=True)
            (d / "__init__.py").touch()
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")


def test_a_simulator_module_importing_the_mapper_breaks_the_contract(tmp_path):
    """The same contracts on a copy of the package skeleton in which nvdla_sim imports the mapper."""
    _skeleton(tmp_path)
    (tmp_path / "nvdla_mapper" / "lowering" / "rules.py").write_text("import nvdla_sim\n")
    (tmp_path / "nvdla_sim" / "engine" / "conv.py").write_text("from nvdla_mapper.lowering import rules\n")
    p = _lint(tmp_path, tmp_path)
    assert p.returncode != 0 and "BROKEN" in p.stdout
    assert "nvdla_sim.engine.conv -> nvdla_mapper.lowering.rules" in p.stdout, p.stdout


def test_a_unit_importing_the_engine_breaks_the_rooms_contract(tmp_path):
    """Inside nvdla_sim: a unit model (units/) may not import the timing engine (engine/) built on it."""
    _skeleton(tmp_path)
    (tmp_path / "nvdla_sim" / "engine" / "stats.py").write_text("")
    (tmp_path / "nvdla_sim" / "units" / "cdma.py").write_text("from nvdla_sim.engine import stats\n")
    p = _lint(tmp_path, tmp_path)
    assert p.returncode != 0 and "nvdla_sim rooms" in p.stdout and "BROKEN" in p.stdout, p.stdout
    assert "nvdla_sim.units.cdma -> nvdla_sim.engine.stats" in p.stdout, p.stdout


def test_the_mapper_folder_cannot_be_imported_under_its_folder_name():
    """mapper/ is the package nvdla_mapper; `import mapper` from the repository root would load a second
    copy of every module (tests once did), so it is refused with a message naming the right import."""
    code = "import mapper"
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "import nvdla_mapper, not mapper" in p.stderr, p.stderr[-500:]
