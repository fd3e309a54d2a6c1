"""RTL tier: amaranth.sim tests always run; cocotb/Icarus tests are marked `rtl` and need iverilog."""
