"""Simulated vllm.v1.executor."""
