"""How a run times its periodic steady states: one value, passed down explicitly (simulate, the processors,
engine.conv, engine.simulate, tile_pipeline.run_items).

Three mechanisms skip work whose result a period earlier already gives, each exact (the same figures as
running everything; tests/unit/test_fast_forward.py and test_layer_skip.py compare every figure with it
off): tile_pipeline's fast-forward over whole periods of alike items, layer_skip's over whole periods of
alike hardware layers of a chain, and engine.simulate's cut of a long stream to its first chunks and whole
periods. Their thresholds only trade the bookkeeping against what it saves; a run that records its events
(a trace) times every item.
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
