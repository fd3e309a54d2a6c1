"""The DRAM access mixes NVDLA's runs ask of the dram memory model (nvdla_sim.system.memory.DramMemory): each
hardware layer's (or chain's, or copy's) DMA clients and their shares of its bytes (dram.AccessMix), as the
README job (BERT-base, seq 128, INT8) and a GPT-2 decode step (prompt 128, 4 new tokens) make them on
configs/nv_full_lpddr4.toml. streams.py turns each into a reference stream for DRAMsim3 (NVDLA_MIXES there,
committed from this script's output):

    python -m nvdla_validation.dram.nvdla_mixes
"""

from __future__ import annotations

from nvdla_mapper.frontends.presets import PRESETS, build_graph
from nvdla_mapper.passes import map_model
from nvdla_mapper.studies.generate import generate
from nvdla_sim.config import load_config
from nvdla_sim.precision import Precision
from nvdla_sim.system import dram


def run_mixes() -> list[str]:
    """The labels of the mixes the two runs measured, in first-asked order."""
    hw = load_config("nv_full_lpddr4")
    dram.forget_mixes()
    map_model(build_graph(PRESETS["bert-base"], seq=128), hw, precision=Precision.INT8)
    generate(PRESETS["gpt2"], hw, prompt=128, new_tokens=4, precision=Precision.INT8)
    return [mix.label() for mix in dram.mixes_measured()]


def main() -> int:
    for label in run_mixes():
        print(label)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
