"""Simulated sglang.srt.distributed.parallel_state: SGLang's process groups (world, tensor
parallel, pipeline parallel), each a GroupCoordinator over a device group and a gloo CPU group.

Real torch.distributed work; the device groups are gloo groups too (no GPU), so no device
communicator (pynccl, custom all-reduce): all_reduce is torch.distributed.all_reduce on the
device group.
"""
import logging

import torch.distributed as dist

logger = logging.getLogger(__name__)

_WORLD = None
_TP = None
_PP = None
_group_name_counter = {}


def _get_unique_name(name):
    """A unique group name, "tp:0", "tp:1", ... (a counter per name)."""
    n = _group_name_counter.get(name, 0)
    _group_name_counter[name] = n + 1
    return f"{name}:{n}"


class GroupCoordinator:
    """The PyTorch process groups of one kind (world, tp, pp) and this rank's place in them."""

    def __init__(self, group_ranks, local_rank, torch_distributed_backend, group_name=None):
        """Every rank creates every group of the kind, in the same order, and keeps its own."""
        self.unique_name = _get_unique_name(group_name or "anonymous")
        self.rank = dist.get_rank()
        self.local_rank = local_rank
        self.device_group = None
        self.cpu_group = None
        for ranks in group_ranks:
            device_group = dist.new_group(ranks, backend=torch_distributed_backend)
            cpu_group = dist.new_group(ranks, backend="gloo")
            if self.rank in ranks:
                self.ranks = list(ranks)
                self.world_size = len(ranks)
                self.rank_in_group = ranks.index(self.rank)
                self.device_group = device_group
                self.cpu_group = cpu_group
        assert self.cpu_group is not None and self.device_group is not None

    @property
    def first_rank(self):
        """The group's first global rank."""
        return self.ranks[0]

    def barrier(self):
        """Barrier over the CPU group."""
        dist.barrier(group=self.cpu_group)

    def all_reduce(self, input_):
        """All-reduce (sum) over the device group; the identity for one rank."""
        if self.world_size == 1:
            return input_
        dist.all_reduce(input_, group=self.device_group)
        return input_


def init_world_group(ranks, local_rank, backend):
    """The world GroupCoordinator."""
    return GroupCoordinator([ranks], local_rank, backend, group_name="world")


def init_model_parallel_group(group_ranks, local_rank, backend, group_name=None):
    """The GroupCoordinator of one model-parallel kind."""
    return GroupCoordinator(group_ranks, local_rank, backend, group_name=group_name)


def get_world_group():
    """The world GroupCoordinator."""
    assert _WORLD is not None, "world group is not initialized"
    return _WORLD


def get_tp_group():
    """The tensor-parallel GroupCoordinator."""
    assert _TP is not None, "tensor model parallel group is not initialized"
    return _TP


def get_pp_group():
    """The pipeline-parallel GroupCoordinator."""
    assert _PP is not None, "pipeline model parallel group is not initialized"
    return _PP


def init_distributed_environment(world_size=-1, rank=-1, distributed_init_method="env://",
                                 local_rank=-1, backend="nccl", timeout=None):
    """torch.distributed's default group from the init method (tcp://<dist-init-addr> across
    nodes), then the world group."""
    global _WORLD
    logger.debug("world_size=%d rank=%d local_rank=%d distributed_init_method=%s backend=%s",
                world_size, rank, local_rank, distributed_init_method, backend)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, init_method=distributed_init_method,
                                world_size=world_size, rank=rank)
    if _WORLD is None:
        _WORLD = init_world_group(list(range(dist.get_world_size())), local_rank, backend)


def initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                              backend=None):
    """The TP groups (consecutive ranks), then the PP groups (ranks TP apart)."""
    global _TP, _PP
    world_size = dist.get_world_size()
    backend = backend or dist.get_backend(get_world_group().device_group)
    num_tp_groups = world_size // tensor_model_parallel_size
    group_ranks = [list(range(i * tensor_model_parallel_size,
                              (i + 1) * tensor_model_parallel_size))
                   for i in range(num_tp_groups)]
    _TP = init_model_parallel_group(group_ranks, get_world_group().local_rank, backend,
                                    group_name="tp")
    num_pp_groups = world_size // pipeline_model_parallel_size
    group_ranks = [list(range(i, world_size, num_pp_groups)) for i in range(num_pp_groups)]
    _PP = init_model_parallel_group(group_ranks, get_world_group().local_rank, backend,
                                    group_name="pp")
