"""Simulated ray.experimental.channel: the channels between compiled-graph actors."""
from ray.experimental.channel.shared_memory_channel import Channel  # noqa: F401
