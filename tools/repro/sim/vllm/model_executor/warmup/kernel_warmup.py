"""Simulated vllm.model_executor.warmup.kernel_warmup (seed B's call path)."""
import hashlib
import os

import torch.distributed as dist

import flashinfer
from flashinfer.autotuner import AutoTuner, autotune
from flashinfer.fused_moe import MoERunner
from vllm.distributed.parallel_state import get_world_group
from vllm.logger import init_logger

logger = init_logger(__name__)

# What the cache directory's hash covers (model, dtype, parallel sizes, ...): the same on every
# rank, so every rank of a node looks at the same file.
CONFIG_HASH_FACTORS = ("deepseek-ai/DeepSeek-V3", "fp8", "block_scale", "max_num_batched_tokens=32")


def flashinfer_autotune_cache_path():
    """$VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR or $VLLM_CACHE_ROOT/flashinfer_autotune_cache, then
    <flashinfer version>/<archs>/<sha256 of the config hash factors>/autotune_configs.json."""
    root = os.environ.get("VLLM_FLASHINFER_AUTOTUNE_CACHE_DIR") or os.path.join(
        os.environ.get("VLLM_CACHE_ROOT", os.path.expanduser("~/.cache/vllm")),
        "flashinfer_autotune_cache")
    digest = hashlib.sha256(repr(CONFIG_HASH_FACTORS).encode()).hexdigest()[:16]
    return os.path.join(root, flashinfer.__version__, "sm90", digest, "autotune_configs.json")


def flashinfer_autotune(runner):
    """Autotunes FlashInfer's kernels with a dummy run: world barrier, load the cached configs,
    tune the misses (one all-reduce per tactic on the tune group), world barrier, save."""
    world = get_world_group()
    tuner = AutoTuner.get()
    # The tune process group: every rank creates it, in the same order.
    tuner.process_group = dist.new_group(backend="gloo")
    world.barrier()
    cache_path = flashinfer_autotune_cache_path()
    if os.path.exists(cache_path) and not os.environ.get("VLLM_DISABLE_FLASHINFER_AUTOTUNE_CACHE"):
        tuner.load_configs(cache_path, MoERunner(runner.tp_size, runner.tp_rank))
    with autotune(True):
        runner._dummy_run(runner.max_num_tokens, skip_eplb=True, is_profile=True)
    world.barrier()
    if world.is_first_rank:
        tuner.save_configs(cache_path)
        logger.info("Saved FlashInfer autotune configs to %s", cache_path)


def kernel_warmup(worker):
    """Warms the kernels up before serving: DeepGEMM JIT, FlashInfer autotune, attention."""
    if os.environ.get("VLLM_USE_FLASHINFER_MOE_FP8", "1") == "1":
        flashinfer_autotune(worker.model_runner)
