"""Simulated sglang.srt.distributed."""
