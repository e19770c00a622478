"""Simulated sglang.srt.mem_cache.memory_pool: the device KV cache (MHATokenToKVPool). With the
hierarchical cache, reading a layer's buffers first waits for that layer's load from host
memory."""
import torch


class MHATokenToKVPool:
    """Per-layer key and value buffers of the multi-head attention layers."""

    def __init__(self, size, head_num, head_dim, layer_num):
        self.layer_num = layer_num
        self.k_buffer = [torch.zeros(size, head_num, head_dim) for _ in range(layer_num)]
        self.v_buffer = [torch.zeros(size, head_num, head_dim) for _ in range(layer_num)]
        self.layer_transfer_counter = None

    def register_layer_transfer_counter(self, layer_transfer_counter):
        """The hierarchical cache's LayerDoneCounter."""
        self.layer_transfer_counter = layer_transfer_counter

    def get_key_buffer(self, layer_id):
        """The layer's key buffer, once its load finished."""
        if self.layer_transfer_counter is not None:
            self.layer_transfer_counter.wait_until(layer_id)
        return self.k_buffer[layer_id]

    def get_value_buffer(self, layer_id):
        """The layer's value buffer, once its load finished."""
        if self.layer_transfer_counter is not None:
            self.layer_transfer_counter.wait_until(layer_id)
        return self.v_buffer[layer_id]
