"""Simulated sglang.srt.mem_cache."""
