"""Simulated vllm.v1.executor.ray_executor: the executor that drives the model's workers as
Ray actors (RayWorkerWrapper, vllm/v1/executor/ray_utils.py) through a Ray compiled graph."""
import os

from vllm.logger import init_logger

logger = init_logger(__name__)


class RayDistributedExecutor:
    """vLLM's Ray executor, in the EngineCore process (the compiled graph's driver): one
    RayWorkerWrapper actor per GPU, pp_tp_workers[pp][tp]; every step runs through a compiled
    graph InputNode -> stage 0's execute_model_ray -> ... -> the last stage's -> MultiOutputNode.

    Simulation: the workers are the job's ranks (rank = pp * tp_size + tp); this executor only
    holds the driver's side of the graph."""

    uses_ray = True

    def __init__(self, pipeline_parallel_size, tensor_parallel_size):
        """The executor of a PP x TP model (the real one takes the vLLM config, places the
        actors and initialises their workers)."""
        self.pp_size = pipeline_parallel_size
        self.tp_size = tensor_parallel_size
        self.forward_dag = None
        self.has_connector = False

    def _compiled_ray_dag(self, enable_asyncio):
        """Builds and compiles the graph: scheduler output in, each stage's workers' outputs to
        the next stage (the intermediate tensors), the last stage's outputs to the driver. Sets
        RAY_CGRAPH_get_timeout to 300 s unless set (Ray's default is 10 s; it must be set
        before ray.dag is imported)."""
        from ray.dag.compiled_dag_node import CompiledDAG
        from ray.experimental.channel import Channel
        os.environ.setdefault("RAY_CGRAPH_get_timeout", "300")
        logger.info("VLLM_USE_RAY_COMPILED_DAG_CHANNEL_TYPE = %s", "auto")
        logger.info("VLLM_USE_RAY_COMPILED_DAG_OVERLAP_COMM = %s", False)
        logger.info("RAY_CGRAPH_get_timeout is set to %s", os.environ["RAY_CGRAPH_get_timeout"])
        last_stage = (self.pp_size - 1) * self.tp_size
        # The MultiOutputNode: one output channel per worker of the last stage (the driver
        # reads TP0's first).
        outputs = [Channel(src=last_stage + tp, driver_reader=True)
                   for tp in range(self.tp_size)]
        return CompiledDAG(outputs, multi_output=True)

    def execute_model(self, scheduler_output):
        """Runs one model step on every worker: submits the scheduler output to the compiled
        graph (built on the first call) and waits for the last stage's output
        (CompiledDAGRef.get, up to RAY_CGRAPH_get_timeout; then RayChannelTimeoutError, and
        the engine dies). The real one also takes non_block (a future instead of the wait)."""
        if self.forward_dag is None:
            self.forward_dag = self._compiled_ray_dag(enable_asyncio=False)
        refs = self.forward_dag.execute(scheduler_output)
        logger.info("RayDistributedExecutor: waiting for the compiled graph's output "
                    "(RAY_CGRAPH_get_timeout=%s s)", os.environ["RAY_CGRAPH_get_timeout"])
        return refs[0].get()
