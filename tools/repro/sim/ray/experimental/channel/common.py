"""Simulated ray.experimental.channel.common: the readers a compiled graph's driver uses to
fetch the graph's outputs from its output channels."""


class ReaderInterface:
    """Reads one value from each of a list of input channels (the real one also consumes the
    leading channels of an execution and tracks which channels are done)."""

    def __init__(self, input_channels):
        """A reader over input_channels, read in this order."""
        self._input_channels = list(input_channels)
        self._closed = False

    def start(self):
        """Starts reading (the real AwaitableBackgroundReader starts its thread here)."""

    def close(self):
        """Closes the reader (the real one also closes its channels: a waiting read raises
        RayChannelError)."""
        self._closed = True


class SynchronousReader(ReaderInterface):
    """The reader of a synchronous (non-asyncio) compiled graph: reads the output channels one
    after another in the calling thread."""

    def read(self, timeout=None):
        """Reads the next value of every input channel, in order, and returns them as a list;
        each channel.read gets what is left of timeout (seconds; the real one raises
        RayChannelTimeoutError when it runs out: "Timed out waiting for object available to
        read")."""
        results = []
        for channel in self._input_channels:
            results.append(channel.read(timeout))
        return results
