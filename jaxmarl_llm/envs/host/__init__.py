"""Games that run in Python on the host, played inside the compiled update through `io_callback` (bridge.py)."""
