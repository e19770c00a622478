"""Simulated vllm.v1.core.sched: the scheduler and its output."""
