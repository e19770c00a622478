"""Simulated SGLang (tools/repro/sim): the modules of a multi-node TP server's request path."""
__version__ = "0.5.5"
