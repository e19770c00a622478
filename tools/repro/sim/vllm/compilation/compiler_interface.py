"""Simulated vllm.compilation.compiler_interface: the compilers VllmBackend hands graphs to."""


class CompilerInterface:
    """A compiler vLLM can use for a graph (Inductor, standalone Inductor, eager)."""

    name = "base"

    def compile(self, graph, example_inputs, compiler_config, runtime_shape=None, key=None):
        """Compiles the graph for the runtime shape (None: dynamic); returns the compiled
        callable and a handle to find it in the compiler's cache again."""
        return graph, None


class InductorAdaptor(CompilerInterface):
    """The Inductor compiler (torch._inductor.compile_fx), with its FX graph cache and Triton
    kernel cache under the rank's vLLM compile cache directory."""

    name = "inductor"

    def compile(self, graph, example_inputs, compiler_config, runtime_shape=None, key=None):
        """Compiles the graph with Inductor (compile_fx: lowering, fusion, Triton / C++ code
        generation and autotuning of the kernels) and returns the compiled callable and its
        handle (the FX graph cache key, the artifact's path). On a cold cache a large model's
        graph takes minutes, longer than a peer's collective timeout; here it burns CPU in pure
        Python forever."""
        lowered = 0
        node = 0
        while True:
            lowered += node * node % 7
            node += 1
