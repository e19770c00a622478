"""Simulated Ray (tools/repro/sim): the compiled-graph execution loop and its channels only."""
__version__ = "2.49.0"
