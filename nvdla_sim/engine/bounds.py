"""Bounds on a layer's time, written once: the work no tile plan avoids (atomic ops of the MAC array, the
SDP drain), the fewest cycles a transfer can take on the memory ports, and the roofline a mapped pass is
compared with. The simulator checks its result against `conv_floor`, the tiling search prunes by it, and
`generate` reports a decode step against `roofline_cycles`."""

from __future__ import annotations

import math
from functools import lru_cache

from nvdla_sim.config import HwConfig
from nvdla_sim.layers import ConvLayer, Memory
from nvdla_sim.precision import Precision
from nvdla_sim.system.memory import memory_model
from nvdla_sim.units import csc, pdp, sdp


def channel_ops_per_stripe(layer: ConvLayer, hw: HwConfig) -> int:
    """Stripe ops per stripe of output points: channel blocks x kernel positions (direct convolution), or
    the channel-extended equivalent in image-input mode."""
    s = layer.shape
    if layer.image_input:
        channels, lines = csc.image_extension(s.in_c, s.kernel_w, s.stride_x)
        return math.ceil(channels / hw.mac.atomic_c) * math.ceil(s.kernel_h / lines)
    return math.ceil(layer.mac_channels / hw.mac.atomic_c) * s.kernel_w * s.kernel_h


def drain_rate(layer: ConvLayer, hw: HwConfig) -> int:
    rate = sdp.elements_per_cycle(layer.sdp, hw)
    if layer.pool is not None:
        rate = min(rate, pdp.elements_per_cycle(hw, layer.out_precision))
    return rate


@lru_cache(maxsize=256)  # the floors ask at every plan the search looks at
def port_rates(hw: HwConfig) -> tuple[float, float, float]:
    """(fastest port, DRAM, both ports together) in bytes a cycle, as the config's memory model gives them."""
    memory = memory_model(hw)
    dram, sram = memory.bytes_per_cycle(Memory.DRAM), memory.bytes_per_cycle(Memory.SRAM)
    return max(dram, sram), dram, dram + sram


def transfer_floor(read_bytes: int, write_bytes: int, hw: HwConfig, *, bytes_per_cycle: float | None = None) -> int:
    """Fewest cycles that moving these bytes can take over the fastest memory port (or a port of
    `bytes_per_cycle`): reads and writes add up on a shared port, and overlap when the memory has a
    separate write channel (memory.separate_write_channel)."""
    rate = bytes_per_cycle or port_rates(hw)[0]
    if hw.memory.separate_write_channel:
        return math.ceil(max(read_bytes, write_bytes) / rate)
    return math.ceil((read_bytes + write_bytes) / rate)


def conv_floor(layer: ConvLayer, hw: HwConfig, *, read_bytes: int, write_bytes: int) -> int:
    """No plan runs a convolution-pipeline layer faster than its atomic ops (kernel groups x output points
    x channel ops per stripe), its SDP drain (output elements at the drain rate), or moving `read_bytes`
    and `write_bytes` over the fastest memory port; over both ports at once when the layer's operands and
    output are not all in one memory (its input in SRAM and its weights in DRAM move side by side)."""
    s = layer.shape
    drain = math.ceil(layer.out_points * s.out_k / drain_rate(layer, hw))
    rate = None
    if len({layer.input_memory, layer.weight_memory, layer.output_memory}) > 1:
        rate = port_rates(hw)[2]
    return max(atomic_ops(layer, hw), drain, transfer_floor(read_bytes, write_bytes, hw, bytes_per_cycle=rate))


def atomic_ops(layer: ConvLayer, hw: HwConfig) -> int:
    """Atomic ops of a convolution-pipeline layer, one per cycle at best: kernel groups x output points x
    channel ops per stripe."""
    s = layer.shape
    groups = math.ceil(s.out_k / hw.kernels_per_atomic(layer.precision))
    return groups * layer.out_points * channel_ops_per_stripe(layer, hw)


@lru_cache(maxsize=65536)  # pure; a decode step asks it for each of its tasks, alike in every block and step
def roofline_cycles(macs: int, dram_read: int, dram_write: int, hw: HwConfig, precision: Precision) -> float:
    """The roofline of a piece of work: the larger of its MAC time at the peak rate and its DRAM time."""
    dram = transfer_floor(dram_read, dram_write, hw, bytes_per_cycle=port_rates(hw)[1])
    return max(macs / hw.peak_macs_per_cycle(precision), dram)
