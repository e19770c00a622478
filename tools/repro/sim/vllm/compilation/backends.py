"""Simulated vllm.compilation.backends: the torch.compile backend vLLM registers."""
import glob
import os
import time

from vllm.compilation.compiler_interface import InductorAdaptor
from vllm.logger import init_logger

logger = init_logger(__name__)

# The time the real cache load of a warm rank's graphs takes (the simulation loads nothing).
_CACHE_LOAD_SECONDS = 0.512


class VllmBackend:
    """The backend Dynamo calls with the traced FX graph of the model: splits it at the
    attention ops (piecewise graphs) and compiles each piece (CompilerManager, InductorAdaptor),
    with a cache per rank: $VLLM_CACHE_ROOT/torch_compile_cache/<hash>/rank_<rank>_<dp_rank>/
    <prefix>."""

    def __init__(self, parallel_config, prefix="backbone"):
        """A backend for one compiled module (prefix: backbone, eagle_head, ...) of this rank."""
        self.parallel_config = parallel_config
        self.prefix = prefix
        self.compiler = InductorAdaptor()

    def __call__(self, graph, example_inputs):
        """Compiles the graph Dynamo traced: the cache directory's hash covers the vLLM config,
        the traced code and the compiler; a warm rank loads its compiled graphs from
        rank_<rank>_<dp_rank> ("Directly load the compiled graph(s) ..."), a cold one compiles
        every piecewise graph (InductorAdaptor.compile) and logs "Compiling a graph for dynamic
        shape takes ..." when done. Returns the compiled callable."""
        root = os.environ.get("VLLM_CACHE_ROOT", os.path.expanduser("~/.cache/vllm"))
        local = (f"rank_{self.parallel_config.rank}_"
                 f"{self.parallel_config.data_parallel_rank}")
        start = time.time()
        if glob.glob(os.path.join(root, "torch_compile_cache", "*", local)):
            logger.info("Directly load the compiled graph(s) for dynamic shape from the cache, "
                        "took %.3f s", _CACHE_LOAD_SECONDS)
            return graph
        compiled, handle = self.compiler.compile(graph, example_inputs, {}, runtime_shape=None)
        logger.info("Compiling a graph for dynamic shape takes %.2f s", time.time() - start)
        return compiled
