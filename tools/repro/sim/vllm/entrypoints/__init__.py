"""Simulated vllm.entrypoints: the OpenAI-compatible API server."""
