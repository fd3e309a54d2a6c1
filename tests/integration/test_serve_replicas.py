"""`nvdla serve --replicas N` (studies/serve.serve_replicas): the requests dealt round robin in order of arrival
to N instances of the build, each with the whole model and its own KV cache, on DRAM ports of their own or on
one shared DRAM (--replicas-dram shared); by hand: requests that arrive together, one a replica, each start at
once, as a lone request does; on one DRAM, replicas streaming at its whole rate each take twice as long."""

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

    def _part(self, cycles: int, per_cycle: int = 64) -> int:
        self.traffic = (self.traffic[0] + per_cycle * cycles, self.traffic[1])
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


def test_replicas_on_one_dram_split_its_room():
    """On nv_full_lpddr4's 8 GiB each of four replicas holds a copy of GPT-2's weights, and the room beside the
    four copies is split four ways into blocks of 16 positions (2 x 12 layers x 768 bytes a position at INT8:
    294,912 bytes a block), by hand; GPT-J-6B's four copies (over 5 GiB each) do not fit."""
    from nvdla_mapper.studies.generate import weight_bytes
    from nvdla_mapper.studies.serve import kv_capacity_blocks

    hw = load_config("nv_full_lpddr4")
    w = weight_bytes(PRESETS["gpt2"], Precision.INT8)
    block = 2 * 12 * 768 * 16
    assert kv_capacity_blocks(PRESETS["gpt2"], hw, Precision.INT8, 16) == (8 * 2**30 - w) // block
    assert kv_capacity_blocks(PRESETS["gpt2"], hw, Precision.INT8, 16, sharing=4) == (8 * 2**30 - 4 * w) // 4 // block
    with pytest.raises(NvdlaError, match=r"^4 copies of gptj-6b-size's weights \(2\d\.\d\d GiB, int8\) leave no room"):
        kv_capacity_blocks(PRESETS["gptj-6b-size"], hw, Precision.INT8, 16, sharing=4)


class ThreeKinds(Streaming):
    """Parts by the request (its prompt, its cache): prompt 4 and caches under 100 positions stream 64 bytes a
    cycle, prompt 105 and caches under 200 50 bytes, prompt 208 and longer caches 1 byte; odd cycle counts."""

    def prefill(self, tokens: int) -> int:
        return self._part(997, 64) if tokens == 4 else self._part(1009, 50) if tokens == 105 else self._part(1013, 1)

    def decode(self, kv_lens) -> int:
        m = max(kv_lens)
        return self._part(7 + m % 3, 64) if m < 100 else self._part(11 + m % 5, 50) if m < 200 else self._part(29, 1)


def test_a_replica_never_slowed_keeps_its_ends_late_in_a_run():
    """Far into a run (arrivals past 10^11 cycles, where a float of the clock has steps of 1/64 cycle) and on a
    memory whose shares are not whole fractions (40.3 bytes a ns): two heavy replicas share what the light one
    leaves, while the light one, asking 1 byte a ns, is never slowed and keeps every end it has alone, to the
    cycle (a clock summed in floats drifted 251 of its ends by up to 8 cycles); a request whose one token comes from its prefill (output 1) finishes where its slowed prefill ends,
    by hand."""
    from nvdla_mapper.studies.serve import ServeSettings

    base = 10**11
    kw = dict(capacity_blocks=1000, settings=ServeSettings(block_tokens=4))
    reqs = [Request(0, base, 4, 90), Request(1, base, 105, 90), Request(2, base, 208, 300)]
    shared = serve_replicas(reqs, ThreeKinds(), 3, shared=lambda asks: 40.3, **kw)
    own = serve_replicas(reqs, ThreeKinds(), 3, **kw)
    assert shared[2].iterations == own[2].iterations and shared[2].requests == own[2].requests
    assert shared[0].requests[0].finish_cycle > own[0].requests[0].finish_cycle
    # two prefills at once on 100 bytes a ns (each asks 64): 50 each, 100 cycles alone take 128
    settings = ServeSettings(block_tokens=4)
    one = serve_replicas([Request(0, base, 4, 1), Request(1, base, 4, 1)], Streaming(), 2, capacity_blocks=100,
                         settings=settings, shared=lambda asks: 100.0)  # fmt: skip
    assert [(r.requests[0].first_token_cycle, r.requests[0].finish_cycle) for r in one] == [(base + 128,) * 2] * 2
