"""Simulated vllm.v1.worker.gpu_model_runner."""
import torch

from flashinfer.fused_moe import trtllm_fp8_block_scale_moe


class GPUModelRunner:
    """Runs the model on this rank's GPU: inputs, forward, sampling (here one MoE layer)."""

    def __init__(self, tp_size, tp_rank, hidden_size=64, max_num_tokens=32):
        """A runner for this rank's tensor-parallel shard."""
        self.tp_size = tp_size
        self.tp_rank = tp_rank
        self.hidden_size = hidden_size
        self.max_num_tokens = max_num_tokens

    def _dummy_run(self, num_tokens, skip_eplb=False, is_profile=False):
        """Runs the model once on dummy inputs (profiling, warm-up, CUDA-graph capture); the
        forward reaches FusedMoE, which calls FlashInfer's fused MoE (its autotuner)."""
        hidden_states = torch.ones(num_tokens, self.hidden_size)
        # The real forward: model -> decoder layer -> FusedMoE -> flashinfer fused MoE.
        return trtllm_fp8_block_scale_moe(hidden_states, self.tp_size, self.tp_rank)
