"""Simulated vllm.distributed.device_communicators.pynccl: vLLM's NCCL communicator driven
from Python (ctypes over libnccl), which RL frameworks build on a StatelessProcessGroup to send
weights from a trainer to vLLM's workers.

Stand-in: no NCCL here, so the data goes through the group itself: with a StatelessProcessGroup
a broadcast is `group.broadcast_obj` (a receiver waits in the store's get of
`broadcast_from/{src}/{n}`) and an all-reduce an `all_gather_obj`; with a torch ProcessGroup,
torch.distributed's gloo collectives on that group. The real communicator only exchanges the
NCCL unique id through the group and then runs NCCL kernels on a CUDA stream.
"""
import uuid

import torch
import torch.distributed as dist

from vllm.distributed.utils import StatelessProcessGroup


class PyNcclCommunicator:
    """One NCCL communicator over the ranks of `group` (a StatelessProcessGroup or a torch
    ProcessGroup), on `device`."""

    def __init__(self, group, device, library_path=None):
        """Takes rank and size from the group; rank 0 makes the unique id and broadcasts it
        through the group (group.broadcast_obj for a StatelessProcessGroup); then a warm-up
        all-reduce of one element, as the real one does."""
        self.group = group
        if isinstance(group, StatelessProcessGroup):
            self.rank, self.world_size = group.rank, group.world_size
        else:
            self.rank, self.world_size = dist.get_rank(group), dist.get_world_size(group)
        self.device = torch.device("cpu") if isinstance(device, int) else torch.device(device)
        self.available = self.world_size > 1
        self.disabled = not self.available
        unique_id = uuid.uuid4().bytes if self.rank == 0 else None
        if isinstance(group, StatelessProcessGroup):
            self.unique_id = group.broadcast_obj(unique_id, src=0)
        else:
            holder = [unique_id]
            dist.broadcast_object_list(holder, src=dist.get_global_rank(group, 0), group=group)
            self.unique_id = holder[0]
        self.all_reduce(torch.zeros(1))

    def all_reduce(self, in_tensor, out_tensor=None, op=dist.ReduceOp.SUM, stream=None):
        """Sum (or op) of in_tensor over the ranks, into out_tensor (a new tensor if None)."""
        if out_tensor is None:
            out_tensor = torch.empty_like(in_tensor)
        if isinstance(self.group, StatelessProcessGroup):
            tensors = self.group.all_gather_obj(in_tensor)
            result = tensors[0].clone()
            for t in tensors[1:]:
                result = torch.maximum(result, t) if op == dist.ReduceOp.MAX else result + t
            out_tensor.copy_(result)
        else:
            out_tensor.copy_(in_tensor)
            dist.all_reduce(out_tensor, op=op, group=self.group)
        return out_tensor

    def broadcast(self, tensor, src, stream=None):
        """tensor from rank src to every rank, in place (ncclBroadcast)."""
        if isinstance(self.group, StatelessProcessGroup):
            if self.rank == src:
                self.group.broadcast_obj(tensor, src=src)
            else:
                tensor.copy_(self.group.broadcast_obj(None, src=src))
            return
        dist.broadcast(tensor, src=dist.get_global_rank(self.group, src), group=self.group)
