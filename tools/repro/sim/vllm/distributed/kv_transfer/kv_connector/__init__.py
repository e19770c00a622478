"""Simulated vllm.distributed.kv_transfer.kv_connector: the KV connectors."""
