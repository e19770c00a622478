"""Simulated sglang.srt.model_executor.forward_batch_info: the batch as the model sees it."""
import dataclasses
import enum
from typing import Callable, Optional

import torch


class ForwardMode(enum.IntEnum):
    """Prefill (extend) or decode."""

    EXTEND = 1
    DECODE = 2

    def is_decode(self):
        """Whether this is a decode step."""
        return self == ForwardMode.DECODE

    def is_extend(self):
        """Whether this is a prefill (extend) step."""
        return self == ForwardMode.EXTEND


@dataclasses.dataclass
class ForwardBatch:
    """The tensors of one forward and the pools it reads."""

    forward_mode: ForwardMode
    batch_size: int
    input_ids: torch.Tensor
    positions: torch.Tensor
    token_to_kv_pool: object = None
    hicache_consumer_index: int = -1
    simulate_on_layer: Optional[Callable] = None  # simulation only: called before each layer

    @classmethod
    def init_new(cls, batch, model_runner):
        """From the scheduler's ModelWorkerBatch."""
        return cls(forward_mode=batch.forward_mode, batch_size=len(batch.input_ids),
                   input_ids=torch.tensor(batch.input_ids, dtype=torch.long),
                   positions=torch.tensor(batch.seq_lens, dtype=torch.long),
                   token_to_kv_pool=model_runner.token_to_kv_pool,
                   hicache_consumer_index=batch.hicache_consumer_index,
                   simulate_on_layer=batch.simulate_on_layer)
