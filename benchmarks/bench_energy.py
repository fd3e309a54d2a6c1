"""What energy and area add to a map (issue 28 target: at most 10% of a `nvdla map` run).

Maps each model once (its time: the map), then prices it (MapResult.energy: the layers' activity, the
components, leakage and area; the components from the disk cache, as on any run after the first).

    .venv/bin/python benchmarks/bench_energy.py
"""

from __future__ import annotations

import time

from nvdla_mapper.frontends.cnn import CNN_PRESETS
from nvdla_mapper.frontends.presets import PRESETS, build_graph
from nvdla_mapper.passes import map_model
from nvdla_sim import Precision, load_config
from nvdla_sim.energy.components import components

JOBS = [("bert-base", "nv_full"), ("gpt2", "nv_small"), ("resnet50", "nv_full"), ("vit-b16", "nv_large")]


def main() -> None:
    print(f"{'model':<12}{'config':<10}{'map s':>8}{'energy s':>10}{'share':>8}")
    for model, cfg in JOBS:
        hw = load_config(cfg)
        components(hw)  # the component table (computed once per build and node, then from the disk cache)
        g = CNN_PRESETS[model](1) if model in CNN_PRESETS else build_graph(PRESETS[model])
        t0 = time.perf_counter()
        res = map_model(g, hw, precision=Precision.INT8)
        t1 = time.perf_counter()
        res.energy()
        t2 = time.perf_counter()
        print(f"{model:<12}{cfg:<10}{t1 - t0:>8.2f}{t2 - t1:>10.3f}{(t2 - t1) / (t1 - t0):>8.1%}")


if __name__ == "__main__":
    main()
