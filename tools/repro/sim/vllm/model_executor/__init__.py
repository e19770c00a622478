"""Simulated vllm.model_executor."""
