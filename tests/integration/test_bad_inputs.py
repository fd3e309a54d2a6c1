"""Bad input stops before the work (issue 55): every case below is a mistake a new user made (the walkthrough
of issue 55 and a second tour of every command's flags and files), and each must end in one line on stderr
that names the flag or file and what would be valid, with no traceback, and before any simulation runs
(the simulation entry points are replaced by ones that fail the test if called)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from nvdla_cli.main import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


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
    nv_full = (CONFIGS / "nv_full.toml").read_text()
    (tmp / "missing.toml").write_text('name = "x"\nclock_mhz = 1000\n')
    (tmp / "broken.toml").write_text('name = "x\n')
    (tmp / "wrongtype.toml").write_text(nv_full.replace("atomic_c = 64 ", 'atomic_c = "64" '))
    (tmp / "unknownsec.toml").write_text(nv_full + "\n[mac2]\nx = 1\n")
    (tmp / "partial.json").write_text('{"model_type": "gpt2", "n_embd": 64}')
    (tmp / "wrongtype.json").write_text('{"model_type": "gpt2", "n_embd": "wide", "n_head": 2, "n_layer": 1}')
    (tmp / "notjson.json").write_text("not json\n")
    (tmp / "fake.onnx").write_text("hello\n")
    (tmp / "noworkloads.toml").write_text('name = "t"\nbase = "nv_full"\n[space]\n"mac.atomic_c" = [32]\n')
    (tmp / "badrank.toml").write_text(
        'name = "t"\nbase = "nv_full"\n[workloads]\nmodels = ["bert-base"]\n[rank]\nobjective = "speed"\n'
    )
    (tmp / "clock_nan.toml").write_text(nv_full.replace("clock_mhz = 1000.0", "clock_mhz = nan"))
    (tmp / "clock_inf.toml").write_text(nv_full.replace("clock_mhz = 1000.0", "clock_mhz = inf"))
    (tmp / "badact.json").write_text(
        '{"model_type": "bert", "hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 1, '
        '"intermediate_size": 128, "hidden_act": "swishy"}'
    )
    (tmp / "missing.config.json").unlink(missing_ok=True)
    (tmp / "spaces.csv").write_text("arrival_s , prompt , output\n0, 16, 4\n")
    (tmp / "cov.yaml").write_text("- a list\n- not bins\n")
    import numpy as np

    np.save(tmp / "calib_nan.npy", np.full((2, 16, 768), np.nan, dtype=np.float32))
    (tmp / "text.npy").write_text("not an array\n")
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
    ("simulate --trace-test {tmp}/dir --m 3", "--m describes a layer; --trace-test and --loadable run the program's own layers"),
    ("simulate --loadable {tmp}/missing.nvdla", "{tmp}/missing.nvdla: cannot read the loadable"),
    ("simulate --golden {tmp} --op pdp", "--golden goes with --loadable"),
    ("simulate --op matmul --m 8 --k 8 --n 8 --allow-unknown-registers", "--allow-unknown-registers goes with --trace-test"),
    # configs, model files and values (the second tour: every command's flags and files)
    ("map bert-base --hw {tmp}/missing.toml", "{tmp}/missing.toml: missing required field 'precisions'"),
    ("map bert-base --hw {tmp}/broken.toml", "{tmp}/broken.toml: not valid TOML"),
    ("map bert-base --hw {tmp}/wrongtype.toml", "{tmp}/wrongtype.toml: mac.atomic_c must be an integer >= 2, not '64'"),
    ("map bert-base --hw {tmp}/unknownsec.toml", "{tmp}/unknownsec.toml: unknown top-level key(s) ['mac2']"),
    ("map bert-base --hw {tmp}/none.toml", "{tmp}/none.toml: cannot read config file (No such file or directory)"),
    ("map bert-base --hw nv_mega", "unknown hardware config 'nv_mega'; built-in: custom_example, nv_full"),
    ("map {tmp}/partial.json", "{tmp}/partial.json: "),
    ("map {tmp}/wrongtype.json", "{tmp}/wrongtype.json: field 'n_embd' must be an integer, not 'wide'"),
    ("map {tmp}/notjson.json", "{tmp}/notjson.json: not valid JSON"),
    ("map {tmp}/fake.onnx", "{tmp}/fake.onnx: cannot load ONNX model"),
    ("map bert-huge", "unknown model 'bert-huge'; presets: bert-base"),
    ("map bert-base --precision int4", "unknown precision 'int4'; valid: int8, int16, fp16"),
    ("map bert-base --batch 0", "batch and seq must be >= 1, got batch=0"),
    ("map bert-base --seq 0", "batch and seq must be >= 1, got batch=1 seq=0"),
    ("map bert-base --seq -5", "seq=-5"),
    ("map bert-base --seq 100000", "--seq 100000: bert-base has 512 learned positions"),
    ("map bert-base --dec-seq 16", "--dec-seq 16: bert-base has no separate decoder"),
    ("map resnet50 --dec-seq 16", "--dec-seq 16: resnet50 is a CNN; it has no decoder"),
    ("map resnet50 --seq 128", "--seq 128: resnet50 is a CNN; its input is an image, with no sequence"),
    ("map bert-base --hw nv_small --precision fp16", "nv_small does not support fp16; supported: int8"),
    ("map bert-base --prune 3:4", "--prune must be 2:4 or magnitude:S with 0 <= S < 1, not '3:4'"),
    ("map bert-base --prune magnitude:1.5", "not 'magnitude:1.5'"),
    ("map bert-base --weight-compression --hw nv_small", "nv_small has no weight compression"),
    ("map bert-base --softmax nvdla --hw nv_small", "--softmax nvdla needs the SDP LUT and EW units; nv_small has none"),
    ("map bert-base --softmax NVDLA", "argument --softmax: invalid choice: 'NVDLA' (choose from 'auto', 'nvdla', 'host')"),
    ("map bert-base --layernorm nvdla --precision int16", "--layernorm nvdla needs INT8 layers on a build with INT16"),
    ("map bert-base --quantize per-channel --calib percentile:200", "--calib: calibration must be 'max', 'percentile:P'"),
    ("map bert-base --quantize per-channel --calib-data {tmp}/none.npy", "{tmp}/none.npy: cannot load calibration data (No such file"),
    ("map bert-base --quantize per-channel --precision int16", "--quantize produces INT8 layers; use --precision int8"),
    ("map bert-base --emit-program {tmp}/progs --layer nope", "--layer 'nope': no such task in bert-base"),
    ("map bert-base --top -1", "--top must be a whole number >= 0"),
    ("generate gpt2 --prompt 0", "--prompt must be a positive integer, not 0"),
    ("generate gpt2 --new-tokens 0", "--new-tokens must be a positive integer, not 0"),
    ("generate gpt2 --prompt 1000 --new-tokens 100", "--prompt 1000 + --new-tokens 100 = 1100 positions; gpt2 has 1024"),
    ("generate gpt2 --batch 0", "--batch '0': give a positive integer or a comma-separated list"),
    ("generate gpt2 --batch 1,x", "--batch '1,x': give a positive integer"),
    ("generate gpt2 --jobs 0", "--jobs must be a positive integer, not 0"),
    ("generate gpt2 --kv-precision int4", "--kv-precision: unknown precision 'int4'"),
    ("generate gpt2 --kv-plan step", "argument --kv-plan: invalid choice: 'step' (choose from 'bucket', 'length')"),
    ("generate gpt2 --dram-gib -1", "--dram-gib must be a finite number above 0, not -1.0"),
    ("generate gpt2 --dram-gib nan", "--dram-gib must be a finite number above 0, not nan"),
    ("generate gpt2 --dram-gib 0.01", "gpt2 at batch 1 needs 0.12 GiB (weights + KV cache of 256 positions, int8)"),
    ("generate bert-base", "bert-base: generation is modelled for decoder models"),
    ("generate {tmp}/fake.onnx", "generation needs a preset or a config.json, not an ONNX graph"),
    ("generate resnet50", "resnet50 is a CNN; this command takes a transformer preset or a config.json"),
    ("serve gpt2 --requests 0", "--requests must be a positive integer, not 0"),
    ("serve gpt2 --block-tokens 0", "--block-tokens must be a positive integer, not 0"),
    ("serve gpt2 --max-batch 0", "--max-batch must be a positive integer, not 0"),
    ("serve gpt2 --prompt 2000", "request 0: 2000 prompt + 32 output tokens; gpt2 has 1024 positions"),
    ("serve gpt2 --policy fifo", "argument --policy: invalid choice: 'fifo'"),
    ("serve gpt2 --preemption kill", "argument --preemption: invalid choice: 'kill'"),
    ("serve gpt2 --dram-gib 0.1", "gpt2's weights (0.12 GiB, int8) leave no room for one KV block in the 0.1 GiB"),
    ("serve bert-base", "bert-base: generation is modelled for decoder models"),
    ("serve gpt2 --rates 1,2 --slo-ttft-ms 5 --slo-percentile 95", "--slo-percentile must be 50, 90 or 99, not 95"),
    ("sweep {tmp}/none.toml", "{tmp}/none.toml: cannot read sweep file"),
    ("sweep {tmp}/noworkloads.toml", "{tmp}/noworkloads.toml: missing [workloads] table"),
    ("sweep {tmp}/badrank.toml", "rank.objective 'speed' is not a sweep metric"),
    ("sweep {tmp}/s.toml --out {tmp}/o --rank speed", "rank objective 'speed' is not a sweep metric"),
    ("sweep {tmp}/s.toml --out {tmp}/o --rank latency_ms --where latency<5", "constraint 'latency<5'"),
    ("sweep {tmp}/s.toml --out {tmp}/o --workers 0", "--workers must be >= 1, not 0"),
    ("sweep {tmp}/s.toml --executor ray", "argument --executor: invalid choice: 'ray'"),
    ("accuracy vit_digits --samples 0", "--samples must be a positive integer, not 0"),
    ("accuracy mnist", "no trained model 'mnist'; trained models: vit_digits, char_gpt"),
    ("accuracy char_gpt --calib foo", "--calib: calibration must be 'max'"),
    ("accuracy char_gpt --quantize per-row", "argument --quantize: invalid choice: 'per-row'"),
    ("accuracy char_gpt --precision int16 --hw nv_small", "nv_small has no int16 datapath"),
    ("accuracy char_gpt --precision int4", "argument --precision: invalid choice: 'int4'"),
    ("accuracy char_gpt --qat nope", "nope.npz: cannot read model weights"),
    ("accuracy char_gpt --only ffn,lut", "INT8-only parts ['lut'] unknown; parts: embedding"),
    ("accuracy char_gpt --smooth 2", "--smooth must be a migration strength in 0..1, not 2.0"),
    ("accuracy char_gpt --prune 2:5", "--prune must be 2:4 or magnitude:S"),
    ("simulate --op matmul --m 64 --k 64", "--op matmul needs --n"),
    ("simulate --op matmul --m 0 --k 64 --n 64", "argument --m: expected a positive integer, not 0"),
    ("simulate --op conv --width 8 --height 8 --channels 8 --kernels 8 --pad -1", "conv pad_left must be in 0..31 (CDMA D_ZERO_PADDING), not -1"),
    ("simulate --op conv --width 8 --height 8 --channels 8 --kernels 8 --kernel-size 9", "conv output would be 0x0"),
    ("simulate --op matmul --m 64 --k 64 --n 64 --row 7", "--row 7 must divide --m 64"),
    ("simulate --op sdp --width 8", "--op sdp needs --height --channels"),
    ("simulate --op pdp --width 4 --height 4 --channels 8 --kernel-size 0", "argument --kernel-size: expected a positive"),
    ("simulate --trace-test {tmp}/none", "{tmp}/none: not a trace-test folder, .cfg or .txn file, or a virtual platform's .log"),
    ("simulate --trace-test {tmp}/fake.onnx", "{tmp}/fake.onnx: not a trace-test folder, .cfg or .txn file, or a virtual platform's .log"),
    ("simulate --op matmul --m 64 --k 64 --n 64 --precision fp16 --hw nv_small", "nv_small does not support fp16"),
    ("simulate --op bmm --m 8", "argument --op: invalid choice: 'bmm'"),
    ("rtl emit --hw nv_mega", "unknown hardware config 'nv_mega'"),
    ("rtl emit --precision fp16 --hw nv_full", "the RTL datapath is integer-only; use --precision int8 or int16"),
    ("rtl verify --layer bert-base.nope", "--layer must be <model>.<layer>"),
    ("rtl verify --sim modelsim", "argument --sim: invalid choice: 'modelsim' (choose from 'icarus', 'verilator')"),
    ("rtl verify --work-dir {tmp}/file/w", "--work-dir {tmp}/file/w: {tmp}/file is a file, not a folder"),
    ("rtl verify --ready-prob 2", "--ready-prob must be in (0, 1], not 2.0"),
    ("rtl verify --truncate 40", "--truncate must be in 0..31, not 40"),
    ("configs --bogus", "unrecognized arguments: --bogus"),
    ("zoo extra", "unrecognized arguments: extra"),
    ("mapp bert-base", "argument command: invalid choice: 'mapp'"),
    # the second tour's findings (tracebacks, silent acceptances and unclear messages it met)
    ("simulate --hw {tmp}/clock_nan.toml --op matmul --m 16 --k 64 --n 64", "clock_mhz must be a finite number of MHz above 0, not nan"),
    ("map bert-base --hw {tmp}/clock_inf.toml --seq 16", "clock_mhz must be a finite number of MHz above 0, not inf"),
    ("accuracy vit_digits --samples 5 --smooth nan", "--smooth must be a migration strength in 0..1, not nan"),
    ("map bert-base --seq 16 --quantize per-tensor --calib-data {tmp}/calib_nan.npy", "calibration data must be finite numbers"),
    ("map bert-base --seq 16 --quantize per-tensor --calib-data {tmp}/text.npy", "cannot load calibration data (not a .npy array file)"),
    ("sweep {tmp}/s.toml --out {tmp}/o --rank latency_ms --where latency_ms<=nan", "the bound must be a finite number, not 'nan'"),
    ("rtl emit --hw nv_small -o {tmp}/file", "--out {tmp}/file: it is a file, not a folder"),
    ("rtl emit --hw nv_small -o {tmp}/file/sub", "--out {tmp}/file/sub: {tmp}/file is a file, not a folder"),
    ("rtl verify --coverage-db {tmp}/cov.yaml", "--coverage-db {tmp}/cov.yaml: not a YAML mapping of coverage bins"),
    ("rtl verify --coverage-db {tmp}/dir", "--coverage-db {tmp}/dir: is a folder"),
    ("map bert-base --seq 16 --report ''", "--report: an empty path; give a path"),
    ("accuracy vit_digits --json ''", "--json: an empty path; give a path"),
    ("simulate --op matmul --m 8 --k 8 --n 8 --trace ''", "--trace: an empty path; give a path"),
    ("sweep {tmp}/s.toml --out ''", "--out: an empty path; give a path"),
    ("rtl emit -o ''", "--out: an empty path; give a path"),
    ("map lenet5 --head lm", "--head lm: lenet5 is a CNN"),
    ("map bert-base --host-fallback", "--host-fallback runs an ONNX graph's unsupported ops on the host"),
    ("map t5-base --seq 16 --dec-seq 0", "--dec-seq must be a positive integer, not 0"),
    ("map t5-base --seq 16 --dec-seq -4", "--dec-seq must be a positive integer, not -4"),
    ("map {tmp}/badact.json --seq 16", "field 'hidden_act' 'swishy' is not lowered"),
    ("simulate --op conv --width 8 --height 8 --channels 16 --kernels 16 --kernel-size 3 --pad 40",
     "conv pad_left must be in 0..31 (CDMA D_ZERO_PADDING), not 40"),
    ("generate gpt2 --batch 1,,2", "--batch '1,,2': give a positive integer"),
    ("serve gpt2 --block-tokens 100000", "--block-tokens 100000 is more than gpt2's 1024 positions"),
    ("sweep {tmp}/s.toml --out {tmp}/o --scheduler notaurl", "--scheduler 'notaurl': give a dask.distributed address"),
    ("accuracy vit_digits --precision fp16 --hw nv_full --quantize per-tensor", "--quantize sets INT8 scales; --precision fp16 takes none"),
    ("accuracy char_gpt --only ''", "--only needs at least one part"),
    ("accuracy {tmp}/missing.config.json", "missing.config.json: no such file"),
    ("accuracy {tmp}/badact.json", "accuracy takes a shipped trained model (vit_digits, char_gpt)"),
    ("generate resnet18", "resnet18 is a CNN; this command takes a transformer preset or a config.json"),
    ("map {tmp}/file", "not a model (a preset name, a config.json, an .onnx file or a folder with config.json)"),
]  # fmt: skip


@pytest.fixture
def no_work(monkeypatch):
    """The simulation entry points, replaced by ones that fail the test: a refusal must come first."""
    import nvdla_cli.main
    import nvdla_mapper.passes
    import nvdla_mapper.studies.accuracy
    import nvdla_mapper.studies.serve
    import nvdla_mapper.studies.sweep
    import nvdla_rtl.verify
    import nvdla_sim.program.run

    def fail(*a, **kw):
        raise AssertionError("the work started before the bad input was refused")

    for mod, name in [
        (nvdla_mapper.passes, "simulate_tasks"),  # every map's tiling search and simulation
        (nvdla_mapper.studies.serve, "simulate_serving"),
        (nvdla_mapper.studies.serve, "sweep_rates"),
        (nvdla_mapper.studies.sweep, "run_sweep"),
        (nvdla_mapper.studies.accuracy, "_calibrated_scales"),  # the first forward pass of an accuracy run
        (nvdla_sim.program.run, "run_operations"),
        (nvdla_cli.main, "simulate"),
        (nvdla_rtl.verify, "run_bench"),
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
