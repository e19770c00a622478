"""Simulated vllm.distributed.device_communicators.cuda_communicator."""
from vllm.distributed.device_communicators.custom_all_reduce import CustomAllreduce


class CudaCommunicator:
    """The CUDA device communicator of a group: pynccl, custom all-reduce, symm-mem all-reduce."""

    def __init__(self, cpu_group, device=None, device_group=None, unique_name="",
                 use_custom_allreduce=True):
        """Builds the group's communicators; here only the custom all-reduce (the real one also
        builds PyNcclCommunicator, the quick and symmetric-memory all-reduces)."""
        self.cpu_group = cpu_group
        self.device_group = device_group
        self.device = device
        self.unique_name = unique_name
        self.ca_comm = None
        if use_custom_allreduce:
            self.ca_comm = CustomAllreduce(group=self.cpu_group, device=self.device)
