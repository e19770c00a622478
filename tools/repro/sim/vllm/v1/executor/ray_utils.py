"""Simulated vllm.v1.executor.ray_utils (seed C's compiled-graph worker)."""
import torch
import torch.distributed as dist


def _run_forward(hidden_states, stalled):
    """The model's forward on this rank's shard; a stalled rank spins here forever in pure
    Python (as a worker stuck in compute or a device sync)."""
    if stalled:
        total = 0
        i = 0
        while True:
            total += i * i % 7
            i += 1
    return hidden_states * 2


class RayWorkerWrapper:
    """The Ray actor around a vLLM worker; the compiled graph calls execute_model_ray."""

    def __init__(self, rank, pp_rank, pp_size, tp_size, tp_group):
        """A worker of pipeline stage pp_rank with its stage's tensor-parallel group."""
        self.rank = rank
        self.pp_rank = pp_rank
        self.pp_size = pp_size
        self.tp_size = tp_size
        self.tp_group = tp_group
        self.step = 0
        self._stall_at_step = None  # simulation: the step at which this worker stalls

    def execute_model_ray(self, scheduler_output, intermediate_tensors=None):
        """Runs one step of the model for the compiled graph: forward (with the tensor-parallel
        all-reduce) and the intermediate tensors to the next pipeline stage."""
        hidden_states = scheduler_output if intermediate_tensors is None else intermediate_tensors
        hidden_states = _run_forward(hidden_states, self.step == self._stall_at_step)
        dist.all_reduce(hidden_states, group=self.tp_group)
        if self.pp_rank < self.pp_size - 1:
            dist.send(hidden_states, dst=self.rank + self.tp_size)
        self.step += 1
        return hidden_states
