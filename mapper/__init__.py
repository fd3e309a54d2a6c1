"""mapper: transformer (and CNN) workloads onto NVDLA hardware layers: lowering, tiling, schedule, report.

Python API for exploration scripts:
    build_graph(PRESETS["bert-base"], seq=128) -> workload graph
    map_model(graph, hw, precision=..., batch=1, seq=128) -> MapResult (.to_dict(), write_results, write_html)
    run_sweep(sweep_from_dict({...}), "out/sweep.sqlite") -> list of result rows; pareto_front(rows)
"""

from .lowering import HostModel
from .passes import MapResult, map_model, write_results
from .report import write_html
from .sweep import load_sweep, pareto_front, run_sweep, sweep_from_dict
from .tiling_search import SearchResult, candidate_plans, exhaustive_plan, naive_plan, search_plan
from .zoo import PRESETS, build_graph, from_hf_config

__all__ = [
    "PRESETS",
    "HostModel",
    "MapResult",
    "SearchResult",
    "build_graph",
    "candidate_plans",
    "exhaustive_plan",
    "from_hf_config",
    "load_sweep",
    "map_model",
    "naive_plan",
    "pareto_front",
    "run_sweep",
    "search_plan",
    "sweep_from_dict",
    "write_html",
    "write_results",
]
