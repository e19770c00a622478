"""Simulated ray.dag.compiled_dag_node: the execution loop of a compiled graph's actors."""
import enum


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
