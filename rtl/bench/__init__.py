"""cocotb benches for the RTL (run through rtl.verify, which pytest and `nvdla rtl verify` call)."""
