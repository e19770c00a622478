"""Simulated vLLM (tools/repro/sim): the modules on the seed bugs' call paths, nothing more."""
__version__ = "0.27.0"
