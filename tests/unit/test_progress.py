"""Long studies report progress to a callable; the CLI draws it on a terminal only (issue 55)."""

from __future__ import annotations

import io
import json

import pytest

from nvdla_cli.console import TerminalProgress
from nvdla_mapper.frontends.hf_config import from_hf_config
from nvdla_mapper.studies.generate import generate
from nvdla_mapper.studies.serve import Request, ServeSettings, simulate_serving
from nvdla_sim import load_config


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_progress_draws_on_a_terminal_and_is_silent_when_piped():
    tty, pipe = _Tty(), io.StringIO()
    for stream in (tty, pipe):
        with TerminalProgress(stream, min_interval_s=0) as p:
            p("decode steps", 3, 12)
            p("ops run", 7, None)
    assert pipe.getvalue() == ""
    text = tty.getvalue()
    assert "\rdecode steps: 3/12 (25%)" in text and "\rops run: 7, " in text
    assert text.endswith("\r")  # the line is cleared at the end


@pytest.mark.parametrize("jobs", [1, 2])
def test_generate_reports_every_step_in_whichever_process(tmp_path, jobs):
    cfg = {"model_type": "gpt2", "n_embd": 64, "n_head": 2, "n_layer": 1, "n_positions": 256, "vocab_size": 100}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec = from_hf_config(tmp_path / "config.json")
    calls = []
    new = 70  # 69 decode steps: two processes' worth (generate.MIN_STEPS_PER_JOB) with jobs=2
    generate(spec, load_config("nv_full"), prompt=8, new_tokens=new, jobs=jobs,
             progress=lambda what, done, total: calls.append((done, total)))  # fmt: skip
    dones = [d for d, _ in calls]
    assert {t for _, t in calls} == {new}  # the prefill and 69 steps
    assert dones == sorted(dones) and dones[0] == 0 and dones[-1] == new


def test_serving_reports_each_request_finished():
    class Costs:  # set costs: a prefill of p tokens takes p cycles, a decode step 10
        def prefill(self, tokens: int) -> int:
            return tokens

        def decode(self, lens) -> int:
            return 10

        def swap(self, tokens: int) -> int:
            return tokens

    reqs = [Request(i, 100 * i, 8, 3) for i in range(5)]
    calls = []
    simulate_serving(reqs, Costs(), capacity_blocks=100, settings=ServeSettings(block_tokens=4),
                     progress=lambda what, done, total: calls.append((what, done, total)))  # fmt: skip
    assert [(d, t) for _, d, t in calls] == [(i, 5) for i in range(1, 6)]
