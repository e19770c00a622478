"""Simulated vllm.distributed.device_communicators.custom_all_reduce (seed A's call path for
groups across nodes; for groups on one node the P2P check and the all-reduce kernel's wait, which
spins forever when GPU P2P is broken: gpu-p2p-spin)."""
import importlib.util
import os
import sys

import torch
import torch.distributed as dist

from vllm.distributed.device_communicators.custom_all_reduce_utils import gpu_p2p_access_check
from vllm.distributed.parallel_state import in_the_same_node_as
from vllm.logger import init_logger

logger = init_logger(__name__)

_SYMM_MEM_MODULE = "_hangscope_sim_torch_symmetric_memory"


def _load_symmetric_memory():
    """The simulated torch.distributed._symmetric_memory (torch 1.13 has none), loaded from
    tools/repro/sim_torch under a private module name: the real torch package stays importable
    and the functions' co_filename ends in torch/distributed/_symmetric_memory/__init__.py."""
    if _SYMM_MEM_MODULE in sys.modules:
        return sys.modules[_SYMM_MEM_MODULE]
    repro = os.path.dirname(os.path.abspath(__file__))
    for _ in range(4):  # .../sim/vllm/distributed/device_communicators -> .../repro
        repro = os.path.dirname(repro)
    path = os.path.join(repro, "sim_torch", "torch", "distributed", "_symmetric_memory",
                        "__init__.py")
    spec = importlib.util.spec_from_file_location(_SYMM_MEM_MODULE, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_SYMM_MEM_MODULE] = module
    spec.loader.exec_module(module)
    return module


# As vLLM's `import torch.distributed._symmetric_memory as torch_symm_mem`.
torch_symm_mem = _load_symmetric_memory()


def _spans_nodes(ranks):
    """Simulation only: whether the group's ranks sit on more than one node (node of a rank =
    rank // LOCAL_WORLD_SIZE, the torchrun layout). No collective, so seed A's sequence of
    collectives stays as it is; vLLM learns it with in_the_same_node_as."""
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", dist.get_world_size()))
    return len({r // local_world_size for r in ranks}) > 1


def _can_p2p(rank, world_size):
    """Whether this GPU can reach every peer's GPU over P2P: gpu_p2p_access_check for each peer
    (the cached result of an actual P2P copy test, unless VLLM_SKIP_P2P_CHECK trusts the
    driver's report)."""
    for i in range(world_size):
        if i == rank:
            continue
        if not gpu_p2p_access_check(rank, i):
            return False
    return True


class CustomAllreduce:
    """vLLM's custom all-reduce over IPC / NVLink buffers (one-shot and two-shot kernels)."""

    _SUPPORTED_WORLD_SIZES = [2, 4, 6, 8, 16]

    def __init__(self, group, device, max_size=8192 * 1024):
        """Checks the group can use it (world size, P2P access), allocates the IPC buffers and,
        for multi-node NVLink (MNNVL) groups, the symmetric-memory buffer (_init_mnnvl_buffer).
        A group on one node: in_the_same_node_as (every rank on the source's node?), supported
        world size, full NVLink, _can_p2p (the GPU P2P access cache), then the buffers and the
        signal pads every peer writes its flags into over P2P (create_shared_buffer)."""
        self.disabled = True
        self.group = group
        self.device = device
        self.max_size = max_size
        self.rank = dist.get_rank(group=self.group)
        self.world_size = dist.get_world_size(group=self.group)
        if self.world_size == 1:
            return
        if _spans_nodes(dist.get_process_group_ranks(self.group)):
            self.mnnvl_handle = None
            self._init_mnnvl_buffer(self.group, max_size)
            self.disabled = self.mnnvl_handle is None
            return
        if not all(in_the_same_node_as(group, source_rank=0)):
            logger.warning("Custom allreduce is disabled because this process group spans "
                           "across nodes.")
            return
        if self.world_size not in CustomAllreduce._SUPPORTED_WORLD_SIZES:
            logger.warning("Custom allreduce is disabled due to an unsupported world size: %d. "
                           "Supported world sizes: %s. To silence this warning, specify "
                           "disable_custom_all_reduce=True explicitly.", self.world_size,
                           str(CustomAllreduce._SUPPORTED_WORLD_SIZES))
            return
        # NVML reports every pair of GPUs NVLink-connected (the simulated node is an HGX board).
        self.fully_connected = True
        if not _can_p2p(self.rank, self.world_size):
            logger.warning("Custom allreduce is disabled because your platform lacks GPU P2P "
                           "capability or P2P test failed. To silence this warning, specify "
                           "disable_custom_all_reduce=True explicitly.")
            return
        self.disabled = False
        self.meta_ptrs = self.create_shared_buffer(max_size, group=group)
        self.buffer_ptrs = self.create_shared_buffer(max_size, group=group)
        # This rank's signal pad: peers write their flags into it over P2P, one per round.
        self.signal_pad = [0] * self.world_size
        self.flag = 0

    @staticmethod
    def create_shared_buffer(size_in_bytes, group=None, uncached=False):
        """Allocates a device buffer, opens an IPC handle to it and exchanges the handles with
        every rank of the group (all_gather_object), then opens the peers' handles: a list of
        every rank's buffer pointer."""
        pointer = id(object()) & 0xFFFFFFFFF000  # stands for this rank's cudaMalloc'ed buffer
        handles = [None] * dist.get_world_size(group=group)
        dist.all_gather_object(handles, ("cudaIpcMemHandle", pointer, size_in_bytes), group=group)
        return [handle[1] for handle in handles]

    def should_custom_ar(self, inp):
        """Whether this tensor goes through the custom all-reduce: enabled, a multiple of 16
        bytes, weakly contiguous, two GPUs or full NVLink, smaller than the buffer."""
        if self.disabled:
            return False
        inp_size = inp.numel() * inp.element_size()
        if inp_size % 16 != 0 or not inp.is_contiguous():
            return False
        if self.world_size == 2 or self.fully_connected:
            return inp_size < self.max_size
        return False

    def custom_all_reduce(self, input):
        """The main all-reduce API (CUDA-graph aware): None when disabled or the tensor does not
        fit; while capturing a graph the registered buffers; otherwise all_reduce with a copy
        into the pre-registered buffer (registered=False)."""
        if self.disabled or not self.should_custom_ar(input):
            return None
        return self.all_reduce(input, registered=False)

    def all_reduce(self, inp, *, out=None, registered=False):
        """Out-of-place all-reduce (ops.all_reduce, the one-shot or two-shot kernel): the input
        is copied into this rank's IPC buffer; each block writes its flag into every peer's
        signal pad over P2P, then spins until every peer's flag has reached its own pad, reads
        the peers' buffers over P2P and sums. With broken P2P the peers' writes never arrive and
        the kernel spins forever (100% GPU, the host thread behind it); here in pure Python."""
        if out is None:
            out = torch.empty_like(inp)
        self.flag += 1
        flag = self.flag
        # Our own flag lands; the writes to the peers' pads are lost on the broken P2P path.
        self.signal_pad[self.rank] = flag
        pad = self.signal_pad
        while True:
            arrived = 0
            for peer in range(self.world_size):
                if pad[peer] >= flag:
                    arrived += 1
            if arrived == self.world_size:
                break
        out.copy_(inp)
        return out

    def _init_mnnvl_buffer(self, group, max_size):
        """Allocates the MNNVL buffer in symmetric memory and rendezvouses it over the group
        (torch_symm_mem.empty, rendezvous, barrier); any RuntimeError disables custom
        collectives for the group (logged at DEBUG) and the rank moves on."""
        ranks = dist.get_process_group_ranks(group)
        group_name = "group_" + "_".join(str(r) for r in ranks)
        try:
            torch_symm_mem.enable_symm_mem_for_group(group_name, ranks)
            buffer = torch_symm_mem.empty(max_size // 4, dtype=torch.float32, device=self.device)
            handle = torch_symm_mem.rendezvous(buffer, group_name)
            dist.barrier(group=group)
            self.mnnvl_buffer = buffer
            self.mnnvl_handle = handle
        except RuntimeError as e:
            logger.debug("MNNVL AG/RS initialization failed: %s", e)
            logger.warning("Custom collectives are disabled because this multi-node group does "
                           "not support MNNVL multicast.")
