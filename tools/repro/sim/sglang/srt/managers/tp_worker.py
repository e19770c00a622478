"""Simulated sglang.srt.managers.tp_worker: the scheduler's model worker of one TP rank."""
from sglang.srt.distributed.parallel_state import get_tp_group
from sglang.srt.model_executor.forward_batch_info import ForwardBatch
from sglang.srt.model_executor.model_runner import ModelRunner


class TpModelWorker:
    """A tensor-parallel model worker."""

    def __init__(self, server_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank, nccl_port):
        self.tp_rank = tp_rank
        self.model_runner = ModelRunner(server_args, gpu_id, tp_rank, server_args.tp_size,
                                        pp_rank, server_args.pp_size, nccl_port)

    def get_tp_group(self):
        """The TP GroupCoordinator."""
        return get_tp_group()

    def forward_batch_generation(self, model_worker_batch):
        """The batch's forward and its next tokens."""
        forward_batch = ForwardBatch.init_new(model_worker_batch, self.model_runner)
        logits_output = self.model_runner.forward(forward_batch)
        next_token_ids = self.model_runner.sample(logits_output, forward_batch)
        return logits_output, next_token_ids
