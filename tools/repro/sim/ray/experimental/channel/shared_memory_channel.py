"""Simulated ray.experimental.channel.shared_memory_channel: a compiled graph's channel.

Here a channel between two pipeline stages is a torch.distributed point-to-point link (gloo).
A channel read by the driver (an output of the graph) is a pipe: the driver is no
torch.distributed rank.
"""
import os

import torch
import torch.distributed as dist


class Channel:
    """A channel from one writer actor to its readers (the real one: a mutable plasma object)."""

    def __init__(self, src, shape=(4,), dtype=torch.float32, driver_reader=False):
        """A channel read from rank src (the writer); driver_reader: read by the graph's driver
        (not a rank), through a pipe it holds both ends of."""
        self.src = src
        self.shape = shape
        self.dtype = dtype
        self._driver_pipe = os.pipe() if driver_reader else None

    def ensure_registered_as_reader(self):
        """Registers this actor as a reader (the real one: with the raylet)."""

    def read(self, timeout=None):
        """Waits until the writer has written the next value and returns it (the real one:
        ReadAcquire on the mutable object, then ReadRelease; after timeout seconds it raises
        RayChannelTimeoutError: "Timed out waiting for object available to read").

        Simulation: no timeout. On the driver the writer (rank src, the graph's last stage)
        would write the value into the pipe; it never gets there, so the read blocks in
        read(2) for good."""
        if self._driver_pipe is not None:
            empty = torch.empty(self.shape, dtype=self.dtype)
            size = empty.numel() * empty.element_size()
            data = b""
            while len(data) < size:
                data += os.read(self._driver_pipe[0], size - len(data))
            return torch.frombuffer(bytearray(data), dtype=self.dtype).reshape(self.shape)
        src = self.src
        value = torch.empty(self.shape, dtype=self.dtype)
        dist.recv(value, src=src)
        return value
