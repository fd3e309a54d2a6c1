"""Chrome / Perfetto trace export of a timeline (JSON "traceEvents", complete events, times in us)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from nvdla_sim.engine.stats import Event
from nvdla_sim.files import write_json


def span_events(
    spans: Iterable[tuple[str, str, int, int]], *, clock_mhz: float, pid: int = 1, process: str = "nvdla"
) -> list[dict]:
    """(track, name, start cycle, end cycle) spans -> Chrome trace dicts, one thread per track. Perfetto
    draws the slices of a thread as a stack and needs them disjoint or nested: a slice that overlaps
    another on its track (a fetch issued while the previous one is in flight) goes to a further lane of
    that track, named `track #2`, `#3`, ..."""
    out: list[dict] = [{"ph": "M", "pid": pid, "name": "process_name", "args": {"name": process}}]
    order: list[str] = []  # tracks in order of first appearance
    lanes: dict[str, list[int]] = {}  # track -> end cycle of each lane's last slice
    tids: dict[tuple[str, int], int] = {}
    placed = []
    for i, (track, name, start, end) in enumerate(spans):
        placed.append((start, -end, i, track, name, end))
        if track not in lanes:
            lanes[track] = []
            order.append(track)
    for start, _, _, track, name, end in sorted(placed):
        ends = lanes[track]
        lane = next((k for k, e in enumerate(ends) if e <= start), len(ends))
        if lane == len(ends):
            ends.append(end)
        else:
            ends[lane] = end
        tid = tids.setdefault((track, lane), len(tids))
        out.append(
            {
                "ph": "X",
                "pid": pid,
                "tid": tid,
                "name": name,
                "ts": start / clock_mhz,
                "dur": max(end - start, 0) / clock_mhz,
                "args": {"start_cycle": start, "end_cycle": end},
            }
        )
    for (track, lane), tid in tids.items():
        name = track if lane == 0 else f"{track} #{lane + 1}"
        out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}})
        # Perfetto orders threads by sort index: a track's lanes together, tracks in order of appearance
        sort = order.index(track) * 64 + lane
        out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": sort}})
    return out


def trace_events(events: Iterable[Event], *, clock_mhz: float, pid: int = 1, process: str = "nvdla") -> list[dict]:
    """Unit events -> Chrome trace dicts; one thread per unit."""
    spans = ((e.unit.value.upper(), e.name, e.start, e.end) for e in events)
    return span_events(spans, clock_mhz=clock_mhz, pid=pid, process=process)


def write_trace_doc(path: str | Path, trace: list[dict]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_json(path, {"traceEvents": trace, "displayTimeUnit": "ns"}, indent=None, newline=False)


def write_trace(path: str | Path, events: Iterable[Event], *, clock_mhz: float, process: str = "nvdla") -> Path:
    return write_trace_doc(path, trace_events(events, clock_mhz=clock_mhz, process=process))
