"""Simulated ray.experimental.compiled_dag_ref: the driver's reference to one output of one
execution of a compiled graph."""


class CompiledDAGRef:
    """What CompiledDAG.execute returns, one per graph output: the execution's index and the
    output's channel index; get() may be called once (the real one then forbids a second get)."""

    def __init__(self, dag, execution_index, channel_index=None):
        """A reference to output channel_index (None: every output) of execution
        execution_index of dag."""
        self._dag = dag
        self._execution_index = execution_index
        self._channel_index = channel_index
        self._ray_get_called = False

    def get(self, timeout=None):
        """Waits for the output of this execution and returns it: CompiledDAG._execute_until,
        which reads the graph's output channels (timeout: seconds, None for the graph's
        RAY_CGRAPH_get_timeout; the real one raises RayChannelTimeoutError when it expires)."""
        if self._ray_get_called:
            raise ValueError("ray.get() can only be called once on a CompiledDAGRef")
        self._ray_get_called = True
        return self._dag._execute_until(self._execution_index, self._channel_index, timeout)
