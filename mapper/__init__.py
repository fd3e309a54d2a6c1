"""mapper: transformer (and CNN) workloads onto NVDLA hardware layers: lowering, tiling, schedule, report.

Python API for exploration scripts:
    build_graph(PRESETS["bert-base"], seq=128) -> workload graph
    map_model(graph, hw, precision=..., batch=1, seq=128) -> MapResult (.to_dict(), write_results, write_html)
    run_sweep(sweep_from_dict({...}), "out/sweep.sqlite") -> SweepRun (.rows, evaluated, recomputed); pareto_front(rows)
"""

# The folder mapper/ installs as nvdla_mapper (pyproject's package-dir). Imported under its folder name from the
# repository root it would load a second copy of every module beside nvdla_mapper's, with its own registries and
# caches, so that is refused here.
if __name__ != "nvdla_mapper":
    raise ImportError(f"import nvdla_mapper, not {__name__}: the folder mapper/ is the package nvdla_mapper")


from nvdla_mapper.frontends.hf_config import from_hf_config
from nvdla_mapper.frontends.presets import PRESETS, build_graph
from nvdla_mapper.lowering.rules import HostModel
from nvdla_mapper.passes import map_model
from nvdla_mapper.reports.files import write_results
from nvdla_mapper.reports.html import write_html
from nvdla_mapper.results import MapResult
from nvdla_mapper.search.tiling_search import SearchResult, candidate_plans, exhaustive_plan, naive_plan, search_plan
from nvdla_mapper.studies.sweep import load_sweep, pareto_front, run_sweep, sweep_from_dict

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
