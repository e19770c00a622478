"""Simulated vllm.distributed.parallel_state: vLLM's process groups (world, tensor parallel,
pipeline parallel, data parallel, expert parallel).

Real torch.distributed work on gloo CPU groups; the device groups are gloo groups too (no GPU).
"""
import os
import pickle
import socket
from multiprocessing import shared_memory
from unittest.mock import patch

import torch
import torch.distributed as dist

from vllm.logger import init_logger

logger = init_logger(__name__)

_WORLD = None
_TP = None
_PP = None
_DP = None
_EP = None
# Whether the TP group's device communicator may use the custom all-reduce
# (set_custom_all_reduce: the engine's --disable-custom-all-reduce switches it off).
_ENABLE_CUSTOM_ALL_REDUCE = True
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


def set_custom_all_reduce(enable):
    """Enables or disables the custom all-reduce of the TP groups' device communicators (vLLM's
    worker calls it with `not parallel_config.disable_custom_all_reduce` before building the
    groups)."""
    global _ENABLE_CUSTOM_ALL_REDUCE
    _ENABLE_CUSTOM_ALL_REDUCE = enable


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

    @property
    def next_rank(self):
        """The global rank of the group's next rank (pipeline order, wrapping around)."""
        return self.ranks[(self.rank_in_group + 1) % self.world_size]

    @property
    def prev_rank(self):
        """The global rank of the group's previous rank (pipeline order, wrapping around)."""
        return self.ranks[(self.rank_in_group - 1) % self.world_size]

    @property
    def is_last_rank(self):
        """Whether this rank is the group's last (the last pipeline stage)."""
        return self.rank == self.ranks[-1]

    def send_object(self, obj, dst):
        """Sends a picklable object to dst (a rank of the group): its size as a one-element
        long tensor, then the pickled bytes as a uint8 tensor, both on the CPU group."""
        assert dst < self.world_size, f"Invalid dst rank ({dst})"
        object_tensor = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
        size_tensor = torch.tensor([object_tensor.numel()], dtype=torch.long)
        dist.send(size_tensor, dst=self.ranks[dst], group=self.cpu_group)
        dist.send(object_tensor, dst=self.ranks[dst], group=self.cpu_group)

    def recv_object(self, src):
        """Receives a picklable object from src (a rank of the group): the size, then the
        bytes, on the CPU group."""
        assert src < self.world_size, f"Invalid src rank ({src})"
        size_tensor = torch.empty(1, dtype=torch.long)
        dist.recv(size_tensor, src=self.ranks[src], group=self.cpu_group)
        object_tensor = torch.empty(int(size_tensor.item()), dtype=torch.uint8)
        dist.recv(object_tensor, src=self.ranks[src], group=self.cpu_group)
        return pickle.loads(object_tensor.numpy().tobytes())

    def send_tensor_dict(self, tensor_dict, dst=None, all_gather_group=None):
        """Sends a dict of tensors to the group's next rank (pipeline parallelism: the
        intermediate tensors to the next stage): the metadata (keys, shapes, dtypes) with
        send_object on the CPU group, then each tensor with torch.distributed.send on the device
        group. The real one with all_gather_group (the TP group) sends only this TP rank's slice
        of each tensor; here the whole tensor."""
        if self.world_size == 1:
            return tensor_dict
        if dst is None:
            dst = (self.rank_in_group + 1) % self.world_size
        metadata = [(key, tuple(value.shape), value.dtype) for key, value in tensor_dict.items()]
        self.send_object(metadata, dst=dst)
        for value in tensor_dict.values():
            dist.send(value, dst=self.ranks[dst], group=self.device_group)
        return None

    def recv_tensor_dict(self, src=None, all_gather_group=None):
        """Receives a dict of tensors from the group's previous rank: the metadata with
        recv_object, then each tensor with torch.distributed.recv on the device group."""
        if self.world_size == 1:
            return None
        if src is None:
            src = (self.rank_in_group - 1) % self.world_size
        metadata = self.recv_object(src=src)
        tensor_dict = {}
        for key, shape, dtype in metadata:
            value = torch.empty(shape, dtype=dtype)
            dist.recv(value, src=self.ranks[src], group=self.device_group)
            tensor_dict[key] = value
        return tensor_dict


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


def get_pp_group():
    """The pipeline-parallel GroupCoordinator."""
    assert _PP is not None, "pipeline model parallel group is not initialized"
    return _PP


def get_dp_group():
    """The data-parallel GroupCoordinator."""
    assert _DP is not None, "data parallel group is not initialized"
    return _DP


def get_ep_group():
    """The expert-parallel GroupCoordinator."""
    assert _EP is not None, "expert parallel group is not initialized"
    return _EP


def model_parallel_is_initialized():
    """Whether the TP and PP groups exist."""
    return _TP is not None and _PP is not None


def ensure_model_parallel_initialized(tensor_model_parallel_size,
                                      pipeline_model_parallel_size, backend=None,
                                      data_parallel_size=1):
    """Builds the model-parallel groups unless they exist (then checks their sizes), as the
    worker's init_worker_distributed_environment calls it."""
    if not model_parallel_is_initialized():
        initialize_model_parallel(tensor_model_parallel_size, pipeline_model_parallel_size,
                                  backend, data_parallel_size=data_parallel_size)
        return
    assert get_tp_group().world_size == tensor_model_parallel_size
    assert get_pp_group().world_size == pipeline_model_parallel_size


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
    """Creates the model-parallel groups as vLLM does: the ranks laid out as
    ExternalDP x DP x PP x TP (TP innermost), then, every rank building every group in the same
    order, the TP groups (device communicator and message-queue broadcaster), the PP groups,
    the DP groups and the EP groups (DP x TP ranks of one PP stage), each rank's place logged.
    Shortcuts: the real one takes the DP size from the vLLM config (here a parameter) and also
    builds the decode-context-parallel groups (DCP, size 1 by default) after TP."""
    global _TP, _PP, _DP, _EP
    assert dist.is_initialized()
    world_size = dist.get_world_size()
    rank = dist.get_rank()
    backend = backend or dist.get_backend(get_world_group().device_group)
    # the layout order is: ExternalDP x DP x PP x TP
    all_ranks = torch.arange(world_size).reshape(
        -1, data_parallel_size, pipeline_model_parallel_size, tensor_model_parallel_size)

    # Build the tensor model-parallel groups.
    assert _TP is None, "tensor model parallel group is already initialized"
    group_ranks = [x.tolist() for x in all_ranks.view(-1, tensor_model_parallel_size).unbind(0)]
    # message queue broadcaster is only used in tensor model parallel group
    _TP = init_model_parallel_group(group_ranks, get_world_group().local_rank, backend,
                                    use_message_queue_broadcaster=True, group_name="tp")

    # Build the pipeline model-parallel groups.
    assert _PP is None, "pipeline model parallel group is already initialized"
    group_ranks = [x.tolist() for x in
                   all_ranks.transpose(2, 3).reshape(-1, pipeline_model_parallel_size).unbind(0)]
    _PP = init_model_parallel_group(group_ranks, get_world_group().local_rank, backend,
                                    group_name="pp")

    # Build the data-parallel groups (the simulation's DP synchronisation needs no device
    # communicator: coordinate_batch_across_dp uses the CPU group).
    assert _DP is None, "data parallel group is already initialized"
    group_ranks = [x.tolist() for x in
                   all_ranks.transpose(1, 3).reshape(-1, data_parallel_size).unbind(0)]
    _DP = GroupCoordinator(group_ranks=group_ranks, local_rank=get_world_group().local_rank,
                           torch_distributed_backend=backend, use_device_communicator=False,
                           group_name="dp")

    # Build the expert-parallel groups.
    assert _EP is None, "expert parallel group is already initialized"
    group_ranks = [x.tolist() for x in all_ranks.transpose(1, 2).reshape(
        -1, data_parallel_size * tensor_model_parallel_size).unbind(0)]
    _EP = init_model_parallel_group(group_ranks, get_world_group().local_rank, backend,
                                    group_name="ep")

    logger.info("rank %s in world size %s is assigned as DP rank %s, PP rank %s, TP rank %s, "
                "EP rank %s", rank, world_size, _DP.rank_in_group, _PP.rank_in_group,
                _TP.rank_in_group, _EP.rank_in_group)
