"""Serving (mapper/studies/serve.py): the scheduler on hand-worked traces with hand-set iteration costs, the
KV block accounting, the simulator-backed costs against `generate`, and bad input."""

from __future__ import annotations

import itertools
import json

import pytest

from nvdla_cli.main import main
from nvdla_mapper.frontends.presets import decode_step_graph, preset
from nvdla_mapper.options import WeightTreatment
from nvdla_mapper.passes import map_model
from nvdla_mapper.studies.generate import generate, kv_bytes_per_token, weight_bytes
from nvdla_mapper.studies.serve import (
    IterationKind,
    Latency,
    Policy,
    Preemption,
    Request,
    ServeSettings,
    SimulatedCosts,
    Slo,
    kv_capacity_blocks,
    poisson_requests,
    read_trace,
    simulate_serving,
    sweep_rates,
)
from nvdla_sim import Precision, load_config
from nvdla_sim.errors import NvdlaError


class Fixed:
    """Hand-set costs: every prefill call and every decode step takes a fixed number of cycles."""

    def __init__(self, prefill: int, decode: int) -> None:
        self.p, self.d = prefill, decode
        self.decoded: list[tuple[int, ...]] = []
        self.mixes: list[tuple[tuple[tuple[int, int], ...], int]] = []

    def prefill(self, tokens: int) -> int:
        return self.p

    def decode(self, kv_lens: tuple[int, ...]) -> int:
        self.decoded.append(kv_lens)
        return self.d

    def swap(self, positions: int) -> int:
        return 5 * positions

    def mixed(self, seqs: tuple[tuple[int, int], ...], emitting: int) -> int:
        self.mixes.append((seqs, emitting))
        return 10 + sum(n for _, n in seqs)


def _by_id(res):
    return {r.request.id: r for r in res.requests}


def test_two_requests_without_contention_by_hand():
    """A (arrives 0, prompt 4, 3 tokens) and B (arrives 150, prompt 4, 2 tokens), prefill 100, decode 10,
    blocks of 4 positions: A prefills 0-100 (first token at 100), decodes 100-110 (cache 4 -> 5, a second
    block) and 110-120 (its third token: done at 120); idle until B arrives at 150; B prefills 150-250 and
    decodes 250-260. TTFT 100 and 100, end to end 120 and 110, 10 per output token after the first."""
    costs = Fixed(100, 10)
    res = simulate_serving(
        [Request(0, 0, 4, 3), Request(1, 150, 4, 2)], costs, capacity_blocks=10, settings=ServeSettings(block_tokens=4)
    )
    a, b = _by_id(res)[0], _by_id(res)[1]
    assert (a.first_token_cycle, a.finish_cycle, b.first_token_cycle, b.finish_cycle) == (100, 120, 250, 260)
    assert [(it.kind, it.start, it.end, it.requests, it.blocks_used) for it in res.iterations] == [
        (IterationKind.PREFILL, 0, 100, (0,), 1),
        (IterationKind.DECODE, 100, 110, (0,), 2),
        (IterationKind.DECODE, 110, 120, (0,), 0),  # A finished: its blocks are free again
        (IterationKind.PREFILL, 150, 250, (1,), 1),
        (IterationKind.DECODE, 250, 260, (1,), 0),
    ]
    assert costs.decoded == [(4,), (5,), (4,)]  # each step against the cache before its new token
    res.clock_mhz = 1.0  # 1 cycle = 1 us
    lat = res.latencies_ms()
    assert lat == {Latency.TTFT: [0.1, 0.1], Latency.TPOT: [0.01, 0.01], Latency.E2E: [0.12, 0.11]}


def test_preemption_by_recompute_by_hand():
    """Three blocks of 2 positions; A (prompt 2, 4 tokens) and B (prompt 2, 3 tokens) both arrive at 0;
    prefill 100 a request, decode 10 a step. Both prefill 0-200 (one block each). At 200 both need a
    second block, one is free: B (admitted last) is preempted, A decodes 200-210. B comes back first
    (prefill-first): its prompt and its 1 generated token less the one not yet cached, 2 positions,
    210-310. At 310 A's cache (3 -> 4) fits its blocks, B needs one, none free: B again; A decodes
    310-320. B prefills 320-420; at 420 A (4 -> 5) and B both need one, 0 free: B preempted a third time,
    A decodes 420-430 and is done (4 tokens), freeing 3 blocks. B prefills 430-530 and decodes 530-540
    and 540-550, done. A: first token 200, done 430; B: first token 200 (kept across preemptions), done
    550, 3 preemptions."""
    costs = Fixed(100, 10)
    res = simulate_serving(
        [Request(0, 0, 2, 4), Request(1, 0, 2, 3)], costs, capacity_blocks=3, settings=ServeSettings(block_tokens=2)
    )
    a, b = _by_id(res)[0], _by_id(res)[1]
    assert (a.first_token_cycle, a.finish_cycle, a.preemptions) == (200, 430, 0)
    assert (b.first_token_cycle, b.finish_cycle, b.preemptions) == (200, 550, 3)
    assert [(it.kind.value, it.start, it.end, it.requests, it.preempted) for it in res.iterations] == [
        ("prefill", 0, 200, (0, 1), ()),
        ("decode", 200, 210, (0,), (1,)),
        ("prefill", 210, 310, (1,), ()),
        ("decode", 310, 320, (0,), (1,)),
        ("prefill", 320, 420, (1,), ()),
        ("decode", 420, 430, (0,), (1,)),
        ("prefill", 430, 530, (1,), ()),
        ("decode", 530, 540, (1,), ()),
        ("decode", 540, 550, (1,), ()),
    ]
    assert max(it.blocks_used for it in res.iterations) <= 3
    assert res.to_dict()["preemptions"] == 3


def test_preemption_by_swap_by_hand():
    """The trace above with SWAP (5 cycles a position each way). Both prefill 0-200; at 200 B is
    preempted, its 2 positions copied out (10), A decodes: 200-220. At 220 B's cache and its next token
    need 2 blocks, 1 is free: A decodes alone 220-230 (3 -> 4 positions, no new block) and 230-240 (its
    fourth token: done, 3 blocks free). At 240 B is copied back in (10) and decodes 240-260, then 260-270:
    done at 270 with one preemption and no second prefill (550 by recompute)."""
    costs = Fixed(100, 10)
    res = simulate_serving(
        [Request(0, 0, 2, 4), Request(1, 0, 2, 3)], costs, capacity_blocks=3,
        settings=ServeSettings(block_tokens=2, preemption=Preemption.SWAP),
    )  # fmt: skip
    a, b = _by_id(res)[0], _by_id(res)[1]
    assert (a.first_token_cycle, a.finish_cycle, a.preemptions) == (200, 240, 0)
    assert (b.first_token_cycle, b.finish_cycle, b.preemptions) == (200, 270, 1)
    got = [
        (it.kind.value, it.start, it.end, it.requests, it.preempted, it.swapped_in, it.swap_cycles)
        for it in res.iterations
    ]
    assert got == [
        ("prefill", 0, 200, (0, 1), (), (), 0),
        ("decode", 200, 220, (0,), (1,), (), 10),
        ("decode", 220, 230, (0,), (), (), 0),
        ("decode", 230, 240, (0,), (), (), 0),
        ("decode", 240, 260, (1,), (), (1,), 10),
        ("decode", 260, 270, (1,), (), (), 0),
    ]
    assert costs.decoded == [(2,), (3,), (4,), (2,), (3,)]  # B resumes at its 2 cached positions
    res.clock_mhz = 1.0
    d = res.to_dict()
    assert d["preemption"] == "swap" and d["preemptions"] == 1 and d["swap_ms"] == 0.02


def test_swap_costs_the_host_copy_of_the_cache():
    """GPT-2 INT8: 2 x 12 layers x 768 bytes a position; 100 positions read and written by the host at
    10 GB/s plus its 10 us hand-off: 10 + 2 x 1,843,200 / 10^4 us = 378.64 us, 378,640 cycles at 1 GHz."""
    costs = SimulatedCosts(preset("gpt2"), load_config("nv_full"))
    assert costs.swap(100) == 378_640


def test_chunked_prefill_by_hand():
    """CHUNKED_PREFILL, 4 tokens an iteration, a mixed pass 10 cycles + 1 a token, a decode step 10 (Fixed).
    A (prompt 6, 3 tokens) and B (prompt 4, 2 tokens) at 0. 0-14: A's first 4 prompt tokens (B not
    admitted: no budget left). 14-28: A's last 2 and B's first 2; A's first token at 28. 28-41: A decodes,
    B's last 2 (its first token at 41). 41-51: both decode (a decode-only step); A has 3 tokens, B 2:
    both done at 51. Blocks of 4 positions are taken chunk by chunk."""
    costs = Fixed(100, 10)
    res = simulate_serving(
        [Request(0, 0, 6, 3), Request(1, 0, 4, 2)], costs, capacity_blocks=10,
        settings=ServeSettings(block_tokens=4, policy=Policy.CHUNKED_PREFILL, chunk_tokens=4),
    )  # fmt: skip
    a, b = _by_id(res)[0], _by_id(res)[1]
    assert (a.first_token_cycle, a.finish_cycle, b.first_token_cycle, b.finish_cycle) == (28, 51, 41, 51)
    assert [(it.kind.value, it.start, it.end, it.requests, it.blocks_used) for it in res.iterations] == [
        ("mixed", 0, 14, (0,), 1),
        ("mixed", 14, 28, (0, 1), 3),
        ("mixed", 28, 41, (0, 1), 3),
        ("decode", 41, 51, (0, 1), 0),  # both done: their blocks free again
    ]
    # (cached, new) per sequence and how many positions make a token: A's last chunk, then A's decode and B's
    assert costs.mixes == [(((0, 4),), 0), (((4, 2), (0, 2)), 1), (((6, 1), (2, 2)), 2)]
    assert costs.decoded == [(7, 4)]
    assert res.to_dict()["policy"] == "chunked-prefill"


def test_chunked_prefill_preempts_and_recomputes_in_chunks():
    """Three blocks of 2 positions, 8 tokens an iteration; A (prompt 2, 4 tokens) and B (prompt 2, 3 tokens)
    at 0. 0-14: both prompts (10 + 4; a block each, first tokens at 14). At 14 both decodes need a block, 1
    is free: B (admitted last) is preempted, A decodes alone 14-24 (3 positions, 2 blocks). At 24 A's
    decode needs no block; B comes back for its prompt and its token less the one not yet cached, 2
    positions, in the free block: 24-37 (10 + 3), no token from B. At 37 both need a block, none free: B
    again; A decodes 37-47, its fourth token: done, 3 blocks free. B: 47-59 (its 2 positions again),
    59-69 and 69-79 (its second and third tokens)."""
    costs = Fixed(100, 10)
    res = simulate_serving(
        [Request(0, 0, 2, 4), Request(1, 0, 2, 3)], costs, capacity_blocks=3,
        settings=ServeSettings(block_tokens=2, policy=Policy.CHUNKED_PREFILL, chunk_tokens=8),
    )  # fmt: skip
    a, b = _by_id(res)[0], _by_id(res)[1]
    assert (a.first_token_cycle, a.finish_cycle, a.preemptions) == (14, 47, 0)
    assert (b.first_token_cycle, b.finish_cycle, b.preemptions) == (14, 79, 2)
    assert [(it.kind.value, it.start, it.end, it.requests, it.blocks_used, it.preempted) for it in res.iterations] == [
        ("mixed", 0, 14, (0, 1), 2, ()),
        ("decode", 14, 24, (0,), 2, (1,)),
        ("mixed", 24, 37, (0, 1), 3, ()),
        ("decode", 37, 47, (0,), 0, (1,)),
        ("mixed", 47, 59, (1,), 1, ()),
        ("decode", 59, 69, (1,), 2, ()),
        ("decode", 69, 79, (1,), 0, ()),
    ]
    assert costs.mixes == [(((0, 2), (0, 2)), 2), (((3, 1), (0, 2)), 1), (((0, 2),), 0)]
    assert costs.decoded == [(2,), (4,), (2,), (3,)]


def test_chunked_mixed_step_against_its_parts():
    """The simulator's mixed pass: decodes only is exactly decode_step_graph; a chunk costs more than the
    decodes alone and less than the decodes and the chunk's prefill run one after the other."""
    spec, hw = preset("gpt2"), load_config("nv_full")
    costs = SimulatedCosts(spec, hw)
    assert costs.mixed(((100, 1), (130, 1)), 2) == costs.decode((100, 130))
    both = costs.mixed(((100, 1), (130, 1), (0, 32)), 3)
    assert costs.decode((100, 130)) < both < costs.decode((100, 130)) + costs.prefill(32)


def test_batch_limit_and_fcfs_order():
    """Four requests at 0 with room for two at a time: the first two prefill and decode together, the
    other two wait for them (FCFS), whatever the cache."""
    costs = Fixed(100, 10)
    reqs = [Request(i, 0, 8, 3) for i in range(4)]
    res = simulate_serving(reqs, costs, capacity_blocks=100, settings=ServeSettings(block_tokens=16, max_batch=2))
    kinds = [(it.kind.value, it.requests) for it in res.iterations]
    assert kinds == [
        ("prefill", (0, 1)), ("decode", (0, 1)), ("decode", (0, 1)),
        ("prefill", (2, 3)), ("decode", (2, 3)), ("decode", (2, 3)),
    ]  # fmt: skip
    assert [r.finish_cycle for r in res.requests] == [220, 220, 440, 440]


def test_a_request_that_can_never_fit_is_refused():
    with pytest.raises(NvdlaError, match=r"request 7 \(100 prompt \+ 29 output tokens\) needs 8 KV blocks"):
        simulate_serving([Request(7, 0, 100, 29)], Fixed(1, 1), capacity_blocks=5)
    with pytest.raises(NvdlaError, match="--block-tokens must be a positive integer"):
        ServeSettings(block_tokens=0)


def test_capacity_from_the_memory_beside_the_weights():
    """GPT-2 INT8 on nv_small (32-bit addresses) with 1 GiB of DRAM stated: (1 GiB - the weights) over 16
    positions x 2 (K, V) x 12 layers x 768 bytes."""
    spec, hw = preset("gpt2"), load_config("nv_small").with_values(**{"memory.dram_size_gib": 1.0})
    assert kv_bytes_per_token(spec, Precision.INT8) == 2 * 12 * 768
    expect = (2**30 - weight_bytes(spec, Precision.INT8)) // (16 * 2 * 12 * 768)
    assert kv_capacity_blocks(spec, hw, Precision.INT8, 16) == expect
    with pytest.raises(NvdlaError, match="leave no room for one KV block in the 0.1 GiB of DRAM"):
        kv_capacity_blocks(spec, hw.with_values(**{"memory.dram_size_gib": 0.1}), Precision.INT8, 16)


def test_one_request_served_alone_is_generate():
    """A single request through the simulator-backed costs takes exactly `generate`'s time: its prefill
    and then one decode step per further token at the same cache lengths."""
    spec, hw = preset("gpt2"), load_config("nv_full")
    costs = SimulatedCosts(spec, hw)
    res = simulate_serving([Request(0, 0, 16, 4)], costs, capacity_blocks=1000)
    g = generate(spec, hw, prompt=16, new_tokens=4)
    assert res.requests[0].first_token_cycle == g.ttft_cycles
    assert res.requests[0].finish_cycle == g.total_cycles
    # a mixed batch: each sequence's attention against its own cache length
    mixed = map_model(decode_step_graph(spec, batch=2, kv_len=(16, 40)), hw, precision=Precision.INT8).total_cycles
    assert costs.decode((40, 16)) == mixed


def test_compressed_weights_served_alone_are_generates_compressed_run():
    """`nvdla serve --prune 2:4 --weight-compression`: every iteration streams the weights as stored, so
    one request alone takes exactly `generate`'s time with the same treatment (whose stored bytes
    tests/unit/test_generate.py derives by hand from NVDLA's compressed format), less than dense."""
    spec, hw = preset("gpt2"), load_config("nv_full")
    treated = WeightTreatment("2:4", compression=True)
    res = simulate_serving([Request(0, 0, 16, 4)], SimulatedCosts(spec, hw, weights=treated), capacity_blocks=1000)
    g = generate(spec, hw, prompt=16, new_tokens=4, weights=treated)
    assert res.requests[0].first_token_cycle == g.ttft_cycles
    assert res.requests[0].finish_cycle == g.total_cycles
    assert g.total_cycles < generate(spec, hw, prompt=16, new_tokens=4).total_cycles


def test_arrivals_and_trace(tmp_path):
    reqs = poisson_requests(1000, 100.0, prompt=8, output=4, clock_mhz=1000.0, seed=3)
    gaps = [b.arrival_cycle - a.arrival_cycle for a, b in itertools.pairwise(reqs)]
    assert all(g >= 0 for g in gaps)
    assert 0.9e7 < sum(gaps) / len(gaps) < 1.1e7  # mean gap 1/100 s = 1e7 cycles at 1 GHz
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt,output\n0,10,2\n0.5,20,3\n")
    assert read_trace(p, 1000.0) == [Request(0, 0, 10, 2), Request(1, 500_000_000, 20, 3)]
    p.write_text("arrival,prompt,output\n0,10,2\n")
    with pytest.raises(NvdlaError, match=r"missing column\(s\) \['arrival_s'\]"):
        read_trace(p, 1000.0)
    p.write_text("arrival_s,prompt,output\n0,ten,2\n")
    with pytest.raises(NvdlaError, match=r"t.csv:2: \['0', 'ten', '2'\] is not arrival_s"):
        read_trace(p, 1000.0)
    with pytest.raises(NvdlaError, match="--rate must be a positive"):
        poisson_requests(3, 0.0, prompt=8, output=4, clock_mhz=1000.0)


def test_serve_cli(tmp_path, capsys):
    out = tmp_path / "rep"
    rc = main(
        ["serve", "gpt2", "--hw", "nv_full", "--dram-gib", "0.2", "--rate", "100", "--requests", "6",
         "--prompt", "16", "--output", "3", "--report", str(out)]
    )  # fmt: skip
    assert rc == 0
    text = capsys.readouterr().out
    assert "ttft_ms" in text and "requests/s" in text and "0.2 GiB of DRAM in nv_full" in text
    d = json.loads((out / "serve.json").read_text())
    assert d["requests"] == 6 and set(d["percentiles"]) == {"ttft_ms", "tpot_ms", "e2e_ms"}
    assert len((out / "requests.csv").read_text().splitlines()) == 7
    assert 'id="plot-timeline"' in (out / "report.html").read_text()
    assert main(["serve", "t5-base", "--requests", "1"]) == 2
    assert "decoder-only" in capsys.readouterr().err
    # the weight what-ifs, as in map and generate: the treatment printed and kept in serve.json
    rc = main(["serve", "gpt2", "--requests", "2", "--prompt", "16", "--output", "2", "--prune", "2:4",
               "--weight-compression", "--report", str(out)])  # fmt: skip
    assert rc == 0 and "weights: prune 2:4, compression on" in capsys.readouterr().out
    assert json.loads((out / "serve.json").read_text())["weights"]["density"] == 0.5
    assert main(["serve", "gpt2", "--requests", "1", "--prune", "3:4"]) == 2
    assert "--prune must be 2:4 or magnitude:S" in capsys.readouterr().err


# ---- rate sweeps and latency targets ----


def _evenly(n: int, prompt: int = 4, output: int = 1):
    """n requests 1/rate seconds apart (cycles at 1 GHz)."""
    return lambda rate: [Request(i, round(i / rate * 1e9), prompt, output) for i in range(n)]


def test_rate_sweep_by_hand():
    """Five one-token requests, a prefill of 1 ms (10^6 cycles at 1 GHz). At 500/s (2 ms apart) each is
    prefilled alone on arrival: TTFT 1 ms each; tokens 5 over 0-9 ms, 555.6 a second. At 2,000/s (0.5 ms
    apart) r0 runs 0-1; at 1 r1 and r2 (arrived 0.5, 1.0) are prefilled together, 1-3; at 3 r3 and r4
    (1.5, 2.0), 3-5: TTFTs 1, 2.5, 2, 3.5, 3 ms, p50 2.5, p99 3.48 (numpy's linear interpolation)."""
    sweep = sweep_rates(_evenly(5), [2000, 500], Fixed(10**6, 0), capacity_blocks=100)
    slow, fast = (p.row() for p in sweep.points)
    assert slow["rate_per_s"] == 500 and fast["rate_per_s"] == 2000
    assert (slow["ttft_p50_ms"], slow["ttft_p99_ms"]) == (1.0, 1.0)
    assert slow["output_tokens_per_s"] == pytest.approx(5 / 0.009, abs=1e-3)
    assert fast["ttft_p50_ms"] == 2.5 and fast["ttft_p99_ms"] == pytest.approx(3.48)
    assert fast["meets_slo"] is None and sweep.best_rate_per_s is None and sweep.bracket is None


def test_highest_rate_meeting_a_target_by_hand():
    """Same requests, target p99 TTFT <= 1 ms: met while requests are at least a prefill apart, i.e. up to
    1,000/s exactly (at 1,000/s r1 arrives as r0's prefill ends). Bisection between 500 (met) and 2,000
    (missed) tries 1,000 first (the geometric midpoint) and then only higher rates, all missed: the bracket
    narrows from a factor 2 to 2^(1/16)."""
    sweep = sweep_rates(
        _evenly(5), [500, 2000], Fixed(10**6, 0), capacity_blocks=100, slo=Slo(ttft_ms=1.0), bisect_steps=5
    )
    assert sweep.best_rate_per_s == pytest.approx(1000)
    lo, hi = sweep.bracket
    assert lo == pytest.approx(1000) and hi == pytest.approx(1000 * 2 ** (1 / 16))  # 2 -> 2^(1/16) wide
    assert [p.meets for p in sweep.points] == [True, True, False, False, False, False, False]
    d = sweep.to_dict()
    assert d["slo"] == "p99 TTFT <= 1 ms" and len(d["rates"]) == 7


def test_sweep_ends_without_a_bracket():
    """Every rate meets the target: the highest swept rate, no bracket; the lowest misses: none."""
    met = sweep_rates(_evenly(3), [10, 20], Fixed(10**6, 0), capacity_blocks=100, slo=Slo(ttft_ms=1.0))
    assert met.best_rate_per_s == 20 and met.bracket is None
    missed = sweep_rates(_evenly(3), [5000], Fixed(10**6, 0), capacity_blocks=100, slo=Slo(ttft_ms=1.0))
    assert missed.best_rate_per_s is None and missed.bracket is None and len(missed.points) == 1


def test_tpot_target_counts_only_multi_token_requests():
    """Decode 0.1 ms a step, one request alone: TPOT 0.1 ms; a 0.05 ms target misses, 0.1 meets."""
    arrivals = _evenly(1, output=3)
    assert sweep_rates(arrivals, [1], Fixed(10**6, 10**5), capacity_blocks=9, slo=Slo(tpot_ms=0.1)).points[0].meets
    assert not sweep_rates(arrivals, [1], Fixed(10**6, 10**5), capacity_blocks=9, slo=Slo(tpot_ms=0.05)).points[0].meets


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "needs --slo-ttft-ms, --slo-tpot-ms or both"),
        ({"ttft_ms": -1}, "--slo-ttft-ms must be a positive number"),
        ({"tpot_ms": 1, "percentile": 95}, "--slo-percentile must be 50, 90 or 99"),
    ],
)
def test_bad_targets_are_refused_by_name(kwargs, message):
    with pytest.raises(NvdlaError, match=message):
        Slo(**kwargs)


def test_bad_rates_are_refused_by_name():
    with pytest.raises(NvdlaError, match="--rates must be positive numbers"):
        sweep_rates(_evenly(1), [0], Fixed(1, 1), capacity_blocks=9)
    with pytest.raises(NvdlaError, match="--bisect must be a whole number"):
        sweep_rates(_evenly(1), [1], Fixed(1, 1), capacity_blocks=9, bisect_steps=-1)


def test_serve_rate_sweep_cli(tmp_path, capsys):
    out = tmp_path / "sweep"
    rc = main(
        ["serve", "gpt2", "--hw", "nv_full", "--requests", "4", "--prompt", "16", "--output", "2",
         "--rates", "5,500", "--slo-ttft-ms", "1000", "--bisect", "0", "--report", str(out)]
    )  # fmt: skip
    assert rc == 0
    text = capsys.readouterr().out
    assert "every rate run meets p99 TTFT <= 1000 ms; the highest is 500.00/s" in text
    d = json.loads((out / "sweep.json").read_text())
    assert [r["rate_per_s"] for r in d["rates"]] == [5.0, 500.0] and d["highest_rate_meeting_slo_per_s"] == 500.0
    assert len((out / "sweep.csv").read_text().splitlines()) == 3
    assert 'id="plot-sweep"' in (out / "report.html").read_text()
    assert main(["serve", "gpt2", "--rates", "5,x"]) == 2
    assert "--rates must be comma-separated numbers" in capsys.readouterr().err
