"""Several masters on one DRAM (nvdla_sim.system.shared_memory): max-min fair shares of the memory's rate,
each master slowed by what it is not given. Expected ends by hand."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvdla_sim.system.shared_memory import Demand, Profile, alike, fair_shares, share


def _flat(ns: float, nbytes: float, write: float = 0.0) -> Profile:
    return Profile.of([Demand(0, ns, nbytes, write)], ns)


def test_two_streaming_masters_each_get_half():
    """Two masters streaming 64,000 bytes each in 1,000 ns alone (64 bytes a ns: all the memory's 64) get 32
    each together: both end at 2,000 ns, twice as long as alone."""
    assert share([_flat(1000, 64000), _flat(1000, 64000)], lambda asks: 64.0) == [2000, 2000]


def test_a_master_asking_less_than_its_share_keeps_its_pace():
    """One asks 16 bytes a ns (under an equal share of 32) and gets them: it ends at 1,000 ns as alone; the
    other gets the 48 left, 0.75 of its 64, so by 1,000 ns it is 750 ns into its run, and the last 250 run
    alone at full speed: 1,250 ns."""
    assert share([_flat(1000, 16000), _flat(1000, 64000)], lambda asks: 64.0) == pytest.approx([1000, 1250])


def test_a_memory_that_keeps_up_slows_nobody_and_a_master_alone_is_never_slowed():
    assert share([_flat(1000, 20000), _flat(500, 20000, 10000)], lambda asks: 100.0) == [1000, 500]
    assert share([_flat(1000, 64000 * 5)], lambda asks: 64.0) == [1000]  # alone: its own timing stands


def test_the_memorys_rate_follows_what_is_asked():
    """The capacity function sees each running master's (read, write) asks: a memory that gives 48 bytes a ns
    when one master writes (its turnarounds) and 64 when both only read."""
    seen = []

    def rate(asks):
        seen.append(tuple(asks))
        return 48.0 if any(w for _, w in asks) else 64.0

    ends = share([_flat(1000, 32000, 32000), _flat(1000, 64000)], rate)
    # together they ask 64 + 64 of 48: 24 each, speeds 0.375; both end together at 1000 / 0.375
    assert ends == pytest.approx([1000 / 0.375] * 2) and seen[0] == ((32.0, 32.0), (64.0, 0.0))


def test_a_profile_spreads_each_task_over_its_time_and_repeats():
    p = Profile.of([Demand(0, 10, 100, 0), Demand(5, 15, 0, 50), Demand(15, 15, 7, 0)], 20)
    assert p.breakpoints == (0, 5, 10, 15, 20)
    assert p.read_rate == (10, 10, 0, 0) and p.write_rate == (0, 5, 5, 0)
    twice = p.repeated(2)
    assert twice.length == 40 and twice.breakpoints[4:6] == (20, 25) and twice.read_rate[4] == 10


@settings(max_examples=200, deadline=None)
@given(asks=st.lists(st.floats(0, 100), min_size=1, max_size=6), cap=st.floats(1, 300))
def test_fair_shares_are_max_min_fair(asks, cap):
    """Nobody gets more than asked; all of the memory is given while anyone wants more; whoever gets less than
    asked gets at least as much as anyone else (max-min fairness)."""
    got = fair_shares(asks, cap)
    assert all(g <= a + 1e-9 for g, a in zip(got, asks, strict=True))
    if sum(asks) > cap:
        assert sum(got) == pytest.approx(cap)
        short = [g for g, a in zip(got, asks, strict=True) if g < a - 1e-9]
        assert all(s >= max(got) - 1e-9 for s in short)
    else:
        assert got == asks


def test_a_pipeline_of_two_stages_by_hand():
    """Stage B takes input i after stage A has finished it. Apart (a memory that keeps up): A's 100-ns jobs end
    at 100, 200, 300 and B's 50-ns jobs 50 after each. Both streaming at the memory's whole rate: A's first
    input runs alone (100); then A's second and B's first share it, each at half speed (both end at 300), then
    A's third and B's second (500), and B's last runs alone (600)."""
    from nvdla_sim.system.shared_memory import Master, share_jobs

    a, b = _flat(100, 6400), _flat(50, 3200)
    assert share_jobs([Master((a,) * 3), Master((b,) * 3, waits=((0, 0),))], lambda asks: 1e9) == [
        [100, 200, 300], [150, 250, 350]
    ]  # fmt: skip
    full = _flat(100, 6400)  # 64 bytes a ns, all of the memory
    ends = share_jobs([Master((full,) * 3), Master((full,) * 3, waits=((0, 0),))], lambda asks: 64.0)
    assert ends == [pytest.approx([100, 300, 500]), pytest.approx([300, 500, 600])]
    with pytest.raises(ValueError, match=r"waits \(0, 0\) must name another master with its jobs up to 4"):
        share_jobs([Master((a,) * 3), Master((b,) * 4, waits=((0, 0),))], lambda asks: 64.0)
    with pytest.raises(ValueError, match=r"masters 0 -> 1 -> 0 wait for each other's same job: none can start"):
        share_jobs([Master((a,), waits=((1, 0),)), Master((b,), waits=((0, 0),))], lambda asks: 64.0)
    with pytest.raises(ValueError, match=r"masters 1 -> 2 -> 1 wait for each other's same job"):
        share_jobs(
            [Master((a,)), Master((a,), waits=((2, 0),)), Master((b,), waits=((0, 0), (1, 0)))], lambda asks: 1.0
        )


def test_a_master_asking_alone_runs_as_alone_whatever_the_rate():
    """While the other master waits or asks nothing, a master keeps the pace its own run had (its own mix
    timed it), even where the memory's rate for a shared mix would be lower."""
    idle_then_busy = Profile.of([Demand(500, 1000, 32000, 0)], 1000)
    assert share([_flat(500, 64000 * 5 // 10), idle_then_busy], lambda asks: 1.0) == [500, 1000]
    with pytest.raises(ValueError, match="must be above 0"):
        share([_flat(10, 100), _flat(10, 100)], lambda asks: 0.0)


def test_alike_masters_in_step_by_hand():
    """Four alike masters, each 1,000 ns alone: 200 ns asking nothing, 500 ns streaming 32 bytes a ns read
    and 16 written, 300 ns asking 8 a ns. On a 64-byte-a-ns memory the stream's four x 48 take three times
    its 500 ns (1,500), the last stretch's four x 8 = 32 fit (300): 200 + 1,500 + 300 = 2,000 ns. One master
    runs as alone."""
    p = Profile.of([Demand(200, 700, 32 * 500, 16 * 500), Demand(700, 1000, 4 * 300, 4 * 300)], 1000)
    assert alike(p, 4, lambda asks: 64.0) == pytest.approx(2000)
    assert alike(p, 1, lambda asks: 1.0) == 1000
    with pytest.raises(ValueError, match="must be above 0"):
        alike(p, 2, lambda asks: 0.0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 90), st.integers(1, 40), st.integers(0, 5000), st.integers(0, 3000)),
             min_size=1, max_size=6),
    st.integers(1, 6),
    st.sampled_from([16.0, 64.0, 200.0]),
)  # fmt: skip
def test_alike_is_what_share_gives_alike_masters(tasks, masters, rate):
    """The closed form against the general max-min sharing of `masters` copies of one profile, with a memory
    whose rate depends on what is asked (less when anyone writes)."""
    p = Profile.of([Demand(s, s + d, r, w) for s, d, r, w in tasks], 130)

    def capacity(asks):
        return rate * (0.75 if any(w for _, w in asks) else 1.0)

    ends = share([p] * masters, capacity)
    assert alike(p, masters, capacity) == pytest.approx(ends[0], rel=1e-9)
    assert ends == pytest.approx([ends[0]] * masters, rel=1e-9)


def test_a_decoder_split_in_two_stages_by_hand():
    """Two stages of a decoder (50 ns each alone, apart), three tokens: stage 2 takes a token after stage 1,
    stage 1 the next token only after stage 2 has finished the one before (lag 1): one token at a time,
    100 ns each, the stages taking turns. With two micro-batches in flight (lag 2, six jobs) the stages
    overlap: stage 1 ends its jobs at 50, 100, 150, ...; stage 2 one stage later."""
    from nvdla_sim.system.shared_memory import Master, share_jobs

    half = _flat(50, 100)
    one = share_jobs([Master((half,) * 3, waits=((1, 1),)), Master((half,) * 3, waits=((0, 0),))], lambda asks: 1e9)
    assert one == [[50, 150, 250], [100, 200, 300]]
    two = share_jobs([Master((half,) * 6, waits=((1, 2),)), Master((half,) * 6, waits=((0, 0),))], lambda asks: 1e9)
    assert two == [[50, 100, 150, 200, 250, 300], [100, 150, 200, 250, 300, 350]]
