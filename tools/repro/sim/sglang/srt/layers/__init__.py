"""Simulated sglang.srt.layers."""
