"""Simulated sglang.srt.managers."""
