"""Simulated FlashInfer (tools/repro/sim): the autotuner and one fused-MoE entry point."""
__version__ = "0.5.3"
