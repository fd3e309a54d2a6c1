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


class Streaming:
    """Hand-set costs that count their DRAM traffic: a prefill takes 100 cycles and streams 6,400 bytes, a
    decode step 10 cycles and 640 bytes (64 bytes a cycle each: a 1 GHz clock's 64 GB/s)."""

    hw = load_config("nv_full")  # its 1,000 MHz clock

    def __init__(self) -> None:
        self.traffic = (0.0, 0.0)

    def _part(self, cycles: int) -> int:
        self.traffic = (self.traffic[0] + 64 * cycles, self.traffic[1])
        return cycles

    def prefill(self, tokens: int) -> int:
        return self._part(100)

    def decode(self, kv_lens) -> int:
        return self._part(10)

    def swap(self, positions: int) -> int:
        return self._part(5 * positions)

    def mixed(self, seqs, emitting: int) -> int:
        return self._part(10)


def test_replicas_on_one_shared_dram_by_hand():
    """Two replicas, a request each arriving together (prompt 4, 3 tokens): alone each prefills 0-100 and
    decodes 100-110, 110-120. On a DRAM of 64 bytes a ns both streaming at 64 each get half: every iteration
    takes twice as long (prefill to 200, decodes to 220 and 240). On a DRAM that keeps up (128), as alone.
    A third request on replica 0 arriving at 1,000, when replica 1 is idle, runs as alone."""
    from nvdla_mapper.studies.serve import ServeSettings

    reqs = [Request(0, 0, 4, 3), Request(1, 0, 4, 3), Request(2, 1000, 4, 3)]
    kw = dict(capacity_blocks=100, settings=ServeSettings(block_tokens=4))
    half = serve_replicas(reqs, Streaming(), 2, shared=lambda asks: 64.0, **kw)
    ends = [[(r.request.id, r.first_token_cycle, r.finish_cycle) for r in res.requests] for res in half]
    assert ends == [[(0, 200, 240), (2, 1100, 1120)], [(1, 200, 240)]]
    assert [(it.start, it.end) for it in half[1].iterations] == [(0, 200), (200, 220), (220, 240)]
    keeps_up = serve_replicas(reqs, Streaming(), 2, shared=lambda asks: 128.0, **kw)
    own = serve_replicas(reqs, Streaming(), 2, **kw)
    for a, b in zip(keeps_up, own, strict=True):
        assert a.requests == b.requests and a.iterations == b.iterations


def test_replicas_on_one_shared_dram_with_the_simulators_costs():
    """GPT-2 on two nv_full_lpddr4 replicas, a request each at once: on the one DRAM each prefill and step
    takes at least its time alone and the pair's first tokens come later than alone; costs that do not count
    their traffic are refused."""
    from nvdla_mapper.studies.system import capacity

    hw = load_config("nv_full_lpddr4")
    costs = SimulatedCosts(PRESETS["gpt2"], hw, options=MapOptions(precision=Precision.INT8), traffic=True)
    reqs = [Request(i, 0, 16, 3) for i in range(2)]
    own = serve_replicas(reqs, costs, 2, capacity_blocks=1000)
    shared = serve_replicas(reqs, costs, 2, capacity_blocks=1000, shared=capacity(hw))
    for o, s in zip(own, shared, strict=True):
        (ro,), (rs,) = o.requests, s.requests
        assert rs.first_token_cycle > ro.first_token_cycle and rs.finish_cycle > ro.finish_cycle
        assert all(b.end - b.start >= a.end - a.start for a, b in zip(o.iterations, s.iterations, strict=True))
    assert costs.traffic[0] > 0 and costs.traffic[1] > 0
    plain = SimulatedCosts(PRESETS["gpt2"], FULL, options=MapOptions(precision=Precision.INT8))
    with pytest.raises(NvdlaError, match="the step costs must count their DRAM traffic"):
        serve_replicas(reqs, plain, 2, capacity_blocks=1000, shared=capacity(FULL))


def test_serve_replicas_on_one_dram_through_the_cli(tmp_path, capsys):
    assert main(["serve", "gpt2", "--hw", "nv_full", "--requests", "4", "--prompt", "8", "--output", "2",
                 "--replicas", "2", "--replicas-dram", "shared", "--report", str(tmp_path)]) == 0  # fmt: skip
    assert "each replica a KV cache of" in (out := capsys.readouterr().out) and "all on nv_full's one DRAM" in out
    doc = json.loads((tmp_path / "serve.json").read_text())
    assert doc["replicas_dram"] == "shared" and [r["requests"] for r in doc["replicas"]] == [2, 2]
    assert main(["serve", "gpt2", "--replicas-dram", "shared"]) == 2
    assert "--replicas-dram says where the replicas keep their data: give --replicas N" in capsys.readouterr().err
