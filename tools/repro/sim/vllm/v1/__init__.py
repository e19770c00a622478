"""Simulated vllm.v1 (the V1 engine)."""
