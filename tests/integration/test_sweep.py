"""Sweeps: named errors for bad files, resume after a hard kill, identical results local vs Dask."""

import signal
import sqlite3
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import nvdla_sim
from nvdla_mapper.studies.sweep import load_sweep, pareto_front, read_rows, run_sweep, sweep_from_dict
from nvdla_sim import NvdlaError

SWEEP = """
name = "t"
base = "nv_full"
[space]
"mac.atomic_c" = [32, 64]
"cbuf.bank_depth" = [256, 512]
"memory.dram_bandwidth_gbs" = [12.8, 51.2]
precision = ["int8"]
[workloads]
models = ["bert-base"]
seq = [32]
"""


def _strip(run):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in run.rows]


@pytest.fixture
def sweep_file(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(SWEEP)
    return p


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"workloads": {"models": ["bert-base"]}, "colour": 1}, "unknown key(s) ['colour']"),
        ({"base": "nv_mega", "workloads": {"models": ["bert-base"]}}, "base: unknown hardware config 'nv_mega'"),
        (
            {"space": {"mac.atomic_c": [3]}, "workloads": {"models": ["bert-base"]}},
            "space.mac.atomic_c: nv_full (modified): mac.atomic_c must be a power of two, not 3",
        ),
        (
            {"space": {"mac.rows": [3]}, "workloads": {"models": ["bert-base"]}},
            "space.mac.rows: unknown config field 'mac.rows'",
        ),
        (
            {"space": {"precision": ["int4"]}, "workloads": {"models": ["bert-base"]}},
            "space.precision: unknown precision 'int4'",
        ),
        ({"workloads": {"models": ["bert-huge"]}}, "workloads.models: unknown model 'bert-huge'"),
        (
            {"workloads": {"models": ["gpt2"], "seq": [0]}},
            "workloads.seq must be a non-empty list of positive integers",
        ),
        ({}, "missing [workloads] table"),
        (
            {"workloads": {"models": ["gpt2"]}, "options": {"kv_plan": "step"}},
            "options.kv_plan must be bucket or length, not 'step'",
        ),
        (
            {"workloads": {"models": ["gpt2"]}, "options": {"softmax": "lut"}},
            "options.softmax must be auto, nvdla or host, not 'lut'",
        ),
    ],
)
def test_invalid_sweeps_name_the_key(data, message):
    with pytest.raises(NvdlaError) as e:
        sweep_from_dict(data, source="bad.toml")
    assert str(e.value).startswith("bad.toml: ") and message in str(e.value)


# A sweep in a process of its own that kills itself (SIGKILL: no cleanup, no commit, no close) as it starts
# its point number `stop_after` + 1, after committing the first `stop_after` rows: the interruption of a
# hard kill at a known place. The model version is the parent's, so both runs agree on it however long
# they take.
_KILLED_SWEEP = """
import os, signal, sys
import nvdla_mapper.studies.sweep as sweep
version, path, db, stop_after = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sweep.model_version = lambda: version
evaluate, started = sweep.evaluate_point, []
def evaluate_or_die(p):
    if len(started) == stop_after:
        os.kill(os.getpid(), signal.SIGKILL)
    started.append(p["id"])
    return evaluate(p)
sweep.evaluate_point = evaluate_or_die
sweep.run_sweep(sweep.load_sweep(path), db, executor="serial")
"""


def test_resume_after_kill_loses_and_duplicates_nothing(sweep_file, tmp_path, monkeypatch):
    """A sweep of 8 points killed as its 4th starts keeps the 3 rows it committed; the resumed run evaluates
    the other 5 only (the 3 rows are reused as they were, wall time and all) and ends with the rows of an
    uninterrupted run, each point once."""
    from nvdla_mapper.studies import sweep

    spec = load_sweep(sweep_file)
    points = [p["id"] for p in spec.points()]
    first = run_sweep(spec, tmp_path / "ref.sqlite", executor="serial")
    reference = _strip(first)
    assert len(reference) == 8 and all(r["status"] == "ok" for r in reference)
    db = tmp_path / "out" / "sweep.sqlite"
    argv = [sys.executable, "-c", _KILLED_SWEEP, first.model_version, str(sweep_file), str(db), "3"]
    killed = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    con = sqlite3.connect(db)
    partial = {r["id"]: r for r in read_rows(con, spec.name)}
    con.close()
    assert sorted(partial) == sorted(points[:3])  # the serial executor runs the points in order
    evaluated, evaluate = [], sweep.evaluate_point

    def counted(p):
        evaluated.append(p["id"])
        return evaluate(p)

    monkeypatch.setattr(sweep, "evaluate_point", counted)
    resumed = run_sweep(spec, db, executor="serial")
    assert evaluated == points[3:] and (resumed.evaluated, resumed.reused, resumed.recomputed) == (5, 3, 0)
    assert [r for r in resumed.rows if r["id"] in partial] == sorted(partial.values(), key=lambda r: r["id"])
    assert _strip(resumed) == reference
    assert sqlite3.connect(db).execute("SELECT COUNT(DISTINCT id), COUNT(*) FROM sweep_rows").fetchone() == (8, 8)


def test_local_and_dask_executors_agree(sweep_file, tmp_path):
    from distributed import Client, LocalCluster

    spec = load_sweep(sweep_file)
    local = _strip(run_sweep(spec, tmp_path / "local.sqlite", executor="local", workers=2))
    with (
        # the scheduler's HTTP server (its /metrics) on a free port: another cluster on this machine may hold 8787
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        dask_rows = _strip(run_sweep(spec, tmp_path / "dask.sqlite", executor="dask", scheduler=client))
    assert dask_rows == local
    front = pareto_front(local)
    assert front and all(r["status"] == "ok" for r in front)
    best = min(r["latency_ms"] for r in local)
    assert any(r["latency_ms"] == best for r in front)


def test_cli_sweep_writes_pareto(sweep_file, tmp_path, capsys):
    from nvdla_cli.main import main

    assert main(["sweep", str(sweep_file), "--out", str(tmp_path), "--executor", "serial"]) == 0
    out = capsys.readouterr().out
    assert "8/8 points" in out and "Pareto front" in out
    assert (tmp_path / "pareto.csv").read_text().count("\n") >= 2 and (tmp_path / "pareto.png").stat().st_size > 1000


SMALL = """
name = "v"
base = "nv_small"
[space]
"memory.dram_bandwidth_gbs" = [8.0, 16.0]
[workloads]
models = ["lenet5", "bert-base"]
seq = [16]
"""


def test_a_resumed_sweep_recomputes_rows_of_another_model_version(tmp_path):
    """Rows carry the model version and the configuration's digest; a resume recomputes the rows either
    differs from, says how many, and keeps the rest."""
    spec = sweep_from_dict(tomllib.loads(SMALL))
    db = tmp_path / "s.sqlite"
    first = run_sweep(spec, db, executor="serial")
    assert (first.evaluated, first.reused, first.recomputed) == (4, 0, 0)
    assert {r["seq"] for r in first.rows if r["model"] == "lenet5"} == {0}  # a CNN runs no sequence
    # nv_small's 64-bit interface at 1 GHz carries 8 GB/s: the 16 GB/s points say they were clamped
    for r in first.rows:
        clamped = r["params"]["hw"]["memory.dram_bandwidth_gbs"] > 8.0
        assert ("carries at 1000 MHz (8 GB/s)" in r["notes"]) is clamped, r["notes"]
    con = sqlite3.connect(db)
    con.execute("UPDATE sweep_rows SET model_version = 'older', total_cycles = -1 WHERE model = 'bert-base'")
    con.commit()
    again = run_sweep(spec, db, executor="serial")
    assert (again.evaluated, again.reused, again.recomputed) == (2, 2, 2)
    assert all(r["total_cycles"] > 0 for r in again.rows) and len(again.rows) == 4
    assert _strip(again) == _strip(first)
    third = run_sweep(spec, db, executor="serial")
    assert (third.evaluated, third.reused, third.recomputed) == (0, 4, 0)


def test_a_custom_config_edited_in_place_recomputes_its_rows(tmp_path):
    base = tmp_path / "mine.toml"
    base.write_text((Path(nvdla_sim.__file__).parents[1] / "configs" / "nv_small.toml").read_text())
    spec = sweep_from_dict({**tomllib.loads(SMALL), "base": str(base)})
    db = tmp_path / "s.sqlite"
    assert run_sweep(spec, db, executor="serial").evaluated == 4
    base.write_text(base.read_text().replace("clock_mhz = 1000.0", "clock_mhz = 500.0"))
    run = run_sweep(spec, db, executor="serial")
    assert run.recomputed == 4 and all(r["latency_ms"] > 0 for r in run.rows)


def test_rows_of_the_table_before_versioning_are_recomputed(tmp_path):
    """A database written before rows carried a version: its points are recomputed, not trusted."""
    spec = sweep_from_dict(tomllib.loads(SMALL))
    db = tmp_path / "s.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE points (id TEXT PRIMARY KEY, sweep TEXT, total_cycles REAL)")
    con.executemany("INSERT INTO points VALUES (?, 'v', -1)", [(p["id"],) for p in spec.points()])
    con.commit()
    run = run_sweep(spec, db, executor="serial")
    assert (run.evaluated, run.recomputed) == (4, 4) and all(r["total_cycles"] > 0 for r in run.rows)


def _row(i, latency, energy, area, model="m", **extra):
    return {"id": f"p{i}", "status": "ok", "model": model, "seq": 1, "batch": 1, "latency_ms": latency,
            "core_energy_uj": energy, "area_mm2": area, **extra}  # fmt: skip


def test_pareto_fronts_by_hand():
    """Five points of one workload: p0 (1 ms, 9 uJ, 4 mm2), p1 (2, 5, 2), p2 (3, 6, 1), p3 (4, 4, 3),
    p4 (2, 9, 4: p1 is no worse anywhere and better in energy and area). Latency vs energy: p0, p1, p3
    (p2 loses to p1); latency vs area: p0, p1, p2; energy vs area: p1, p2, p3; all three: p0-p3. A second
    workload's point never dominates the first's."""
    from nvdla_mapper.studies.sweep import pareto_front

    rows = [_row(0, 1, 9, 4), _row(1, 2, 5, 2), _row(2, 3, 6, 1), _row(3, 4, 4, 3), _row(4, 2, 9, 4),
            _row(5, 0.5, 1, 0.1, model="other")]  # fmt: skip

    def ids(axes):
        return {r["id"] for r in pareto_front(rows, axes) if r["model"] == "m"}

    assert ids(("latency_ms", "core_energy_uj")) == {"p0", "p1", "p3"}
    assert ids(("latency_ms", "area_mm2")) == {"p0", "p1", "p2"}
    assert ids(("core_energy_uj", "area_mm2")) == {"p1", "p2", "p3"}
    assert ids(("latency_ms", "core_energy_uj", "area_mm2")) == {"p0", "p1", "p2", "p3"}


def test_ranking_under_constraints_by_hand():
    from nvdla_mapper.studies.sweep import parse_constraint, rank

    rows = [_row(0, 1, 9, 4, tops_per_w=2.0), _row(1, 2, 5, 2, tops_per_w=3.0), _row(2, 3, 6, 1, tops_per_w=1.0),
            _row(3, 4, 4, 3, tops_per_w=4.0)]  # fmt: skip
    cons = (parse_constraint("latency_ms<=3"), parse_constraint("area_mm2 <= 2"))
    assert [r["id"] for r in rank(rows, "core_energy_uj", cons)] == ["p1", "p2"]
    assert [r["id"] for r in rank(rows, "core_energy_uj")] == ["p3", "p1", "p2", "p0"]
    assert [r["id"] for r in rank(rows, "tops_per_w", (parse_constraint("latency_ms<=2"),))] == ["p1", "p0"]
    for text, msg in (("latency<=3", "'latency' is not a sweep metric"), ("latency_ms<3", "write METRIC<=NUMBER"),
                      ("area_mm2<=two", "'two' is not a number")):  # fmt: skip
        with pytest.raises(NvdlaError, match=msg):
            parse_constraint(text)
    with pytest.raises(NvdlaError, match="rank objective 'speed' is not a sweep metric"):
        rank(rows, "speed")


def test_a_bad_rank_table_is_named():
    data = {"workloads": {"models": ["bert-base"]}}
    with pytest.raises(NvdlaError, match=r"rank.objective 'joules' is not a sweep metric"):
        sweep_from_dict({**data, "rank": {"objective": "joules"}})
    with pytest.raises(NvdlaError, match=r"rank.constraints: constraint 'area_mm2=2'"):
        sweep_from_dict({**data, "rank": {"objective": "area_mm2", "constraints": ["area_mm2=2"]}})
    with pytest.raises(NvdlaError, match=r"unknown key\(s\) \['best'\] in \[rank\]"):
        sweep_from_dict({**data, "rank": {"best": 1}})


def test_cli_sweep_ranks_under_constraints(sweep_file, tmp_path, capsys):
    """The least NVDLA energy among the points within a latency bound: the ranking's order and its
    qualifying set are the rows' own (read back from the database)."""
    from nvdla_cli.main import main

    sweep_file.write_text(SWEEP + '[rank]\nobjective = "core_energy_uj"\nconstraints = ["latency_ms<=1000"]\n')
    assert main(["sweep", str(sweep_file), "--out", str(tmp_path), "--executor", "serial"]) == 0
    out = capsys.readouterr().out
    assert "ranked by core_energy_uj with latency_ms<=1000: 8 of 8 points qualify" in out
    import csv

    with (tmp_path / "ranking.csv").open() as f:
        ranking = list(csv.DictReader(f))
    energies = [float(r["core_energy_uj"]) for r in ranking]
    assert len(ranking) == 8 and energies == sorted(energies)
    bound = sorted(float(r["latency_ms"]) for r in ranking)[3]  # the four fastest points
    assert main(["sweep", str(sweep_file), "--out", str(tmp_path), "--executor", "serial", "--rank", "area_mm2",
                 "--where", f"latency_ms<={bound}"]) == 0  # fmt: skip
    assert "4 of 8 points qualify" in capsys.readouterr().out
    for name in ("pareto_latency_vs_core", "pareto_latency_vs_area", "pareto_core_vs_area"):
        assert (tmp_path / f"{name}.csv").exists()
    assert main(["sweep", str(sweep_file), "--out", str(tmp_path), "--where", "latency_ms<=1", "--rank", "speed"]) == 2
    assert "rank objective 'speed' is not a sweep metric" in capsys.readouterr().err


def test_a_decode_point_is_one_generation_step(tmp_path):
    """phase = decode: the point is one token-by-token step with `seq` tokens cached, the step `nvdla
    generate` times for the token after a `seq`-token prompt; the prefill point of the same model is the
    forward pass `nvdla map` runs (every position's logits), more cycles than generate's prefill (the
    last position's) and than one step."""
    from nvdla_mapper.frontends.presets import PRESETS
    from nvdla_mapper.studies.generate import generate

    spec = sweep_from_dict(tomllib.loads('base = "nv_small"\n[workloads]\nmodels = ["gpt2"]\nseq = [16]\n'
                                         'phase = ["prefill", "decode"]\n'))  # fmt: skip
    rows = {
        r["params"].get("phase", "prefill"): r for r in run_sweep(spec, tmp_path / "s.sqlite", executor="serial").rows
    }
    gen = generate(PRESETS["gpt2"], load_config_small(), prompt=16, new_tokens=2)
    (step,) = gen.steps
    assert step.kv_len == 16 and rows["decode"]["total_cycles"] == step.cycles
    assert rows["decode"]["core_energy_uj"] == pytest.approx(step.core_energy_uj, rel=1e-6)
    assert rows["decode"]["dram_energy_uj"] == pytest.approx(step.dram_energy_uj, rel=1e-6)
    assert rows["decode"]["system_energy_uj"] == pytest.approx(step.core_energy_uj + step.dram_energy_uj, rel=1e-6)
    assert rows["prefill"]["total_cycles"] > gen.prefill.total_cycles > step.cycles


def test_a_decode_point_takes_the_kv_plan_option(tmp_path):
    """options.kv_plan = "length" plans the decode point's attention at its own length, as generate
    --kv-plan length does (its step's cycles); the row's params record it."""
    from nvdla_mapper.frontends.presets import PRESETS
    from nvdla_mapper.studies.generate import generate

    text = (
        'base = "nv_full"\n[workloads]\nmodels = ["gpt2"]\nseq = [150]\nphase = ["decode"]\n'
        '[options]\nkv_plan = "length"\n'
    )
    (row,) = run_sweep(sweep_from_dict(tomllib.loads(text)), tmp_path / "s.sqlite", executor="serial").rows
    from nvdla_sim import load_config

    gen = generate(PRESETS["gpt2"], load_config("nv_full"), prompt=150, new_tokens=2, kv_plan="length")
    assert row["params"]["options"] == {"kv_plan": "length"} and row["total_cycles"] == gen.steps[0].cycles


def load_config_small():
    from nvdla_sim import load_config

    return load_config("nv_small")


@pytest.mark.parametrize(
    ("models", "message"),
    [(["bert-base"], "workloads.phase decode: bert-base: generation is modelled for decoder models"),
     (["lenet5"], "workloads.phase decode: lenet5 is not a transformer preset or config.json")],
)  # fmt: skip
def test_decode_of_a_model_that_cannot_generate_is_named(models, message):
    with pytest.raises(NvdlaError, match=message):
        sweep_from_dict({"workloads": {"models": models, "phase": ["decode"]}})
    with pytest.raises(NvdlaError, match=r"workloads.phase must be a non-empty list of prefill, decode"):
        sweep_from_dict({"workloads": {"models": ["gpt2"], "phase": ["train"]}})
