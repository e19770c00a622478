"""Simulated vllm.distributed.kv_transfer.kv_connector.v1: the V1 connector API."""
