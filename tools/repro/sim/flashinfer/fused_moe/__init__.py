"""Simulated flashinfer.fused_moe: one fused-MoE entry point with its tunable runner."""
import torch

from flashinfer.autotuner import AutoTuner, TunableRunner

# The profiles (num_tokens buckets) the MoE GEMMs are tuned for.
NUM_TOKENS_BUCKETS = (8, 16, 32)


class MoERunner(TunableRunner):
    """The TRT-LLM fused-MoE GEMM runner; its tactics depend on the rank's expert shard."""

    def __init__(self, tp_size, tp_rank, ep_size=1, ep_rank=0):
        """A runner for this rank's shard (tp/ep size and rank)."""
        self.tp_size, self.tp_rank, self.ep_size, self.ep_rank = tp_size, tp_rank, ep_size, ep_rank

    def get_valid_tactics(self, inputs, profile):
        """Four tile configurations."""
        return [0, 1, 2, 3]

    def cache_extras(self):
        """The key holds tp/ep size and rank: a file written by one rank serves that rank."""
        return (("tp_size", self.tp_size), ("tp_rank", self.tp_rank),
                ("ep_size", self.ep_size), ("ep_rank", self.ep_rank))

    def forward(self, inputs, tactic=-1):
        """The GEMM (a small CPU matmul here)."""
        return inputs @ inputs.T


def trtllm_fp8_block_scale_moe(hidden_states, tp_size, tp_rank, ep_size=1, ep_rank=0):
    """FlashInfer's TRT-LLM FP8 block-scale MoE: picks the GEMM tactic with the autotuner
    (choose_one on trtllm::fused_moe::gemm1), then runs it."""
    runner = MoERunner(tp_size, tp_rank, ep_size, ep_rank)
    tuning_config = {"profiles": [(n, hidden_states.shape[-1]) for n in NUM_TOKENS_BUCKETS]}
    runner, tactic = AutoTuner.get().choose_one("trtllm::fused_moe::gemm1", [runner],
                                                tuning_config, hidden_states)
    return runner.forward(hidden_states, tactic=tactic)
