"""Simulated torch.distributed._symmetric_memory (torch 1.13 has none).

Not a package on sys.path (a `torch` directory there would hide the real torch): vLLM's
simulated custom_all_reduce.py loads this file under a private module name. Seed A's
one-sided failure: on the ranks in _unsupported_ranks the rendezvous fails at once (as passing
the buffer's file descriptor to another node does); the others set their store key and wait
for every rank's key, forever.
"""
import datetime

import torch
import torch.distributed as dist

_group_ranks = {}
_unsupported_ranks = set()


def _simulate_unsupported_ranks(ranks):
    """Simulation only: the ranks whose rendezvous fails fast (no NVLink/MNNVL to the peers)."""
    _unsupported_ranks.clear()
    _unsupported_ranks.update(ranks)


def enable_symm_mem_for_group(group_name, ranks):
    """Enables symmetric memory for a process group (records its store; here its ranks)."""
    _group_ranks[group_name] = list(ranks)


def empty(*size, dtype=None, device=None):
    """Allocates a tensor in symmetric memory (CUDA memory every peer of the group can map)."""
    return torch.empty(*size, dtype=dtype, device=device)


class _SymmetricMemory:
    """The handle rendezvous returns: the peers' buffers, signal pads, a multicast pointer."""

    def __init__(self, buffer, group_name, rank, world_size):
        self.buffer = buffer
        self.group_name = group_name
        self.rank = rank
        self.world_size = world_size


def rendezvous(tensor, group_name):
    """Exchanges the buffer's handles (file descriptors, IPC handles) with every rank of the
    group through the group's store and maps the peers' buffers; collective, every rank must
    take part."""
    rank = dist.get_rank()
    ranks = _group_ranks[group_name]
    if rank in _unsupported_ranks:
        raise RuntimeError(
            f"SymmetricMemory rendezvous of group {group_name}: cannot exchange the buffer's "
            f"file descriptor with ranks on another node (no NVLink/MNNVL multicast)")
    store = dist.distributed_c10d._get_default_store()
    store.set(f"symm_mem/{group_name}/{rank}", f"fd:{id(tensor)}")
    keys = [f"symm_mem/{group_name}/{r}" for r in ranks]
    store.wait(keys, datetime.timedelta(days=7))
    return _SymmetricMemory(tensor, group_name, ranks.index(rank), len(ranks))
