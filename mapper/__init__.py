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


# The API below is imported on first use (PEP 562): a command that needs one module of the mapper (the CLI's
# option enums, say) does not pay for importing all of it.
_API = {
    "from_hf_config": "nvdla_mapper.frontends.hf_config",
    "PRESETS": "nvdla_mapper.frontends.presets",
    "build_graph": "nvdla_mapper.frontends.presets",
    "map_model": "nvdla_mapper.passes",
    "write_results": "nvdla_mapper.reports.files",
    "write_html": "nvdla_mapper.reports.html",
    "MapResult": "nvdla_mapper.results",
    "SearchResult": "nvdla_mapper.search.tiling_search",
    "candidate_plans": "nvdla_mapper.search.tiling_search",
    "exhaustive_plan": "nvdla_mapper.search.tiling_search",
    "naive_plan": "nvdla_mapper.search.tiling_search",
    "search_plan": "nvdla_mapper.search.tiling_search",
    "load_sweep": "nvdla_mapper.studies.sweep",
    "pareto_front": "nvdla_mapper.studies.sweep",
    "run_sweep": "nvdla_mapper.studies.sweep",
    "sweep_from_dict": "nvdla_mapper.studies.sweep",
}


def __getattr__(name: str):
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'nvdla_mapper' has no attribute {name!r}")


__all__ = sorted(_API)
