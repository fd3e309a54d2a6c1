"""What every processor provides: the interface the simulator, the energy model, the mapper and the program
passes call, never a processor's own functions.

A processor is what NVIDIA's firmware programs as one operation (kmd/firmware/include/dla_interface.h: the
BDMA, CONV, SDP, PDP, CDP and RUBIK processors, each with its own register groups and interrupt); the
datapath pieces a processor is made of (CDMA, CBUF, CSC, CMAC, CACC, the LUT) are in nvdla_sim.units.
"""

from __future__ import annotations

from typing import Protocol

from nvdla_sim.config import HwConfig
from nvdla_sim.engine.simulate import StreamWork, simulate_stream
from nvdla_sim.engine.stats import Activity, Bound, LayerStats, Unit
from nvdla_sim.engine.steady import STEADY, SteadyState
from nvdla_sim.engine.tiling import TilePlan
from nvdla_sim.processors.registers import RegisterView
from nvdla_sim.units import cdma


class Processor(Protocol):
    """One NVDLA processor: its hardware layer, the config it reads, its timing and its activity."""

    name: str  # the firmware's name of the processor (dla_interface.h DLA_OP_*, lower case)
    label: str  # how reports name it
    layer_type: type  # the hardware layer (nvdla_sim.layers) it runs
    config_sections: tuple[str, ...]  # the fields of HwConfig (sections, flags) its timing and energy read
    # what runs one of its layers at a time: "nvdla" for the processors of the core's pipeline (one hardware
    # layer at a time, in ping-pong register groups), its own name for one that runs beside them
    engine: str
    copy_atom_bytes: int  # > 0: it copies memory to memory in atoms of this many bytes (copy_layer); 0: it does not
    registers: RegisterView | None  # its register view (decode, emit, execute); None: programs cannot hold it yet

    def present(self, hw: HwConfig) -> bool:
        """Whether the build has this processor."""
        ...

    def simulate(
        self, layer, hw: HwConfig, plan: TilePlan | None, *, record_events: bool, steady: SteadyState = STEADY
    ) -> LayerStats:
        """The layer's streaming time, traffic and unit activity (from its first request to its last write);
        `steady`: how its steady states are skipped (engine.steady)."""
        ...

    def fixed_latency(self, layer, hw: HwConfig) -> tuple[int, int, int]:
        """(launch, pipeline, completion) cycles the layer adds to its streaming time, from its op enable
        to its interrupt."""
        ...

    def activity(self, layer, stats: LayerStats, hw: HwConfig) -> Activity:
        """The layer's action counts, by component, as simulated (`stats`)."""
        ...

    def copy_layer(self, name: str, nbytes: int):
        """A hardware layer copying `nbytes` (rounded up to whole copy atoms); only for a processor with
        copy_atom_bytes."""
        ...


class CoreProcessor:
    """Defaults of the processors of the core's pipeline: always in the build, one layer at a time, no copies."""

    engine = "nvdla"
    copy_atom_bytes = 0

    def present(self, hw: HwConfig) -> bool:
        return True

    def copy_layer(self, name: str, nbytes: int):
        raise TypeError(f"{self.name} does not copy memory")


class StreamProcessor(CoreProcessor):
    """A processor that streams a W x H x C cube from memory through its unit and back (SDP, PDP, CDP):
    `work` says what it streams, engine.simulate.simulate_stream times it."""

    def work(self, layer, hw: HwConfig) -> StreamWork:
        raise NotImplementedError

    def simulate(
        self, layer, hw: HwConfig, plan: TilePlan | None, *, record_events: bool, steady: SteadyState = STEADY
    ) -> LayerStats:
        return simulate_stream(self.work(layer, hw), hw, name=layer.name, record_events=record_events, steady=steady)


def stream_work(layer, hw: HwConfig, *, unit: Unit, bound: Bound, rate: float, out_bytes: int, lane_elements: int,
                operand_bytes: int = 0) -> StreamWork:  # fmt: skip
    """A standalone layer's stream: its input cube in memory (feature format, channels padded to atoms),
    its elements, memories and precision, with what its processor says of the rest."""
    hw.check_precision(layer.precision)
    return StreamWork(
        in_bytes=cdma.feature_bytes(layer.width, layer.height, layer.channels, layer.precision, hw),
        operand_bytes=operand_bytes,
        out_bytes=out_bytes,
        lane_elements=lane_elements,
        elements=layer.width * layer.height * layer.channels,
        rate=rate,
        unit=unit,
        bound=bound,
        input_memory=layer.input_memory,
        output_memory=layer.output_memory,
        precision_bytes=layer.precision.bytes,
    )


def dram_activity(stats: LayerStats) -> dict[str, int]:
    """The DRAM bytes of a layer's activity (Activity's dram_read_bytes and dram_write_bytes)."""
    return {"dram_read_bytes": stats.traffic.dram_read, "dram_write_bytes": stats.traffic.dram_write}
