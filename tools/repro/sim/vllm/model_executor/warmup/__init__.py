"""Simulated vllm.model_executor.warmup: kernel warm-up before serving."""
