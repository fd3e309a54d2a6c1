"""NVIDIA's DLA firmware (nvdla/sw kmd/firmware, interface 0.12; read as the reference, written anew here)
running a loadable's DLA task: the CSB register accesses it makes, in its order. `scheduler` is the
firmware's scheduler and interrupt handling; one module per processor programs its registers from the
operation's descriptors (`registry` lists them); `base` holds what they share."""
