"""Several NVDLA instances on one DRAM through `nvdla system` (mapper/studies/system.py): each instance's run
alone, then together on the shared DRAM; a bad system file is one line naming the file and the key."""

from __future__ import annotations

import json
import tomllib

import pytest

from nvdla_cli.main import main
from nvdla_mapper.results import demand_profile, task_dram_bytes
from nvdla_mapper.studies.system import capacity, load_system, map_instance, run_system, system_from_dict
from nvdla_sim.errors import NvdlaError
from nvdla_sim.system.shared_memory import share

TWO_LENETS = """
name = "two_lenets"
dram = "nv_full_lpddr4"
[[instance]]
hw = "nv_full_lpddr4"
model = "lenet5"
[[instance]]
hw = "nv_full_lpddr4"
model = "lenet5"
repeat = 3
"""


def test_two_instances_sharing_a_dram_through_the_cli(tmp_path, capsys):
    """Alone each runs as `nvdla map` times it (a repeat: three times as long); together neither is faster
    than alone and no instance takes longer than all the instances' traffic at the shared DRAM's peak on top
    of its own time alone; the JSON holds what the table prints."""
    path = tmp_path / "s.toml"
    path.write_text(TWO_LENETS)
    assert main(["system", str(path), "--json", str(tmp_path / "o" / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "two_lenets: 2 NVDLA instances on one DRAM (dram model: LPDDR4-2400 x 2 channels" in out
    doc = json.loads((tmp_path / "o" / "s.json").read_text())
    one, three = doc["instances"]
    spec = load_system(path)
    alone = map_instance(spec.instances[0])
    assert one["alone_ms"] == pytest.approx(alone.latency_ms) and three["alone_ms"] == pytest.approx(
        3 * one["alone_ms"]
    )
    assert one["dram_bytes"] * 3 == three["dram_bytes"]
    total = one["dram_bytes"] + three["dram_bytes"]
    for r in (one, three):
        assert r["alone_ms"] <= r["shared_ms"] <= r["alone_ms"] + total / doc["dram_peak_gbs"] / 1e6
    assert doc["makespan_ms"] == max(one["shared_ms"], three["shared_ms"])
    # the silicon: two nv_full builds, 4.869 mm2 each at 16 nm (docs/energy.md's calibrated figure)
    assert (one["area_mm2"], doc["area_mm2"]) == (pytest.approx(4.869, abs=5e-4), pytest.approx(2 * 4.869, abs=1e-3))
    assert "NVDLA silicon 9.738 mm2 (" in out


def test_the_runs_are_shared_as_their_profiles_say():
    """run_system's ends are share()'s on the instances' profiles with the shared DRAM's rate."""
    spec = load_system_text(TWO_LENETS)
    res = run_system(spec)
    p = demand_profile(map_instance(spec.instances[0]))
    ends = share([p, p.repeated(3)], capacity(spec.dram))
    assert [i.shared_ns for i in res.instances] == pytest.approx(ends)


def load_system_text(text: str):
    return system_from_dict(tomllib.loads(text), source="s.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('dram = "nv_full_lpddr4"\ncolour = 1\n[[instance]]\nhw = "nv_full"\nmodel = "lenet5"\n',
         "s.toml: unknown key(s) ['colour']"),
        ('[[instance]]\nhw = "nv_full"\nmodel = "lenet5"\n', "s.toml: dram: missing; name the config"),
        ('dram = "nv_mega"\n[[instance]]\nhw = "nv_full"\nmodel = "lenet5"\n',
         "s.toml: dram: unknown hardware config 'nv_mega'"),
        ('dram = "nv_full_lpddr4"\n', "s.toml: instance: give one [[instance]] table or more"),
        ('dram = "nv_full_lpddr4"\n[[instance]]\nmodel = "lenet5"\n', "s.toml: instance 1: hw is required"),
        ('dram = "nv_full_lpddr4"\n[[instance]]\nhw = "nv_full"\nmodel = "lenet5"\n',
         "s.toml: instance 1: hw nv_full: its DRAM (the fluid model) is not the shared one (LPDDR4-2400 x 2"),
        ('dram = "nv_full"\n[[instance]]\nhw = "nv_small"\nmodel = "lenet5"\n',
         "s.toml: instance 1: hw nv_small: its DRAM (8 GB/s, fluid model) is not the shared one (64 GB/s"),
        ('dram = "nv_full_lpddr4"\n[[instance]]\nhw = "nv_full_lpddr4"\nmodel = "lenet5"\nrepeat = 0\n',
         "s.toml: instance 1: repeat must be a whole number >= 1, not 0"),
        ('dram = "nv_full_lpddr4"\n[[instance]]\nhw = "nv_full_lpddr4"\nmodel = "bert-base"\ndecode = 8\n',
         "s.toml: instance 1: decode: "),
        ('dram = "nv_full_lpddr4"\n[[instance]]\nhw = "nv_full_lpddr4"\nmodel = "gpt2"\ndecode = 8\nseq = 8\n',
         "s.toml: instance 1: seq and decode"),
        ('dram = "nv_full_lpddr4"\n[[instance]]\nname = "a"\nhw = "nv_full_lpddr4"\nmodel = "lenet5"\n'
         '[[instance]]\nname = "a"\nhw = "nv_full_lpddr4"\nmodel = "lenet5"\n', "s.toml: instance names must differ"),
        ('dram = "nv_small_rtl_tb"\n[[instance]]\nhw = "nv_full_lpddr4"\nmodel = "lenet5"\nprecision = "fp16"\n',
         "s.toml: instance 1: hw nv_full_lpddr4: its DRAM (38.5542 GB/s, dram model) is not the shared one (4 GB/s, "
         "fluid model, nv_small_rtl_tb)"),
    ],
)  # fmt: skip
def test_a_bad_system_file_is_one_line(text, message):
    with pytest.raises(NvdlaError) as e:
        load_system_text(text)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_instances_whose_weights_the_dram_cannot_hold_are_refused(tmp_path):
    """Four GPT-2-XL decode steps' INT8 weights (about 1.5 GiB each) on a DRAM of 4 GiB: one line naming the
    instances' weights and the field that sizes the DRAM."""
    (tmp_path / "small_dram.toml").write_text(
        'base = "nv_full_lpddr4"\nname = "four_gib"\n[memory]\ndram_size_gib = 4\n'
    )
    inst = f'[[instance]]\nhw = "{tmp_path / "small_dram.toml"}"\nmodel = "gpt2-xl"\ndecode = 4\n'
    spec = load_system_text(f'name = "x"\ndram = "{tmp_path / "small_dram.toml"}"\n' + inst * 4)
    with pytest.raises(NvdlaError, match=r"x: the instances' weights \(.* GiB: dla0 .*\) are more than the shared "
                                         r"DRAM holds \(4 GiB, memory.dram_size_gib of four_gib\)"):  # fmt: skip
        run_system(spec)


def test_a_systems_energy_is_its_instances_and_its_drams():
    """One instance alone: its core and DRAM energy are `nvdla map`'s. Two: each core's dynamic energy as alone
    with its always-on power and leakage over its longer time; the DRAM's traffic energy the instances' sum,
    its standby and refresh over the time until the last ends (two LPDDR4-2400 channels' background power,
    DramDevice.background_mw, by the makespan)."""
    from nvdla_sim.system.dram import DEVICES

    one = run_system(
        load_system_text('dram = "nv_full_lpddr4"\n[[instance]]\nhw = "nv_full_lpddr4"\nmodel = "lenet5"\n')
    )
    alone = map_instance(load_system_text(TWO_LENETS).instances[0]).energy()
    (inst,) = one.instances
    assert inst.slowdown == 1 and inst.core_uj == pytest.approx(alone.batch_core_uj)
    assert one.dram_uj == pytest.approx(alone.batch_dram_uj, abs=2e-6)
    two = run_system(load_system_text(TWO_LENETS))
    static = alone.by_unit_uj["always_on"] + alone.by_unit_uj["leakage"]
    first = two.instances[0]
    # static power over the shared time, in whole cycles
    assert first.core_uj == pytest.approx(alone.batch_core_uj + static * (first.slowdown - 1), rel=1e-4)
    assert two.dram_background_uj == pytest.approx(DEVICES["LPDDR4-2400"].background_mw() * 2 * two.makespan_ns * 1e-6)
    assert two.total_uj == pytest.approx(sum(i.core_uj for i in two.instances) + two.dram_uj)


def test_a_sweep_over_how_many_instances_of_a_build(tmp_path):
    """[space] instances: the point's build times that many, each running the workload at once on its DRAM;
    the row's figures are the system's: its time until the last ends (shared_copies), an inference per
    instance, every instance's MACs and area; one instance is the plain map's row."""
    from nvdla_mapper.studies.sweep import run_sweep, sweep_from_dict

    spec = sweep_from_dict({"name": "n", "base": "nv_full_lpddr4", "space": {"instances": [1, 3]},
                            "workloads": {"models": ["lenet5"]}}, source="n.toml")  # fmt: skip
    one, three = sorted(run_sweep(spec, tmp_path / "s.sqlite", executor="serial").rows, key=lambda r: r["instances"])
    alone = map_instance(load_system_text(TWO_LENETS).instances[0])
    assert (one["instances"], one["slowdown"], one["latency_ms"]) == (1, 1.0, alone.latency_ms)
    shared = run_system(
        load_system_text('dram = "nv_full_lpddr4"\n' + '[[instance]]\nhw = "nv_full_lpddr4"\nmodel = "lenet5"\n' * 3)
    )
    assert three["latency_ms"] == pytest.approx(shared.makespan_ns / 1e6)
    assert three["throughput_inferences_per_s"] == pytest.approx(3 / (shared.makespan_ns * 1e-9))
    assert three["slowdown"] == pytest.approx(max(i.slowdown for i in shared.instances), rel=1e-5)
    assert three["slowdown"] >= 1
    assert (three["area_mm2"], three["model_macs"]) == pytest.approx((3 * one["area_mm2"], 3 * one["model_macs"]))
    assert three["system_energy_uj"] == pytest.approx(shared.total_uj, rel=1e-6)
    with pytest.raises(NvdlaError, match=r"n.toml: space.instances must be whole numbers of NVDLA instances from 1 "
                                         r"to 64, not \[0\]"):  # fmt: skip
        sweep_from_dict({"space": {"instances": [0]}, "workloads": {"models": ["lenet5"]}}, source="n.toml")


def test_a_network_split_into_a_pipeline_across_instances():
    """stages = 3: the run's tasks split into three consecutive stages (each task in one, in order of start),
    their DRAM bytes the run's; input i enters a stage after the stage before has finished it, so the last
    stage's first input ends no sooner than the three stages' times alone; streamed inputs overlap the stages,
    so three inputs take less than three runs back to back on one instance would alone."""
    from nvdla_mapper.studies.system import stages

    text = 'dram = "nv_full_lpddr4"\n[[instance]]\nname = "p"\nhw = "nv_full_lpddr4"\nmodel = "resnet18"\n'
    spec = load_system_text(text + "stages = 3\nrepeat = 3\n")
    run = map_instance(spec.instances[0])
    parts = stages(run, 3)
    assert sum(len(t) for t, _ in parts) == len(run.results)
    assert [r for t, _ in parts for r in t] == sorted(run.results, key=lambda r: r.start)
    res = run_system(spec)
    assert [i.name for i in res.instances] == ["p.s0", "p.s1", "p.s2"]
    assert sum(i.dram_bytes for i in res.instances) == 3 * sum(task_dram_bytes(r) for r in run.results)
    assert res.instances[2].first_ns >= sum(p.length for _, p in parts) - 1e-6
    assert res.makespan_ns < 3 * run.latency_ms * 1e6
    with pytest.raises(NvdlaError, match="instance: 65 NVDLA instances .each stage of a pipeline one.; a system "
                                         "has 1 to 64"):  # fmt: skip
        load_system_text(text + "stages = 65\n")


def test_a_decoder_split_into_stages_decodes_token_after_token():
    """A decode step split over two instances (pipeline-parallel decoding), three tokens of one group of
    sequences: a token enters the first stage once the one before has left the last, so the stages take turns
    (never at once: no sharing) and the last stage ends after 3 x (both stages' times alone), by hand. Two
    groups in flight (micro_batches 2, four tokens: two a group) overlap the stages: sooner than the same four
    tokens one at a time, never sooner than the busier stage's four jobs alone."""
    from nvdla_mapper.studies.system import stages

    text = 'dram = "nv_full_lpddr4"\n[[instance]]\nname = "d"\nhw = "nv_full_lpddr4"\nmodel = "gpt2"\ndecode = 32\n'
    spec = load_system_text(text + "stages = 2\nrepeat = 3\n")
    (a, pa), (b, pb) = stages(map_instance(spec.instances[0]), 2)
    res = run_system(spec)
    assert [i.shared_ns for i in res.instances] == pytest.approx(
        [2 * (pa.length + pb.length) + pa.length, 3 * (pa.length + pb.length)]
    )
    one_at_a_time = run_system(load_system_text(text + "stages = 2\nrepeat = 4\n")).makespan_ns
    two = run_system(load_system_text(text + "stages = 2\nrepeat = 4\nmicro_batches = 2\n"))
    assert 4 * max(pa.length, pb.length) <= two.makespan_ns < one_at_a_time
    assert two.instances[0].workload == "gpt2 decode step (kv 32) x4 (2 micro-batches) stage 1/2"
    for extra in ("micro_batches = 2\n", "stages = 2\nmicro_batches = 2\n"):
        with pytest.raises(NvdlaError, match="instance 1: micro_batches 2: groups of sequences in flight through a "
                                             "decoder's stages; give decode, stages > 1 and repeat >= micro_batches"):  # fmt: skip
            load_system_text(text + extra)


def test_more_stages_than_ops_is_refused_before_the_work():
    spec = load_system_text('name = "p"\ndram = "nv_full_lpddr4"\n[[instance]]\nname = "a"\nhw = "nv_full_lpddr4"\n'
                            'model = "lenet5"\nstages = 40\n')  # fmt: skip
    with pytest.raises(NvdlaError, match=r"^p: instance a: stages 40 is more than its \d+ ops; a pipeline stage"):
        run_system(spec)


def test_an_instances_profile_holds_its_host_tasks_traffic():
    """The DRAM demand of a run: every hardware layer's and copy's bytes, and each host task's work's bytes
    (HostWork.nbytes: the host's data is in the same DRAM), each over its time: the profile's rates over its
    intervals add up to them."""
    spec = load_system_text(
        'dram = "nv_full_lpddr4"\n[[instance]]\nhw = "nv_full_lpddr4"\nmodel = "gpt2"\ndecode = 16\n'
    )
    run = map_instance(spec.instances[0])
    host = sum(r.task.host_work.nbytes * r.task.count for r in run.results if r.stats is None and r.task.host_work)
    assert host > 0
    p = demand_profile(run)
    spans = [b - a for a, b in zip(p.breakpoints, p.breakpoints[1:], strict=False)]
    carried = sum((r + w) * s for r, w, s in zip(p.read_rate, p.write_rate, spans, strict=True))
    assert carried == pytest.approx(sum(task_dram_bytes(r) for r in run.results) + host, rel=1e-9)


def test_the_example_system_files_load():
    """Every examples/system_*.toml parses and passes the checks made before the work."""
    from pathlib import Path

    files = sorted((Path(__file__).parents[2] / "examples").glob("system_*.toml"))
    assert len(files) >= 3
    for path in files:
        assert load_system(path).instances
