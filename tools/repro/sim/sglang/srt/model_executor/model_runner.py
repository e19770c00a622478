"""Simulated sglang.srt.model_executor.model_runner: one TP rank's model, its torch.distributed
initialisation (tcp://<dist-init-addr>, as SGLang's init_torch_distributed) and its forward."""
import logging

from sglang.srt.distributed.parallel_state import (init_distributed_environment,
                                                   initialize_model_parallel)
from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool
from sglang.srt.models.llama import LlamaForCausalLM

logger = logging.getLogger(__name__)


class ModelRunner:
    """Runs the forward passes of one TP rank."""

    def __init__(self, server_args, gpu_id, tp_rank, tp_size, pp_rank, pp_size, nccl_port):
        self.server_args = server_args
        self.gpu_id = gpu_id
        self.tp_rank = tp_rank
        self.tp_size = tp_size
        self.pp_rank = pp_rank
        self.pp_size = pp_size
        self.dist_port = nccl_port
        self.init_torch_distributed()
        self.load_model()
        self.init_memory_pool()

    def init_torch_distributed(self):
        """The default group over every TP x PP rank of every node, from --dist-init-addr (else
        the local nccl port), then SGLang's groups."""
        if self.server_args.dist_init_addr:
            dist_init_method = f"tcp://{self.server_args.dist_init_addr}"
        else:
            dist_init_method = f"tcp://127.0.0.1:{self.dist_port}"
        init_distributed_environment(backend="gloo", world_size=self.tp_size * self.pp_size,
                                     rank=self.tp_size * self.pp_rank + self.tp_rank,
                                     local_rank=self.gpu_id,
                                     distributed_init_method=dist_init_method)
        initialize_model_parallel(tensor_model_parallel_size=self.tp_size,
                                  pipeline_model_parallel_size=self.pp_size)

    def load_model(self):
        """The model (no checkpoint: shapes only)."""
        self.model = LlamaForCausalLM(tp_size=self.tp_size)
        logger.info("Load weight end. type=LlamaForCausalLM, dtype=torch.float32")

    def init_memory_pool(self):
        """The device KV cache."""
        self.token_to_kv_pool = MHATokenToKVPool(size=16, head_num=2, head_dim=8,
                                                 layer_num=len(self.model.model.layers))

    def forward_decode(self, forward_batch):
        """One decode step of every running request."""
        return self.model.forward(forward_batch.input_ids, forward_batch.positions,
                                  forward_batch)

    def forward_extend(self, forward_batch):
        """The prefill of new requests."""
        return self.model.forward(forward_batch.input_ids, forward_batch.positions,
                                  forward_batch)

    def forward(self, forward_batch):
        """The batch's forward by its mode."""
        if forward_batch.forward_mode.is_decode():
            return self.forward_decode(forward_batch)
        return self.forward_extend(forward_batch)

    def sample(self, logits_output, forward_batch):
        """Greedy next tokens."""
        return (logits_output.squeeze(-1).abs().long() % 32000).tolist()
