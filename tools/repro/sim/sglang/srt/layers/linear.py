"""Simulated sglang.srt.layers.linear: the tensor-parallel linear layers."""
import torch

from sglang.srt.distributed.communication_op import tensor_model_parallel_all_reduce


class RowParallelLinear(torch.nn.Module):
    """A linear layer whose input dimension is split across the TP ranks: each rank's partial
    output is summed over the TP group."""

    def __init__(self, input_size, output_size, tp_size, reduce_results=True):
        super().__init__()
        self.weight = torch.nn.Parameter(
            torch.full((output_size, input_size // tp_size), 1.0 / input_size),
            requires_grad=False)
        self.tp_size = tp_size
        self.reduce_results = reduce_results

    def forward(self, input_):
        """The partial product, all-reduced across the TP group; (output, bias)."""
        output_parallel = torch.nn.functional.linear(input_, self.weight)
        if self.reduce_results and self.tp_size > 1:
            output = tensor_model_parallel_all_reduce(output_parallel)
        else:
            output = output_parallel
        return output, None
