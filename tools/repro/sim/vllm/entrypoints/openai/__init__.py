"""Simulated vllm.entrypoints.openai: the OpenAI server, its routes and handlers."""
