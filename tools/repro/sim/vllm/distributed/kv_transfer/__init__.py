"""Simulated vllm.distributed.kv_transfer: KV-cache transfer between instances."""
