"""A DRAM timing reference for the memory system (issue 58): request streams of the access patterns NVDLA's DMA
engines make, run on DRAMsim3 (umd-memsys/DRAMsim3) built from a user's checkout (run_dramsim3.py), with
the results committed (validation/data/dramsim3_streams.json) for the project's DRAM model to be held to.
DRAMsim3 is a script's optional input, never a dependency of the install; its files stay outside the
repository."""
