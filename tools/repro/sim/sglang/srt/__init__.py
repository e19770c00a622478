"""Simulated sglang.srt (the SGLang runtime)."""
