"""Simulated sglang.srt.model_executor."""
