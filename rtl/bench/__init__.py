"""cocotb benches for the RTL (run through nvdla_rtl.verify, which pytest and `nvdla rtl verify` call)."""
