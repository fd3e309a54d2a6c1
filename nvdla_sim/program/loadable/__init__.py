"""NVIDIA's compiled networks: loadables (the flatbuffer container, container.py), the firmware
descriptors inside them (descriptors.py) and the DLA task they make (network.py)."""
