"""What containers need from the accelerators: docker flags (flags.py), detection (host.py)."""
