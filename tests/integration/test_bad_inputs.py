"""Bad input stops before the work (issue 55): every case below is a mistake a new user made (the walkthrough
of issue 55 and a second tour of every command's flags and files), and each must end in one line on stderr
that names the flag or file and what would be valid, with no traceback, and before any simulation runs
(the simulation entry points are replaced by ones that fail the test if called)."""

from __future__ import annotations

import shlex

import pytest

from nvdla_cli.main import main


def _files(tmp):
    """Files the cases name: {regular file}, {dir}, bad traces, sweep and config files."""
    (tmp / "file").write_text("a regular file\n")
    (tmp / "dir").mkdir()
    (tmp / "two_fields.csv").write_text("arrival_s,prompt,output\n0,16,4\n0.1,16\n")
    (tmp / "not_numbers.csv").write_text("arrival_s,prompt,output\nsoon,16,4\n")
    (tmp / "nan.csv").write_text("arrival_s,prompt,output\nnan,16,4\n")
    (tmp / "header_only.csv").write_text("arrival_s,prompt,output\n")
    (tmp / "no_header.csv").write_text("0,16,4\n")
    (tmp / "binary.csv").write_bytes(b"\xff\xfe\x00\x01")
    (tmp / "s.toml").write_text(
        'name = "t"\nbase = "nv_full"\n[space]\n"mac.atomic_c" = [32]\n[workloads]\nmodels = ["bert-base"]\nseq = [32]\n'
    )
    (tmp / "not_a_db.sqlite").write_text("not sqlite\n")
    return {"file": tmp / "file", "dir": tmp / "dir"}


# (command line with {tmp}, a fragment the one-line error must contain)
CASES = [
    # output paths checked before the run (issue 55's walkthrough)
    ("serve gpt2 --hw nv_full --trace {tmp}/missing.csv", "--trace {tmp}/missing.csv: cannot read it"),
    ("serve gpt2 --hw nv_full --trace {tmp}/two_fields.csv", "two_fields.csv:3: 2 fields where the header has 3"),
    ("serve gpt2 --hw nv_full --trace {tmp}/not_numbers.csv", "not_numbers.csv:2: ['soon', '16', '4'] is not"),
    ("serve gpt2 --hw nv_full --trace {tmp}/nan.csv", "nan.csv:2: arrival_s must be a finite number >= 0"),
    ("serve gpt2 --hw nv_full --trace {tmp}/header_only.csv", "header_only.csv: no requests"),
    ("serve gpt2 --hw nv_full --trace {tmp}/no_header.csv", "missing column(s)"),
    ("serve gpt2 --hw nv_full --trace {tmp}/binary.csv", "not a CSV text file"),
    ("serve gpt2 --hw nv_full --trace {tmp}/dir", "cannot read it (Is a directory)"),
    ("sweep {tmp}/s.toml --out {tmp}/file/out", "--out {tmp}/file/out: {tmp}/file is a file, not a folder"),
    ("sweep {tmp}/s.toml --out {tmp}/o --db {tmp}/dir", "--db {tmp}/dir: is a folder; give a file path"),
    ("accuracy vit_digits --json {tmp}/file/r.json", "--json {tmp}/file/r.json: {tmp}/file is a file"),
    ("accuracy vit_digits --json {tmp}/dir", "--json {tmp}/dir: is a folder"),
    ("simulate --op matmul --m 64 --k 64 --n 64 --trace {tmp}/file/t.json", "--trace {tmp}/file/t.json: {tmp}/file is a file"),
    ("map bert-base --seq 32 --report {tmp}/file", "--report {tmp}/file: it is a file, not a folder"),
    ("map bert-base --seq 32 --report {tmp}/file/sub", "--report {tmp}/file/sub: {tmp}/file is a file, not a folder"),
    ("map bert-base --seq 32 --emit-program {tmp}/file", "--emit-program {tmp}/file: it is a file"),
    ("generate gpt2 --prompt 8 --new-tokens 2 --report {tmp}/file", "--report {tmp}/file: it is a file"),
    ("serve gpt2 --requests 2 --report {tmp}/file", "--report {tmp}/file: it is a file"),
    ("serve gpt2 --requests 2 --rates 1,2 --report {tmp}/file", "--report {tmp}/file: it is a file"),
    # flags that another flag makes meaningless
    ("serve gpt2 --chunk-tokens 64", "--chunk-tokens sizes the iterations of --policy chunked-prefill"),
    ("serve gpt2 --rate 5 --trace {tmp}/two_fields.csv", "--rate describes the Poisson arrivals; --trace gives"),
    ("serve gpt2 --requests 5 --trace {tmp}/two_fields.csv", "--requests describes the Poisson arrivals"),
    ("serve gpt2 --rate 5 --rates 1,2", "--rate is one rate; --rates gives the rates to sweep"),
    ("serve gpt2 --rates 1,2 --trace {tmp}/two_fields.csv", "--rates sweeps Poisson rates; leave out --trace"),
    ("serve gpt2 --slo-ttft-ms 5", "--slo-ttft-ms is a latency target that picks the highest of the rates --rates"),
    ("serve gpt2 --slo-tpot-ms 5", "--slo-tpot-ms is a latency target"),
    ("serve gpt2 --rates 1,2 --slo-percentile 90", "--slo-percentile goes with a latency target"),
    ("serve gpt2 --rates 1,2 --bisect 2", "--bisect goes with a latency target"),
    ("serve gpt2 --rates 1,x", "--rates must be comma-separated numbers of requests per second above 0"),
    ("serve gpt2 --rates 0,2", "--rates must be comma-separated numbers"),
    ("serve gpt2 --rate nan", "--rate must be a finite number above 0, not nan"),
    ("serve gpt2 --rate inf", "--rate must be a finite number above 0, not inf"),
    ("serve gpt2 --rates 1 --slo-ttft-ms -3", "--slo-ttft-ms must be a finite number above 0"),
    ("sweep {tmp}/s.toml --out {tmp}/o --where latency_ms<=2", "--where goes with --rank"),
    ("sweep {tmp}/s.toml --out {tmp}/o --executor dask --workers 3", "--workers is the local executor's process count"),
    ("sweep {tmp}/s.toml --out {tmp}/o --scheduler tcp://127.0.0.1:1 --executor local", "--scheduler is a dask"),
    ("sweep {tmp}/s.toml --out {tmp}/o --db {tmp}/not_a_db.sqlite", "not_a_db.sqlite: not a sweep database"),
    ("map bert-base --calib entropy", "--calib goes with --quantize"),
    ("map bert-base --dynamic", "--dynamic goes with --quantize"),
    ("generate gpt2 --calib-data x.npy", "--calib-data goes with --quantize"),
    ("map bert-base --sparse-mac-whatif", "--sparse-mac-whatif is a 2:4-sparse MAC array: it needs --prune 2:4"),
    ("map bert-base --layer layer0.attn.q", "--layer chooses the layer --emit-program writes"),
    ("map bert-base --host-gflops 0", "--host-gflops must be a finite number above 0, not 0.0"),
    ("map bert-base --host-gbs nan", "--host-gbs must be a finite number above 0, not nan"),
    ("map bert-base --host-overhead-us -1", "--host-overhead-us must be a finite number >= 0"),
    ("accuracy vit_digits --prompts 2", "--prompts sets the GPT's greedy continuations; vit_digits classifies images"),
    ("accuracy char_gpt --finetuned char_gpt_24_ft", "--finetuned holds the fine-tuned weights of a pruned model"),
    ("accuracy char_gpt --new-tokens 0", "--new-tokens must be a positive integer, not 0"),
    ("simulate --op conv --m 3", "--m is not read by --op conv, which takes"),
    ("simulate --op pdp --width 4 --height 4 --channels 8 --kernels 8", "--kernels is not read by --op pdp"),
    ("simulate --trace-test {tmp}/dir --m 3", "--m describes a layer; --trace-test runs the program's own layers"),
    ("simulate --op matmul --m 8 --k 8 --n 8 --allow-unknown-registers", "--allow-unknown-registers goes with --trace-test"),
]  # fmt: skip


@pytest.fixture
def no_work(monkeypatch):
    """The simulation entry points, replaced by ones that fail the test: a refusal must come first."""
    import nvdla_cli.main
    import nvdla_mapper.passes
    import nvdla_mapper.studies.accuracy
    import nvdla_mapper.studies.generate
    import nvdla_mapper.studies.serve
    import nvdla_mapper.studies.sweep
    import nvdla_sim.program.run

    def fail(*a, **kw):
        raise AssertionError("the work started before the bad input was refused")

    for mod, name in [
        (nvdla_mapper.passes, "map_model"),
        (nvdla_mapper.studies.generate, "generate"),
        (nvdla_mapper.studies.serve, "simulate_serving"),
        (nvdla_mapper.studies.serve, "sweep_rates"),
        (nvdla_mapper.studies.sweep, "run_sweep"),
        (nvdla_mapper.studies.accuracy, "trained_accuracy"),
        (nvdla_sim.program.run, "run_program"),
        (nvdla_cli.main, "simulate"),
    ]:
        monkeypatch.setattr(mod, name, fail)


@pytest.mark.parametrize(("line", "message"), CASES, ids=[c[0][:60] for c in CASES])
def test_bad_input_is_one_line_before_the_work(line, message, tmp_path, no_work, capsys):
    _files(tmp_path)
    argv = shlex.split(line.format(tmp=tmp_path))
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own usage errors
        code = e.code
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert "Traceback" not in err and lines[-1].startswith(("nvdla: error: ", "nvdla ")), err
    assert message.format(tmp=tmp_path) in lines[-1], err
    # one line: the error (argparse adds its usage line above its own errors)
    assert len([x for x in lines if "error" in x]) == 1, err
