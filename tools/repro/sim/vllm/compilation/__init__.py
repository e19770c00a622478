"""Simulated vllm.compilation: vLLM's torch.compile backend and compilers."""
