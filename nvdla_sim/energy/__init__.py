"""Energy, power and area of an NVDLA build (issue 28): per-action energies, leakage and area of its
components from the Accelergy project's hwcomponents library (CACTI for the SRAMs), applied to the
activity the simulator counts."""
