"""Simulated ray.experimental.channel.shared_memory_channel: a compiled graph's channel.

Here a channel between two pipeline stages is a torch.distributed point-to-point link (gloo).
"""
import torch
import torch.distributed as dist


class Channel:
    """A channel from one writer actor to its readers (the real one: a mutable plasma object)."""

    def __init__(self, src, shape=(4,), dtype=torch.float32):
        """A channel read from rank src (the writer)."""
        self.src = src
        self.shape = shape
        self.dtype = dtype

    def ensure_registered_as_reader(self):
        """Registers this actor as a reader (the real one: with the raylet)."""

    def read(self, timeout=None):
        """Waits until the writer has written the next value and returns it (the real one:
        ReadAcquire on the mutable object, then ReadRelease)."""
        src = self.src
        value = torch.empty(self.shape, dtype=self.dtype)
        dist.recv(value, src=src)
        return value
