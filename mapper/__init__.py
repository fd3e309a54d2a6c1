"""mapper: transformer (and CNN) workloads onto NVDLA hardware layers: lowering, tiling, schedule, report."""

from .tiling_search import SearchResult, candidate_plans, exhaustive_plan, naive_plan, search_plan

__all__ = ["SearchResult", "candidate_plans", "exhaustive_plan", "naive_plan", "search_plan"]
