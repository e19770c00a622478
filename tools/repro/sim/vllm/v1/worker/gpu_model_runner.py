"""Simulated vllm.v1.worker.gpu_model_runner."""
import torch
import torch.distributed as dist
import torch.fx

from flashinfer.fused_moe import trtllm_fp8_block_scale_moe
from vllm.config import ParallelConfig
from vllm.distributed.communication_op import tensor_model_parallel_all_reduce
from vllm.distributed.parallel_state import get_world_group
from vllm.v1.worker.dp_utils import coordinate_batch_across_dp


class GPUModelRunner:
    """Runs the model on this rank's GPU: inputs, forward, sampling (here one MoE layer)."""

    def __init__(self, tp_size, tp_rank, hidden_size=64, max_num_tokens=32,
                 parallel_config=None, compile_model=False):
        """A runner for this rank's tensor-parallel shard; parallel_config: the engine's layout
        (data parallelism); compile_model: the model is torch.compile'd with vLLM's backend."""
        self.tp_size = tp_size
        self.tp_rank = tp_rank
        self.hidden_size = hidden_size
        self.max_num_tokens = max_num_tokens
        self.parallel_config = parallel_config or ParallelConfig(
            tensor_parallel_size=tp_size, rank=tp_rank)
        self.vllm_backend = None
        self.compiled_model = None
        # Simulation only: called after the forward, before the step's output leaves the rank
        # (a scenario's stall, e.g. waiting for a KV-cache save).
        self._simulate_after_forward = None
        if compile_model:
            from vllm.compilation.backends import VllmBackend
            self.vllm_backend = VllmBackend(self.parallel_config, prefix="backbone")

    def _dummy_run(self, num_tokens, skip_eplb=False, is_profile=False, uniform_decode=False):
        """Runs the model once on dummy inputs (profiling, warm-up, CUDA-graph capture, a DP
        rank's dummy batch): with data parallelism the DP ranks first agree on the batch
        (coordinate_batch_across_dp); the first forward of the torch.compile'd model hands its
        graph to vLLM's backend (VllmBackend); the forward all-reduces across the tensor-parallel
        ranks and reaches FusedMoE, which calls FlashInfer's fused MoE (its autotuner)."""
        if self.parallel_config.data_parallel_size > 1:
            coordinate_batch_across_dp(num_tokens_unpadded=num_tokens, allow_microbatching=True,
                                       allow_dp_padding=True,
                                       parallel_config=self.parallel_config,
                                       uniform_decode=uniform_decode)
        hidden_states = torch.ones(num_tokens, self.hidden_size)
        if self.vllm_backend is not None:
            if self.compiled_model is None:
                # Dynamo's trace of the model, handed to the backend on the first call.
                graph = torch.fx.symbolic_trace(torch.nn.Identity())
                self.compiled_model = self.vllm_backend(graph, [hidden_states])
            hidden_states = self.compiled_model(hidden_states)
            # The forward's tensor-parallel all-reduce (TP = world here: the world gloo group).
            dist.all_reduce(hidden_states, group=get_world_group().cpu_group)
        # The real forward: model -> decoder layer -> FusedMoE -> flashinfer fused MoE.
        return trtllm_fp8_block_scale_moe(hidden_states, self.tp_size, self.tp_rank)

    def execute_model(self, scheduler_output, intermediate_tensors=None):
        """Runs one step for the scheduler's batch: prepares the inputs (with data parallelism
        the DP ranks first agree on the padded batch, coordinate_batch_across_dp), runs the
        forward (its RowParallelLinear layers all-reduce across the tensor-parallel group),
        samples. A pipeline stage before the last returns its intermediate tensors (a dict)
        for the worker to send on; intermediate_tensors: what the previous stage sent."""
        num_tokens = int(scheduler_output.total_num_scheduled_tokens)
        if self.parallel_config.data_parallel_size > 1:
            coordinate_batch_across_dp(num_tokens_unpadded=num_tokens, allow_microbatching=True,
                                       allow_dp_padding=True,
                                       parallel_config=self.parallel_config)
        if intermediate_tensors is not None:
            hidden_states = intermediate_tensors["hidden_states"]
        else:
            hidden_states = torch.ones(num_tokens, self.hidden_size)
        # The forward: each decoder layer's o_proj / down_proj (RowParallelLinear) all-reduce.
        hidden_states = tensor_model_parallel_all_reduce(hidden_states)
        if self._simulate_after_forward is not None:
            self._simulate_after_forward()
        if self.parallel_config.pipeline_parallel_size > 1 and not self._is_last_pp_rank():
            return {"hidden_states": hidden_states}
        return hidden_states

    @staticmethod
    def _is_last_pp_rank():
        """Whether this rank runs the last pipeline stage (get_pp_group().is_last_rank)."""
        from vllm.distributed.parallel_state import get_pp_group
        return get_pp_group().is_last_rank
