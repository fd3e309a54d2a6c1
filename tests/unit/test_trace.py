"""Perfetto traces: slices on one track (pid, tid) must nest or be disjoint; the checker is checked too."""

from __future__ import annotations

from collections import defaultdict

from nvdla_sim.engine.trace import span_events


def partial_overlaps(doc: dict) -> list[tuple[str, tuple[int, int], tuple[int, int]]]:
    """Slices that start inside another slice of their track and end after it (Perfetto cannot stack
    them), as (track name, outer, inner) in cycles."""
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    by_track = defaultdict(list)
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            by_track[(e["pid"], e["tid"])].append((e["args"]["start_cycle"], e["args"]["end_cycle"]))
    bad = []
    for key, slices in by_track.items():
        stack: list[tuple[int, int]] = []
        for s in sorted(slices, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1][1] <= s[0]:
                stack.pop()
            if stack and s[1] > stack[-1][1]:
                bad.append((names.get(key, str(key)), stack[-1], s))
            stack.append(s)
    return bad


def thread_names(doc: dict) -> set[str]:
    return {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}


def _doc(spans):
    return {"traceEvents": span_events(spans, clock_mhz=1000.0)}


def test_the_checker_finds_a_partial_overlap_and_accepts_nesting():
    one_track = [
        {"ph": "X", "pid": 1, "tid": 0, "args": {"start_cycle": a, "end_cycle": b}} for a, b in ((0, 10), (5, 15))
    ]
    assert len(partial_overlaps({"traceEvents": one_track})) == 1
    nested = [{"ph": "X", "pid": 1, "tid": 0, "args": {"start_cycle": a, "end_cycle": b}} for a, b in ((0, 10), (2, 4))]
    assert partial_overlaps({"traceEvents": nested}) == []


def test_overlapping_slices_of_a_track_go_to_further_lanes():
    """a [0,10), b [5,15), c [10,20) on one track: a and c share the first lane, b takes a second."""
    doc = _doc([("T", "a", 0, 10), ("T", "b", 5, 15), ("T", "c", 10, 20), ("U", "d", 0, 30)])
    assert partial_overlaps(doc) == []
    tid_name = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    lane = {e["name"]: tid_name[e["tid"]] for e in doc["traceEvents"] if e.get("ph") == "X"}
    assert lane == {"a": "T", "b": "T #2", "c": "T", "d": "U"}
