"""The shipped NVDLA hardware configs (*.toml), installed as the package data nvdla_sim.configs."""
