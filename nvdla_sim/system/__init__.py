"""The system around NVDLA: the parts a config chooses beside the accelerator's own units (the host CPU
today; the driver, the interconnect and the memory models follow: docs/architecture.md)."""

from nvdla_sim.system.host import HostModel, HostOp, HostWork, PerElementHost, RooflineHost, host_model

__all__ = ["HostModel", "HostOp", "HostWork", "PerElementHost", "RooflineHost", "host_model"]
