"""Result files are written whole or not at all (nvdla_sim/files.py), and read back as written."""

from __future__ import annotations

import csv
import json
import os

import pytest

from nvdla_sim import files


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    files.write_json(target, {"cycles": 1})
    with pytest.raises(TypeError):  # not JSON: nothing is written
        files.write_json(target, {"cycles": object()})

    def broken(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        files.write_text(target, "half")
    assert json.loads(target.read_text()) == {"cycles": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_tables_read_back(tmp_path):
    rows = [{"name": "qk", "cycles": 12}, {"name": "pv", "cycles": 7}]
    path = files.write_table(tmp_path / "layers.csv", ["name", "cycles"], rows)
    with path.open(newline="") as f:
        assert list(csv.DictReader(f)) == [{"name": "qk", "cycles": "12"}, {"name": "pv", "cycles": "7"}]
    path = files.write_rows(tmp_path / "tokens.csv", ["token", "ms"], [[1, 0.5], [2, 0.25]])
    assert path.read_text().splitlines() == ["token,ms", "1,0.5", "2,0.25"]
    assert files.write_json(tmp_path / "a.json", [1], indent=None, newline=False).read_text() == "[1]"
