"""Simulated vllm.model_executor.models."""
