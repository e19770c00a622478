"""Simulated vllm.v1.core: scheduling."""
