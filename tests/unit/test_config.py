import dataclasses

import pytest

from nvdla_sim import ConfigError, Precision, load_config
from nvdla_sim.config import builtin_configs, config_from_dict, load_config_file


def test_official_values():
    full, large, small = load_config("nv_full"), load_config("nv_large"), load_config("nv_small")
    assert (full.mac.atomic_c, full.mac.atomic_k) == (64, 32)
    assert full.peak_macs_per_cycle(Precision.INT8) == 2048
    assert full.peak_macs_per_cycle(Precision.INT16) == 1024
    assert full.cbuf_bytes == 512 * 1024 and full.cbuf_entry_bytes == 128 and full.cbuf_entries_per_bank == 256
    assert large.cbuf_entry_bytes == 64 and large.precisions == (Precision.INT8,)
    assert small.peak_macs_per_cycle(Precision.INT8) == 64 and small.cbuf_bytes == 128 * 1024
    assert small.sdp.max_throughput == 1 and full.sdp.max_throughput == 16
    assert full.dram_bytes_per_cycle == 64 and small.dram_bytes_per_cycle == 8
    assert full.fingerprint == "nv_full_c64k32_cbuf512k_1000mhz"


def test_every_shipped_config_loads():
    for name in builtin_configs():
        assert load_config(name).name


def test_custom_bandwidth_cap():
    hw = load_config("custom_example")
    assert hw.dram_bytes_per_cycle == pytest.approx(25.6e3 / 800)
    assert "bw25.6" in hw.fingerprint


def _base():
    return load_config("nv_full").to_dict()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["cbuf"].update(bank_count=12), "cbuf.bank_count must be a power of two, not 12"),
        (lambda d: d["mac"].update(atomic_c=-64), "mac.atomic_c must be an integer >= 2, not -64"),
        (lambda d: d["mac"].pop("atomic_k"), "missing field(s) ['atomic_k'] in [mac]"),
        (lambda d: d.update(precisions=["int4"]), "unknown precision 'int4'; valid: int8, int16, fp16"),
        (lambda d: d["cbuf"].update(bank_depth=1, bank_width_bytes=8), "too small for one CBUF entry"),
        (lambda d: d["sdp"].update(colour="red"), "unknown key(s) ['colour'] in [sdp]"),
        (lambda d: d.update(clock_mhz=0), "clock_mhz must be a finite number of MHz above 0, not 0"),
        (lambda d: d["memory"].update(dram_bandwidth_gbs=-1), "memory.dram_bandwidth_gbs must be a positive number"),
        (lambda d: d["sdp"].update(ew_throughput=0), "sdp.lut = true needs the EW sub-unit"),
        (lambda d: d.pop("pdp"), "missing required field 'pdp'"),
    ],
)
def test_bad_config_messages(mutate, message):
    d = _base()
    mutate(d)
    with pytest.raises(ConfigError) as e:
        config_from_dict(d, source="my.toml")
    assert str(e.value).startswith("my.toml: ")
    assert message in str(e.value)


def test_bad_file_names_path(tmp_path):
    p = tmp_path / "broken.toml"
    p.write_text("name = 'x'\nclock_mhz = [")
    with pytest.raises(ConfigError, match="broken.toml: not valid TOML"):
        load_config_file(p)
    with pytest.raises(ConfigError, match="unknown hardware config 'nv_huge'; built-in: .*nv_full"):
        load_config("nv_huge")


def test_frozen_and_variants():
    hw = load_config("nv_full")
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.clock_mhz = 5  # type: ignore[misc]
    v = hw.with_values(**{"mac.atomic_c": 32, "clock_mhz": 800.0})
    assert v.mac.atomic_c == 32 and v.clock_mhz == 800 and v.peak_macs_per_cycle(Precision.INT8) == 1024
    with pytest.raises(ConfigError, match="unknown config field 'mac.rows'"):
        hw.with_values(**{"mac.rows": 3})
    with pytest.raises(ConfigError, match="nv_small does not support int16; supported: int8"):
        load_config("nv_small").check_precision(Precision.INT16)
