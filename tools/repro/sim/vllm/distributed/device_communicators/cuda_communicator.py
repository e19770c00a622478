"""Simulated vllm.distributed.device_communicators.cuda_communicator."""
import torch
import torch.distributed

from vllm.distributed.device_communicators.custom_all_reduce import CustomAllreduce


class CudaCommunicator:
    """The CUDA device communicator of a group: pynccl, custom all-reduce, symm-mem all-reduce."""

    def __init__(self, cpu_group, device=None, device_group=None, unique_name="",
                 use_custom_allreduce=None):
        """Builds the group's communicators; here only the custom all-reduce (the real one also
        builds PyNcclCommunicator, the quick and symmetric-memory all-reduces). As in vLLM,
        only a TP group ("tp" in its unique name) may use the custom all-reduce, and only while
        parallel_state._ENABLE_CUSTOM_ALL_REDUCE (use_custom_allreduce: the simulation's
        override)."""
        self.cpu_group = cpu_group
        self.device_group = device_group
        self.device = device
        self.unique_name = unique_name
        if use_custom_allreduce is None:
            if "tp" not in unique_name:
                # custom allreduce or torch symm mem can be used only by tp
                use_custom_allreduce = False
            else:
                from vllm.distributed.parallel_state import _ENABLE_CUSTOM_ALL_REDUCE
                use_custom_allreduce = _ENABLE_CUSTOM_ALL_REDUCE
        self.ca_comm = None
        if use_custom_allreduce:
            self.ca_comm = CustomAllreduce(group=self.cpu_group, device=self.device)

    def all_reduce(self, input_):
        """All-reduce with the best communicator for the tensor: quick all-reduce, the custom
        all-reduce (ca_comm.custom_all_reduce) when it takes the tensor, symmetric memory,
        else pynccl; here a gloo all-reduce on the device group when the custom one declines."""
        ca_comm = self.ca_comm
        if ca_comm is not None and not ca_comm.disabled and ca_comm.should_custom_ar(input_):
            out = ca_comm.custom_all_reduce(input_)
            assert out is not None
            return out
        out = input_.clone()
        torch.distributed.all_reduce(out, group=self.device_group)
        return out
