"""nvdla_rtl: the CMAC + CACC + SDP X1 datapath in Amaranth, its Verilog, cocotb benches and mutation testing."""

# The folder rtl/ installs as nvdla_rtl (pyproject's package-dir). Imported under its folder name from the
# repository root it would load a second copy of every module beside nvdla_rtl's, with its own registries and
# caches, so that is refused here.
if __name__ != "nvdla_rtl":
    raise ImportError(f"import nvdla_rtl, not {__name__}: the folder rtl/ is the package nvdla_rtl")
