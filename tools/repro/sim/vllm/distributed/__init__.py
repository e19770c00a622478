"""Simulated vllm.distributed: process groups and device communicators."""
