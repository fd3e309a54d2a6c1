"""Periodic steady states, found and skipped by one mechanism: a run records the state it is in at each
step, relative to the step's own time, in a PeriodMemo; when a state comes back p steps later, shifted by D
cycles, and the steps still to come repeat the p before them, every later step is its twin p steps before
shifted by D, and the run skips whole periods. Each kind of step is a small adapter over PeriodMemo that says
what its state is and how a jump is applied:

- items of a hardware layer (tile_pipeline._FastForward: after an item);
- hardware layers of a chain (layer_skip.LayerSkip: at a layer's start), which is also how the independent
  instances of a layer (heads, groups: engine.conv.instances_cycles) and the bands of a split layer run;
- a long stream's chunks (engine.simulate: cut to its first chunks and whole periods of the pipeline's last
  jump);
- the alike blocks of a model's schedule (mapper.schedule: after a block).

Every skip is exact (the same figures as running every step; tests/unit/test_fast_forward.py,
test_layer_skip.py, test_conv_instances.py and test_schedule.py compare each with it off). SteadyState, one
value passed down explicitly (simulate, the processors, engine.conv, engine.simulate,
tile_pipeline.run_items), says which skips a run makes; their thresholds only trade the bookkeeping against
what it saves; a run that records its events (a trace) times every item.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SteadyState:
    items: bool = True  # jump over whole periods of alike items in a run (tile_pipeline._FastForward)
    min_items: int = 32  # shorter lists of items are timed item by item (the bookkeeping would cost more)
    layers: bool = True  # jump over whole periods of alike hardware layers in a chain (layer_skip.LayerSkip)
    # shorter chains run layer by layer (the bookkeeping would cost more than it saves; a decode step's
    # attention runs 4 instances of ~100 items, one per K/V group: the fourth repeats the third)
    min_layers: int = 4
    # nor are chains of fewer items in all (TinyLlama's decode PV: 4 layers of 2 items, 20% slower with the
    # skip's signatures and states than run layer by layer)
    min_chain_items: int = 32
    # a longer stream of identical chunks is timed from its first `stream_cut` (+ < 1 period); 0: every chunk
    stream_cut: int = 1024


STEADY = SteadyState()  # what every simulation uses
ONE_BY_ONE = SteadyState(items=False, layers=False, stream_cut=0)  # every item and chunk timed: the reference


class PeriodMemo:
    """The states a run passed through lately, each with what was true then (its time, its counters), to find
    the period at which a state comes back. At most `limit` are kept (the longest period looked for)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: dict[tuple, tuple] = {}

    def __bool__(self) -> bool:
        return bool(self.seen)

    def clear(self) -> None:
        self.seen.clear()

    def repeat(self, state: tuple, now: tuple) -> tuple | None:
        """What was kept when the run was last in `state` (the period is found: everything is forgotten),
        or None, `now` kept for it."""
        before = self.seen.get(state)
        if before is None:
            if len(self.seen) >= self.limit:
                self.seen.clear()
            self.seen[state] = now
            return None
        self.seen.clear()
        return before
