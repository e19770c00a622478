"""Simulated vllm.v1.worker.dp_utils: how the data-parallel ranks agree on a batch."""
import torch
import torch.distributed as dist

from vllm.distributed.parallel_state import get_dp_group


def _get_device_and_group(parallel_config):
    """The device and group of the DP synchronisation: the DP group's device group, or its CPU
    (gloo) group with disable_nccl_for_dp_synchronization."""
    if parallel_config.disable_nccl_for_dp_synchronization:
        return "cpu", get_dp_group().cpu_group
    return "cpu", get_dp_group().device_group


def _run_ar(should_ubatch, should_dp_pad, orig_num_tokens_per_ubatch,
            padded_num_tokens_per_ubatch, cudagraph_mode, parallel_config):
    """One all-reduce over the DP group of a [5, dp_size] int32 tensor: every DP rank fills its
    column (tokens, padded tokens, micro-batching, DP padding, CUDA-graph mode)."""
    dp_size = parallel_config.data_parallel_size
    dp_rank = parallel_config.data_parallel_rank
    device, group = _get_device_and_group(parallel_config)
    tensor = torch.zeros(5, dp_size, device=device, dtype=torch.int32)
    tensor[0][dp_rank] = orig_num_tokens_per_ubatch
    tensor[1][dp_rank] = padded_num_tokens_per_ubatch
    tensor[2][dp_rank] = 1 if should_ubatch else 0
    tensor[3][dp_rank] = 1 if should_dp_pad else 0
    tensor[4][dp_rank] = cudagraph_mode
    dist.all_reduce(tensor, group=group)
    return tensor


def coordinate_batch_across_dp(num_tokens_unpadded, allow_microbatching, allow_dp_padding,
                               parallel_config, num_tokens_padded=None, uniform_decode=None,
                               num_scheduled_tokens_per_request=None, cudagraph_mode=0):
    """Coordinates the DP ranks before a forward (a real batch or a dummy one): whether to split
    the batch into micro-batches, the padded token count (the max over the DP ranks) and the
    CUDA-graph mode, from one all-reduce on the DP group (the real one through
    _synchronize_dp_ranks). Every DP rank must call it once per step, or the others wait."""
    if parallel_config.data_parallel_size == 1:
        return False, None, cudagraph_mode
    if num_tokens_padded is None:
        num_tokens_padded = num_tokens_unpadded
    should_ubatch = allow_microbatching and bool(uniform_decode)
    tensor = _run_ar(should_ubatch, allow_dp_padding, num_tokens_unpadded, num_tokens_padded,
                     cudagraph_mode, parallel_config)
    num_tokens_across_dp = tensor[1, :]
    if allow_dp_padding:
        num_tokens_after_padding = torch.full_like(num_tokens_across_dp,
                                                   int(num_tokens_across_dp.max()))
    else:
        num_tokens_after_padding = num_tokens_across_dp
    synced_cudagraph_mode = int(tensor[4, :].min())
    return bool(tensor[2, :].all()), num_tokens_after_padding, synced_cudagraph_mode
