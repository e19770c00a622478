"""Simulated vllm.distributed.device_communicators: CUDA communicator, custom all-reduce, shm broadcast."""
