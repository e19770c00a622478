"""Simulated sglang.srt.models."""
