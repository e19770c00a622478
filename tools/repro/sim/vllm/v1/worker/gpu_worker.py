"""Simulated vllm.v1.worker.gpu_worker: the worker around a GPUModelRunner."""
from vllm.logger import init_logger

logger = init_logger(__name__)


class Worker:
    """A GPU worker: one rank of the engine's model (its device, its GPUModelRunner)."""

    def __init__(self, model_runner, rank=0, local_rank=0, compile_sizes=()):
        """A worker for this rank with its model runner (the real one builds it from the vLLM
        config); compile_sizes: the batch sizes compiled ahead of serving."""
        self.model_runner = model_runner
        self.rank = rank
        self.local_rank = local_rank
        self.compile_sizes = list(compile_sizes)

    def compile_or_warm_up_model(self):
        """Warms the model up before serving: one _dummy_run per compile size (largest first;
        the first forward of the torch.compile'd model compiles it or loads it from vLLM's
        compile cache), the kernel warm-up, CUDA-graph capture, the sampler's warm-up."""
        for size in sorted(self.compile_sizes, reverse=True):
            logger.info("Compile and warming up model for size %d", size)
            self.model_runner._dummy_run(size, skip_eplb=True)

    def execute_dummy_batch(self):
        """Runs a one-token dummy batch (a DP rank with no requests while its peers step)."""
        self.model_runner._dummy_run(1, uniform_decode=True)

    def execute_model(self, scheduler_output):
        """Runs one step of the model for the scheduler's batch; the model runner's output."""
        return self.model_runner.execute_model(scheduler_output)
