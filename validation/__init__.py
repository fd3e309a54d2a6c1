"""nvdla_validation: NVIDIA's RTL and other tools as references: build and run scripts, committed measurements."""

# The folder validation/ installs as nvdla_validation (pyproject's package-dir). Imported under its folder name from the
# repository root it would load a second copy of every module beside nvdla_validation's, with its own registries and
# caches, so that is refused here.
if __name__ != "nvdla_validation":
    raise ImportError(
        f"import nvdla_validation, not {__name__}: the folder validation/ is the package nvdla_validation"
    )
