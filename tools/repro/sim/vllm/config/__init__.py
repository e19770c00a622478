"""Simulated vllm.config: the parts of vLLM's configuration the simulated modules read."""
from vllm.config.parallel import ParallelConfig  # noqa: F401
