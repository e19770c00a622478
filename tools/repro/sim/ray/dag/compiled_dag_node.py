"""Simulated ray.dag.compiled_dag_node: the execution loop of a compiled graph's actors, and
the driver's handle of the compiled graph (CompiledDAG)."""
import enum
import os

from ray.experimental.channel.common import SynchronousReader
from ray.experimental.compiled_dag_ref import CompiledDAGRef


class _DAGNodeOperationType(enum.Enum):
    """The three operations of a task: read its inputs, compute, write its output."""
    READ = "READ"
    COMPUTE = "COMPUTE"
    WRITE = "WRITE"


class _DAGNodeOperation:
    """One step of an actor's schedule: an operation of one of its tasks."""

    def __init__(self, exec_task_idx, operation_type):
        self.exec_task_idx = exec_task_idx
        self.type = operation_type


class ExecutableTask:
    """One method call of the graph on this actor, with its input channels (and output)."""

    def __init__(self, method_name, input_channels=(), resolved_args=()):
        """The method to call, the channels its arguments come from, the constant arguments."""
        self.method_name = method_name
        self.input_channels = list(input_channels)
        self.resolved_args = list(resolved_args)
        self._intermediate = None

    def prepare(self):
        """Registers the actor as the reader of its input channels."""
        for channel in self.input_channels:
            channel.ensure_registered_as_reader()

    def exec_operation(self, class_handle, op_type, overlap_gpu_communication=False):
        """Runs one operation: READ the inputs, COMPUTE the method, WRITE the output (here the
        method sends its output itself). Returns True when the graph is torn down."""
        if op_type == _DAGNodeOperationType.READ:
            self._inputs = []
            for channel in self.input_channels:
                self._inputs.append(channel.read())
        elif op_type == _DAGNodeOperationType.COMPUTE:
            method = getattr(class_handle, self.method_name)
            self._intermediate = method(*self.resolved_args, *self._inputs)
        elif op_type == _DAGNodeOperationType.WRITE:
            self._intermediate = None
        return False


def do_exec_tasks(self, tasks, schedule, overlap_gpu_communication=False):
    """The actor's loop for a compiled graph (on a thread of the system concurrency group): runs
    its schedule of READ / COMPUTE / WRITE operations, over and over, until torn down."""
    for task in tasks:
        task.prepare()
    while True:
        for operation in schedule:
            done = tasks[operation.exec_task_idx].exec_operation(
                self, operation.type, overlap_gpu_communication)
            if done:
                return


def schedule_for(tasks):
    """The actor's schedule: READ, COMPUTE, WRITE of every task, in order."""
    return [_DAGNodeOperation(i, t) for i in range(len(tasks)) for t in _DAGNodeOperationType]


class CompiledDAG:
    """The driver's handle of a compiled graph (what DAGNode.experimental_compile returns): it
    writes each execution's input to the first actors' input channel and reads the outputs of
    the last actors from its output channels (the real one also owns the actors' do_exec_tasks
    loops and tears the graph down on errors).

    Simulation: only the driver's side; the actors' inputs are already in their tasks
    (ExecutableTask.resolved_args), so execute writes nothing."""

    def __init__(self, output_channels, multi_output=False):
        """A compiled graph whose outputs come from output_channels (multi_output: the graph
        ends in a MultiOutputNode, one channel per output); get timeouts from
        RAY_CGRAPH_get_timeout (seconds, Ray's default 10)."""
        self._output_channels = list(output_channels)
        self._multi_output = multi_output
        self._dag_output_fetcher = SynchronousReader(self._output_channels)
        self._dag_output_fetcher.start()
        self._get_timeout = float(os.environ.get("RAY_CGRAPH_get_timeout", "10"))
        self._execution_index = 0
        self._max_finished_execution_index = -1
        self._result_buffer = {}

    def execute(self, *args, **kwargs):
        """Submits one execution: writes its input to the input channel and returns one
        CompiledDAGRef per output of a MultiOutputNode (else the one ref)."""
        index = self._execution_index
        self._execution_index += 1
        if not self._multi_output:
            return CompiledDAGRef(self, index)
        return [CompiledDAGRef(self, index, i) for i in range(len(self._output_channels))]

    def _execute_until(self, execution_index, channel_index=None, timeout=None):
        """Reads the graph's outputs, execution after execution, until the outputs of
        execution_index are in (earlier ones stay in the result buffer for their own refs),
        then returns them (one output with channel_index); timeout None: the graph's get
        timeout."""
        if timeout is None:
            timeout = self._get_timeout
        while self._max_finished_execution_index < execution_index:
            values = self._dag_output_fetcher.read(timeout)
            self._max_finished_execution_index += 1
            self._result_buffer[self._max_finished_execution_index] = values
        values = self._result_buffer[execution_index]
        if channel_index is None:
            del self._result_buffer[execution_index]
            return values if self._multi_output else values[0]
        return values[channel_index]
