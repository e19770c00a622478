"""Simulated vllm.distributed.parallel_state: vLLM's process groups (world, tensor parallel,
data parallel).

Real torch.distributed work on gloo CPU groups; the device groups are gloo groups too (no GPU).
"""
import os
import socket
from multiprocessing import shared_memory
from unittest.mock import patch

import torch
import torch.distributed as dist

from vllm.logger import init_logger

logger = init_logger(__name__)

_WORLD = None
_TP = None
_DP = None
_group_name_counter = {}
# Simulation: how in_the_same_node_as probes. False (seed A): a barrier first, then the source's
# hostname, then the all-reduce. True: vLLM's own probe with a shared-memory segment.
_shm_probe = False


def _simulate_shm_probe(enabled=True):
    """Simulation only: in_the_same_node_as probes as vLLM does (the source rank creates a
    SharedMemory segment in /dev/shm and broadcasts its name, the others read its magic
    message, a barrier, an all-reduce of the flags) instead of seed A's barrier-first order."""
    global _shm_probe
    _shm_probe = enabled


def _get_unique_name(name):
    """Returns a unique group name, "tp:0", "tp:1", ... (a counter per name, as in vLLM)."""
    n = _group_name_counter.get(name, 0)
    _group_name_counter[name] = n + 1
    return f"{name}:{n}"


class GroupCoordinator:
    """PyTorch process groups of one kind (world, tp, pp, ...) with vLLM's communicators."""

    def __init__(self, group_ranks, local_rank, torch_distributed_backend,
                 use_device_communicator, use_message_queue_broadcaster=False, group_name=None):
        """Creates a device group and a gloo CPU group per rank list (every rank creates every
        group, in the same order), then the device communicator and the message queue."""
        self.unique_name = _get_unique_name(group_name or "anonymous")
        self.rank = dist.get_rank()
        self.local_rank = local_rank
        self.ranks = []
        self.device_group = None
        self.cpu_group = None
        world_size = dist.get_world_size()
        for ranks in group_ranks:
            if group_name == "world" and list(ranks) == list(range(world_size)):
                # Simulation: the world coordinator uses the default group itself.
                device_group = cpu_group = dist.group.WORLD
            else:
                device_group = dist.new_group(ranks, backend=torch_distributed_backend)
                cpu_group = dist.new_group(ranks, backend="gloo")
            if self.rank in ranks:
                self.ranks = list(ranks)
                self.world_size = len(ranks)
                self.rank_in_group = ranks.index(self.rank)
                self.device_group = device_group
                self.cpu_group = cpu_group
        assert self.cpu_group is not None and self.device_group is not None

        self.device_communicator = None
        if use_device_communicator and self.world_size > 1:
            from vllm.distributed.device_communicators.cuda_communicator import CudaCommunicator
            self.device_communicator = CudaCommunicator(
                cpu_group=self.cpu_group, device=torch.device("cpu"),
                device_group=self.device_group, unique_name=self.unique_name)

        self.mq_broadcaster = None
        if use_message_queue_broadcaster and self.world_size > 1:
            from vllm.distributed.device_communicators.shm_broadcast import MessageQueue
            self.mq_broadcaster = MessageQueue.create_from_process_group(
                self.cpu_group, 1 << 22, 6)

    @property
    def first_rank(self):
        """The first (global) rank of the group."""
        return self.ranks[0]

    @property
    def is_first_rank(self):
        """Whether this rank is the group's first."""
        return self.rank == self.first_rank

    def barrier(self):
        """Barrier over the group's CPU (gloo) group, so that no device work is involved."""
        dist.barrier(group=self.cpu_group)

    def all_reduce(self, input_):
        """All-reduce (sum) of a tensor over the group: the identity for one rank, else the
        device communicator's all-reduce (custom all-reduce, quick all-reduce, symmetric memory
        or pynccl, whichever fits); the real one goes through the custom op
        torch.ops.vllm.all_reduce to _all_reduce_out_place, so torch.compile can trace it."""
        if self.world_size == 1:
            return input_
        if self.device_communicator is None:
            dist.all_reduce(input_, group=self.device_group)
            return input_
        return self.device_communicator.all_reduce(input_)


def in_the_same_node_as(pg, source_rank=0):
    """Tells, for every rank of the group, whether it is on the same node as source_rank.

    The real one has source_rank create a SharedMemory segment (128 bytes in /dev/shm), write
    a magic message and broadcast the segment's name (broadcast_object_list); every other rank
    receives the name and tries to read the magic message from the segment; OSErrors are
    swallowed; then a barrier and an all-reduce of the flags. With _simulate_shm_probe that
    order, where a source that cannot create the segment (/dev/shm full) skips the broadcast
    and goes on to the all-reduce; its peers wait in broadcast_object_list. Otherwise (seed A)
    the barrier first (where the seed-A ranks hang), then the source's hostname.
    """
    assert dist.get_backend(pg) != dist.Backend.NCCL, "in_the_same_node_as should be tested with a non-NCCL group."
    rank = dist.get_rank(group=pg)
    world_size = dist.get_world_size(group=pg)
    ranks = dist.get_process_group_ranks(pg)
    if _shm_probe:
        magic_message = b"magic_message"
        is_in_the_same_node = torch.tensor([0] * world_size, dtype=torch.int32)
        shm = None
        # Python tracks a segment it did not create as if it did (a resource tracker process
        # per rank); vLLM patches the registration out for the readers, the simulation for the
        # source too (no extra process; the source removes its segment itself).
        with patch("multiprocessing.resource_tracker.register", lambda *args, **kwargs: None), \
                patch("multiprocessing.resource_tracker.unregister", lambda *args, **kwargs: None):
            try:
                if rank == source_rank:
                    try:
                        shm = shared_memory.SharedMemory(create=True, size=128)
                        # Reserve the segment's pages now: on a full /dev/shm this fails with
                        # ENOSPC (the real source would take SIGBUS writing the magic message).
                        os.posix_fallocate(shm._fd, 0, shm.size)
                    except OSError as e:
                        logger.warning("in_the_same_node_as: could not create shared memory "
                                       "segment in /dev/shm (%s); skipping the broadcast", e)
                        if shm is not None:
                            shm.close()
                            shm.unlink()
                        dist.all_reduce(is_in_the_same_node, group=pg)
                        return [x == 1 for x in is_in_the_same_node.tolist()]
                    shm.buf[:len(magic_message)] = magic_message
                    dist.broadcast_object_list([shm.name], src=ranks[source_rank], group=pg)
                    is_in_the_same_node[rank] = 1
                else:
                    recv = [None]
                    dist.broadcast_object_list(recv, src=ranks[source_rank], group=pg)
                    shm = shared_memory.SharedMemory(name=recv[0])
                    if shm.buf[:len(magic_message)] == magic_message:
                        is_in_the_same_node[rank] = 1
            except Exception as e:
                logger.error("Error ignored in is_in_the_same_node: %s", e)
            finally:
                if shm is not None:
                    shm.close()
            dist.barrier(group=pg)
            if rank == source_rank and shm is not None:
                shm.unlink()
        dist.all_reduce(is_in_the_same_node, group=pg)
        return [x == 1 for x in is_in_the_same_node.tolist()]
    dist.barrier(group=pg)
    recv = [socket.gethostname() if rank == source_rank else None]
    dist.broadcast_object_list(recv, src=ranks[source_rank], group=pg)
    is_in_the_same_node = torch.tensor([0] * world_size, dtype=torch.int32)
    is_in_the_same_node[rank] = int(recv[0] == socket.gethostname())
    dist.all_reduce(is_in_the_same_node, group=pg)
    return [x == 1 for x in is_in_the_same_node.tolist()]


def init_world_group(ranks, local_rank, backend):
    """Builds the world GroupCoordinator (no device communicator)."""
    return GroupCoordinator(group_ranks=[ranks], local_rank=local_rank,
                            torch_distributed_backend=backend, use_device_communicator=False,
                            group_name="world")


def init_model_parallel_group(group_ranks, local_rank, backend,
                              use_message_queue_broadcaster=False, group_name=None):
    """Builds the GroupCoordinator of one model-parallel kind (tp, pp, ...) with the device
    communicator (custom all-reduce) and, for tp, the message-queue broadcaster."""
    return GroupCoordinator(group_ranks=group_ranks, local_rank=local_rank,
                            torch_distributed_backend=backend, use_device_communicator=True,
                            use_message_queue_broadcaster=use_message_queue_broadcaster,
                            group_name=group_name)


def get_world_group():
    """The world GroupCoordinator."""
    assert _WORLD is not None, "world group is not initialized"
    return _WORLD


def get_tp_group():
    """The tensor-parallel GroupCoordinator."""
    assert _TP is not None, "tensor model parallel group is not initialized"
    return _TP


def get_dp_group():
    """The data-parallel GroupCoordinator."""
    assert _DP is not None, "data parallel group is not initialized"
    return _DP


def init_distributed_environment(world_size=-1, rank=-1, distributed_init_method="env://",
                                 local_rank=-1, backend="gloo"):
    """Initialises torch.distributed (unless already done) and the world group."""
    global _WORLD
    logger.debug("world_size=%d rank=%d local_rank=%d distributed_init_method=%s backend=%s",
                 world_size, rank, local_rank, distributed_init_method, backend)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, init_method=distributed_init_method,
                                world_size=world_size, rank=rank)
    if local_rank == -1:
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if _WORLD is None:
        _WORLD = init_world_group(list(range(dist.get_world_size())), local_rank, backend)


def initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                              backend=None, data_parallel_size=1):
    """Creates the model-parallel groups (TP innermost, DP outermost; the real one takes the DP
    size from the vLLM config); here the TP groups, each with the device communicator and the
    message-queue broadcaster, as vLLM does, then (data_parallel_size > 1) the DP groups."""
    global _TP, _DP
    world_size = dist.get_world_size()
    backend = backend or dist.get_backend(get_world_group().device_group)
    group_ranks = [list(range(i * tensor_model_parallel_size, (i + 1) * tensor_model_parallel_size))
                   for i in range(world_size // tensor_model_parallel_size)]
    _TP = init_model_parallel_group(group_ranks, get_world_group().local_rank, backend,
                                    use_message_queue_broadcaster=True, group_name="tp")
    if data_parallel_size > 1:
        # One DP group per position inside a DP replica (ranks dp * replica_size + i). The real
        # DP coordinator has a device communicator too; the simulation's needs none.
        replica_size = world_size // data_parallel_size
        group_ranks = [[d * replica_size + i for d in range(data_parallel_size)]
                       for i in range(replica_size)]
        _DP = GroupCoordinator(group_ranks=group_ranks, local_rank=get_world_group().local_rank,
                               torch_distributed_backend=backend, use_device_communicator=False,
                               group_name="dp")
