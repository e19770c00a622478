"""Simulated vllm.v1.worker."""
