"""Simulated sglang.srt.distributed.communication_op: the model layers' collectives."""
from sglang.srt.distributed.parallel_state import get_tp_group


def tensor_model_parallel_all_reduce(input_):
    """All-reduce of the input tensor across the tensor-parallel group (RowParallelLinear's
    output)."""
    return get_tp_group().all_reduce(input_)
