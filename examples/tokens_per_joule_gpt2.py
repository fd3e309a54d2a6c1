"""Worked example (docs/energy.md): which of five NVDLA builds generates GPT-2 tokens with the most tokens
per joule at 16 nm, and at what latency and area.

Each build generates 16 tokens after a 128-token prompt at batch 1 (INT8, LPDDR4). Tokens per joule are
the decode steps' tokens over their energy: the NVDLA core's (calibrated, docs/energy.md) and the system's
(core + DRAM, where the weights streamed every step dominate).

Run: .venv/bin/python examples/tokens_per_joule_gpt2.py   (about 5 minutes on two cores)
"""

from __future__ import annotations

from nvdla_mapper.frontends.presets import PRESETS
from nvdla_mapper.studies.generate import generate
from nvdla_sim import Precision, load_config

BUILDS = {
    "nv_small": load_config("nv_small"),
    "nv_large": load_config("nv_large"),
    "nv_full": load_config("nv_full"),
    # two of the GPT-2 decode sweep's least-energy builds (examples/sweep_energy_gpt2_decode.toml): nv_full
    # with a smaller MAC array and CBUF
    "nv_full 32x16 256K": load_config("nv_full").with_values(
        **{"name": "full_32x16", "mac.atomic_c": 32, "mac.atomic_k": 16, "cbuf.bank_depth": 256}
    ),
    "nv_full 16x16 128K": load_config("nv_full").with_values(
        **{"name": "full_16x16", "mac.atomic_c": 16, "mac.atomic_k": 16, "cbuf.bank_depth": 128}
    ),
}


def main() -> None:
    print(f"{'build':<20}{'area mm2':>9}{'ms/token':>10}{'core uJ/tok':>12}{'DRAM uJ/tok':>12}"
          f"{'tok/J core':>11}{'tok/J system':>13}")  # fmt: skip
    for name, hw in BUILDS.items():
        res = generate(PRESETS["gpt2"], hw, prompt=128, new_tokens=16, precision=Precision.INT8)
        d = res.to_dict()
        steps = res.steps
        core = sum(s.core_energy_uj for s in steps) / len(steps)
        dram = sum(s.dram_energy_uj for s in steps) / len(steps)
        ms = sum(s.cycles for s in steps) / len(steps) / (hw.clock_mhz * 1e3)
        print(
            f"{name:<20}{d['energy']['area_mm2']:>9.3f}{ms:>10.3f}{core:>12.1f}{dram:>12.1f}"
            f"{1e6 / core:>11.0f}{1e6 / (core + dram):>13.1f}"
        )


if __name__ == "__main__":
    main()
