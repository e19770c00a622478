"""Simulated sglang.srt.entrypoints."""
