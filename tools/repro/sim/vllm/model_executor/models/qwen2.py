"""Simulated vllm.model_executor.models.qwen2: a model whose weights can be replaced while the
server runs (load_weights), as RL weight sync does."""
import threading

import torch


class Qwen2ForCausalLM(torch.nn.Module):
    """Qwen2 for causal LM (here four small parameters with Qwen2's names)."""

    def __init__(self, hidden_size=8):
        """The embedding, one layer's attention projection and MLP, and the LM head."""
        super().__init__()
        self.params_dict = {
            "model.embed_tokens.weight": torch.zeros(32, hidden_size),
            "model.layers.0.self_attn.qkv_proj.weight": torch.zeros(3 * hidden_size, hidden_size),
            "model.layers.0.mlp.down_proj.weight": torch.zeros(hidden_size, hidden_size),
            "lm_head.weight": torch.zeros(32, hidden_size),
        }
        # Simulation only: the name of the weight whose loading never finishes.
        self._simulate_stall_on = None

    def load_weights(self, weights):
        """Copies each (name, tensor) into the model's parameter through its weight loader;
        returns the names loaded."""
        loaded = set()
        for name, loaded_weight in weights:
            param = self.params_dict[name]
            default_weight_loader(param, loaded_weight, stall=name == self._simulate_stall_on)
            loaded.add(name)
        return loaded


_loader_done = threading.Event()


def default_weight_loader(param, loaded_weight, stall=False):
    """Copies loaded_weight into param. stall (simulation): the copy waits for the device's
    previous work on the parameter, which never completes (an Event nobody sets)."""
    if stall:
        _loader_done.wait()
    param.data.copy_(loaded_weight)
