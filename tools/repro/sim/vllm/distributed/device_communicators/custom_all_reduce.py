"""Simulated vllm.distributed.device_communicators.custom_all_reduce (seed A's call path)."""
import importlib.util
import os
import sys

import torch
import torch.distributed as dist

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


class CustomAllreduce:
    """vLLM's custom all-reduce over IPC / NVLink buffers (one-shot and two-shot kernels)."""

    _SUPPORTED_WORLD_SIZES = [2, 4, 6, 8, 16]

    def __init__(self, group, device, max_size=8192 * 1024):
        """Checks the group can use it (world size, P2P access), allocates the IPC buffers and,
        for multi-node NVLink (MNNVL) groups, the symmetric-memory buffer (_init_mnnvl_buffer)."""
        self.disabled = True
        self.group = group
        self.device = device
        self.max_size = max_size
        self.rank = dist.get_rank(group=self.group)
        self.world_size = dist.get_world_size(group=self.group)
        if self.world_size == 1:
            return
        self.mnnvl_handle = None
        self._init_mnnvl_buffer(self.group, max_size)
        self.disabled = self.mnnvl_handle is None

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
