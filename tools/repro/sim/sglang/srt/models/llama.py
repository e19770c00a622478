"""Simulated sglang.srt.models.llama: a Llama decoder whose attention output and MLP output are
row-parallel (one TP all-reduce each per layer). No weights worth the name: tensors of the
model's shapes, so that every TP rank all-reduces as the real model does."""
import torch

from sglang.srt.layers.linear import RowParallelLinear


class LlamaAttention(torch.nn.Module):
    """Self-attention: reads the layer's KV cache, then o_proj (all-reduce)."""

    def __init__(self, hidden_size, tp_size, layer_id):
        super().__init__()
        self.layer_id = layer_id
        self.tp_size = tp_size
        self.o_proj = RowParallelLinear(hidden_size, hidden_size, tp_size)

    def forward(self, positions, hidden_states, forward_batch):
        """Attention over the cached keys and values, then the output projection."""
        k_cache = forward_batch.token_to_kv_pool.get_key_buffer(self.layer_id)
        v_cache = forward_batch.token_to_kv_pool.get_value_buffer(self.layer_id)
        width = hidden_states.shape[-1] // self.tp_size
        attn_output = hidden_states[:, :width] + k_cache.sum() + v_cache.sum()
        output, _ = self.o_proj(attn_output)
        return output


class LlamaMLP(torch.nn.Module):
    """The MLP: down_proj (all-reduce)."""

    def __init__(self, hidden_size, tp_size):
        super().__init__()
        self.tp_size = tp_size
        self.down_proj = RowParallelLinear(hidden_size, hidden_size, tp_size)

    def forward(self, x):
        """The gated MLP, reduced to its down projection."""
        x, _ = self.down_proj(x[:, :x.shape[-1] // self.tp_size])
        return x


class LlamaDecoderLayer(torch.nn.Module):
    """Attention then MLP, with residuals."""

    def __init__(self, hidden_size, tp_size, layer_id):
        super().__init__()
        self.self_attn = LlamaAttention(hidden_size, tp_size, layer_id)
        self.mlp = LlamaMLP(hidden_size, tp_size)

    def forward(self, positions, hidden_states, forward_batch, residual):
        """One decoder layer."""
        residual = hidden_states if residual is None else residual + hidden_states
        hidden_states = self.self_attn(positions, hidden_states, forward_batch)
        hidden_states = self.mlp(hidden_states)
        return hidden_states, residual


class LlamaModel(torch.nn.Module):
    """The decoder stack."""

    def __init__(self, hidden_size, num_layers, tp_size, vocab_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.vocab_size = vocab_size
        self.layers = torch.nn.ModuleList(
            [LlamaDecoderLayer(hidden_size, tp_size, i) for i in range(num_layers)])

    def forward(self, input_ids, positions, forward_batch):
        """Embeds the tokens, runs every layer."""
        hidden_states = torch.nn.functional.one_hot(
            input_ids % self.hidden_size, self.hidden_size).float()
        residual = None
        for i, layer in enumerate(self.layers):
            if forward_batch.simulate_on_layer is not None:
                forward_batch.simulate_on_layer(i)  # simulation only: the scenario's announcement
            hidden_states, residual = layer(positions, hidden_states, forward_batch, residual)
        return hidden_states + residual


class LlamaForCausalLM(torch.nn.Module):
    """The causal LM: the decoder stack and the logits of the last position."""

    def __init__(self, hidden_size=64, num_layers=4, tp_size=1, vocab_size=32000):
        super().__init__()
        self.model = LlamaModel(hidden_size, num_layers, tp_size, vocab_size)

    @torch.no_grad()
    def forward(self, input_ids, positions, forward_batch):
        """The next-token logits (one row per request)."""
        hidden_states = self.model(input_ids, positions, forward_batch)
        return hidden_states.sum(dim=-1, keepdim=True)
