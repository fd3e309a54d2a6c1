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
    return subprocess.run([LINT, "--no-cache", "--config", str(cwd / "pyproject.toml")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_the_tree_keeps_its_layers():
    p = _lint(ROOT, ROOT)
    assert p.returncode == 0 and "1 kept, 0 broken" in p.stdout, p.stdout[-1500:]


def test_a_simulator_module_importing_the_mapper_breaks_the_contract(tmp_path):
    """The same contract on a copy of the package skeleton in which nvdla_sim imports the mapper."""
    for pkg in ("nvdla_cli", "nvdla_rtl", "nvdla_mapper", "nvdla_sim", "nvdla_validation"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "nvdla_mapper" / "lowering.py").write_text("import nvdla_sim\n")
    (tmp_path / "nvdla_sim" / "conv.py").write_text("from nvdla_mapper import lowering\n")  # upward: forbidden
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    p = _lint(tmp_path, tmp_path)
    assert p.returncode != 0 and "BROKEN" in p.stdout and "nvdla_sim.conv -> nvdla_mapper.lowering" in p.stdout, (
        p.stdout
    )
