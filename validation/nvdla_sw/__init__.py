"""Scripts that read a user's checkout of NVIDIA's software (github.com/nvdla/sw): the register address maps
of its firmware headers and, for issue 57, its loadables and regression goldens. NVIDIA's files stay in the
checkout; what these scripts derive from them is committed with the command that made it."""
