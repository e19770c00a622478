"""Simulated TRL (Hugging Face's post-training library): the weight sync between a trainer and
a vLLM server (trl.extras.vllm_client, trl.scripts.vllm_serve), under TRL's module paths."""
__version__ = "0.24.0"
