"""The processors the firmware model programs, by dla_interface.h op type: one module each (the firmware's
conv.c, sdp.c, pdp.c, cdp.c, bdma.c, rubik.c). A processor added to the model adds its module here; an
operation of a processor not listed is refused by name."""

from __future__ import annotations

from nvdla_sim.program.loadable.descriptors import OpType
from nvdla_sim.program.loadable.firmware import bdma, cdp, conv, pdp, rubik, sdp
from nvdla_sim.program.loadable.firmware.base import FirmwareProcessor

PROCESSORS: dict[OpType, FirmwareProcessor] = {
    m.PROCESSOR.kind: m.PROCESSOR for m in sorted((bdma, conv, sdp, pdp, cdp, rubik), key=lambda m: m.PROCESSOR.kind)
}
