"""`nvdla serve --replicas N` (studies/serve.serve_replicas): the requests dealt round robin in order of arrival
to N instances of the build, each with the whole model, its own KV cache and DRAM port; by hand: requests that
arrive together, one a replica, each start at once, as a lone request does."""

from __future__ import annotations

import json

import pytest

from nvdla_cli.main import main
from nvdla_mapper.frontends.presets import PRESETS
from nvdla_mapper.options import MapOptions
from nvdla_mapper.studies.serve import (
    Request,
    SimulatedCosts,
    replicas_percentiles,
    serve_replicas,
    simulate_serving,
)
from nvdla_sim import NvdlaError, Precision, load_config

FULL = load_config("nv_full")


def test_requests_arriving_together_one_a_replica_each_run_as_alone():
    """Four requests at once on four replicas: each replica serves one, so each one's first token comes as a
    lone request's does; on one instance they queue and the last waits for the others' prefills."""
    costs = SimulatedCosts(PRESETS["gpt2"], FULL, options=MapOptions(precision=Precision.INT8))
    requests = [Request(i, 0, 16, 3) for i in range(4)]
    lone = simulate_serving(requests[:1], costs, capacity_blocks=1000).latencies_ms()
    four = serve_replicas(requests, costs, 4, capacity_blocks=1000)
    assert [len(r.requests) for r in four] == [1, 1, 1, 1]
    for r in four:
        assert r.latencies_ms() == lone
    one = simulate_serving(requests, costs, capacity_blocks=1000).latencies_ms()
    assert max(one[next(iter(one))]) > max(lone[next(iter(lone))])
    together = replicas_percentiles(four)
    assert all(v is None or v.p99 == pytest.approx(v.p50) for v in together.values())  # all alike
    with pytest.raises(NvdlaError, match="more replicas than the 4 requests"):
        serve_replicas(requests, costs, 5, capacity_blocks=1000)
    with pytest.raises(NvdlaError, match="--replicas 0: a whole number of instances from 1 to 64"):
        serve_replicas(requests, costs, 0, capacity_blocks=1000)


def test_serve_replicas_through_the_cli(tmp_path, capsys):
    assert main(["serve", "gpt2", "--hw", "nv_full", "--requests", "6", "--prompt", "8", "--output", "2",
                 "--replicas", "3", "--report", str(tmp_path)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "gpt2 on 3 x nv_full" in out and "replica 3" in out and "  all " in out
    doc = json.loads((tmp_path / "serve.json").read_text())
    assert [r["requests"] for r in doc["replicas"]] == [2, 2, 2]
    assert main(["serve", "gpt2", "--hw", "nv_full", "--requests", "6", "--replicas", "2", "--rates", "1,2"]) == 2
    assert "--replicas with --rates" in capsys.readouterr().err
