"""Simulated vllm.distributed.device_communicators.custom_all_reduce_utils: the GPU P2P check."""
import json
import os

import torch.distributed as dist

from vllm.logger import init_logger

logger = init_logger(__name__)


def cuda_device_count_stateless():
    """The number of visible CUDA devices, without initialising CUDA (the real one asks NVML
    or the driver); here the entries of CUDA_VISIBLE_DEVICES, else one GPU per local rank."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return len(visible.split(","))
    return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))


def gpu_p2p_access_path():
    """$VLLM_CACHE_ROOT/gpu_p2p_access_cache_for_<CUDA_VISIBLE_DEVICES>.json (devices 0..n-1
    when CUDA_VISIBLE_DEVICES is unset): one cache per set of visible GPUs."""
    cuda_visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES") or ",".join(
        str(i) for i in range(cuda_device_count_stateless()))
    root = os.environ.get("VLLM_CACHE_ROOT", os.path.expanduser("~/.cache/vllm"))
    return os.path.join(root, f"gpu_p2p_access_cache_for_{cuda_visible_devices}.json")


def gpu_p2p_access_check(src, tgt):
    """Whether GPU src can access GPU tgt over P2P, from vLLM's cache file: the node's local
    rank 0 writes it when missing (the real one runs an actual P2P copy between every pair of
    GPUs in subprocesses, can_actually_p2p; here the driver's word, every pair true), a barrier
    on the world group, then every rank reads "<src>-><tgt>" from it."""
    from vllm.distributed.parallel_state import get_world_group
    is_distributed = dist.is_initialized()
    num_dev = cuda_device_count_stateless()
    path = gpu_p2p_access_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if (not is_distributed or get_world_group().local_rank == 0) and not os.path.exists(path):
        logger.info("generating GPU P2P access cache in %s", path)
        cache = {f"{i}->{j}": True for i in range(num_dev) for j in range(num_dev)}
        with open(path, "w") as f:
            json.dump(cache, f, indent=4)
    if is_distributed:
        get_world_group().barrier()
    logger.debug("reading GPU P2P access cache from %s", path)
    with open(path) as f:
        cache = json.load(f)
    return cache[f"{src}->{tgt}"]
